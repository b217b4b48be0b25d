"""One writer per log file: an exclusive, non-blocking `flock` on a sidecar lock file.

Two processes appending to one log would each number events from their own counter
(duplicate `seq`s in JSONL, a UNIQUE failure in SQLite). The second opener gets a clear
`LogInUseError` instead. The lock is advisory and released when the log closes or the
process exits.
"""

from __future__ import annotations

import fcntl
import os

from .._errors import LogInUseError


class WriterLock:
    """Holds `<path>.lock` exclusively until `release()`."""

    def __init__(self, path: str) -> None:
        self._fd: int | None = os.open(f"{path}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise LogInUseError(
                f"session log {path} is in use by another session or process "
                "(one writer at a time)") from None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
