"""Reading what a user names (a program, a policy, a corpus case), bounded: a device or an
endless pipe (`/dev/zero`, `yes |`) ends in a typed error instead of filling the host's
memory."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

__all__ = ["TooLarge", "read_bounded"]


class TooLarge(ValueError):
    """More than `limit_bytes` was there to read.

    Attributes:
        limit_bytes: the most that may be read, in bytes.
    """

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(f"larger than {limit_bytes} bytes")
        self.limit_bytes = limit_bytes


def read_bounded(source: Path | BinaryIO, limit_bytes: int) -> bytes:
    """At most `limit_bytes` bytes of a file (`Path`) or an open binary stream, whole.

    Raises:
        TooLarge: it holds more (only `limit_bytes + 1` bytes are ever read).
        OSError: the file cannot be opened or read.
    """
    if isinstance(source, Path):
        with source.open("rb") as stream:
            data = stream.read(limit_bytes + 1)
    else:
        data = source.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise TooLarge(limit_bytes)
    return data
