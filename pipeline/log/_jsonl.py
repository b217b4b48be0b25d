"""``JsonlLog``: one JSON event per line, the interchange format."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

import msgspec

from .._errors import LogCorruptError
from ..events import Event, decode_event, encode_event
from ._base import AppendOnlyLog
from ._lock import WriterLock

__all__ = ["JsonlLog"]

_log = logging.getLogger("codemode.pipeline")


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
            self._decode_lines(data[:cut].split(b"\n"))
            _log.warning("session log %s: dropping a torn last line (%d bytes)",
                         self.path, len(tail))
            with open(self._file_path, "r+b") as f:
                f.truncate(cut)
        else:
            with open(self._file_path, "ab") as f:
                f.write(b"\n")

    def _load(self) -> list[Event]:
        with open(self._file_path, "rb") as f:
            return self._decode_lines(f)

    def _decode_lines(self, lines: Iterable[bytes]) -> list[Event]:
        """The events of `lines` (the file's lines, in order; blank ones skipped).

        Raises:
            LogCorruptError: a line that is not an event (names the file and its line)."""
        events: list[Event] = []
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                events.append(decode_event(line))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise LogCorruptError(
                    str(self._file_path), lineno, str(exc), unit="line"
                ) from exc
        return events

    def _write(self, event: Event) -> None:
        self._file.write(encode_event(event) + b"\n")
        self._file.flush()

    def _close(self) -> None:
        self._file.close()
        self._writer.release()
