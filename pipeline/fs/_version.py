"""File versions: what "present at version v" means for the read-before-edit gate."""

from __future__ import annotations

import hashlib
import os

import msgspec

__all__ = ["Version"]


class Version(msgspec.Struct, frozen=True):
    """One observed state of a file's bytes.

    Attributes:
        mtime_ns: modification time, nanoseconds since the epoch (informative).
        size: length in bytes.
        sha256: hex digest of the bytes.

    The gate stores versions as text, ``str(version)`` = ``"<mtime_ns>:<size>:<sha256>"``
    (also the ``version`` of ``fs/observed`` events). Freshness compares ``size`` and
    ``sha256`` only (``same_content``): a same-second rewrite with other bytes is caught,
    and a touch or a rewrite with identical bytes does not force a re-read (the edit would
    apply to exactly what was read).
    """

    mtime_ns: int
    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes, stat: os.stat_result) -> Version:
        """The version of ``data`` as read from a file whose ``fstat`` is ``stat``."""
        return cls(
            mtime_ns=stat.st_mtime_ns, size=len(data), sha256=hashlib.sha256(data).hexdigest()
        )

    @classmethod
    def parse(cls, text: str) -> Version | None:
        """The version ``str(version)`` produced; ``None`` for text in another format."""
        parts = text.split(":")
        if (
            len(parts) != 3
            or not parts[0].isdigit()
            or not parts[1].isdigit()
            or len(parts[2]) != 64
        ):
            return None
        return cls(mtime_ns=int(parts[0]), size=int(parts[1]), sha256=parts[2])

    def same_content(self, other: Version) -> bool:
        return self.size == other.size and self.sha256 == other.sha256

    def __str__(self) -> str:
        return f"{self.mtime_ns}:{self.size}:{self.sha256}"
