"""``JsonlLog``: one JSON event per line, the interchange format."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

from .._errors import LogCorruptError
from ..events import Event, decode_event, encode_event
from ._base import AppendOnlyLog
from ._lock import WriterLock

__all__ = ["JsonlLog", "decode_lines"]

_log = logging.getLogger("codemode.pipeline")


def decode_lines(path: str, lines: Sequence[bytes], *,
                 torn_tail: bool = False) -> list[Event]:
    """The events of a JSONL log's `lines` (its bytes split at newlines; blank lines
    skipped).

    Args:
        path: the file, named in errors.
        torn_tail: a last line that is not an event is left out (a write under way, or a
            writer that died mid-append: `load` reads a log another process may write).
    Raises:
        LogCorruptError: any other line that is not an event (names the file and the
            1-based line)."""
    events: list[Event] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(decode_event(line))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if torn_tail and number == len(lines):
                break
            raise LogCorruptError(path, number, str(exc), unit="line") from exc
    return events


class JsonlLog(AppendOnlyLog):
    """Append-only JSON Lines file (UTF-8, one compact event per line, ``\\n``-terminated).

    On open the file is read and repaired (crash repair, see ``repair_events``). A torn last
    line (no trailing newline and not decodable: the process died mid-write) is cut off with
    a warning; any other undecodable line raises ``LogCorruptError`` naming the file and the
    1-based line number, and leaves the file as it was (a torn line is only cut from a log
    whose other lines are events). Each append is flushed before it returns (not fsynced).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = str(path)
        self._file_path = Path(path)
        self._file_path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = WriterLock(self.path)
        try:
            self._repair_torn_tail()
            self._file = open(self._file_path, "ab")  # noqa: SIM115  (open until _close())
        except BaseException:
            self._writer.release()
            raise
        try:
            self._open()
        except BaseException:
            self._file.close()
            self._writer.release()
            raise

    def _repair_torn_tail(self) -> None:
        if not self._file_path.exists():
            return
        data = self._file_path.read_bytes()
        if not data or data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        try:
            decode_event(tail)
        except (msgspec.DecodeError, msgspec.ValidationError):
            # Only a log whose other lines are events is repaired: a file that is not a log
            # (or is corrupt before its end) is refused as it stands, not cut.
            decode_lines(str(self._file_path), data[:cut].split(b"\n"))
            _log.warning("session log %s: dropping a torn last line (%d bytes)",
                         self.path, len(tail))
            with open(self._file_path, "r+b") as f:
                f.truncate(cut)
        else:
            with open(self._file_path, "ab") as f:
                f.write(b"\n")

    def _load(self) -> list[Event]:
        return decode_lines(str(self._file_path), self._file_path.read_bytes().split(b"\n"))

    def _write(self, event: Event) -> None:
        self._file.write(encode_event(event) + b"\n")
        self._file.flush()

    def _close(self) -> None:
        self._file.close()
        self._writer.release()
