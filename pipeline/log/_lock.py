"""One writer per log file: an exclusive, non-blocking `flock` on a sidecar lock file.

Two processes appending to one log would each number events from their own counter
(duplicate `seq`s in JSONL, a UNIQUE failure in SQLite). The second opener gets a clear
`LogInUseError` instead. The lock is advisory and released when the log closes or the
process exits.

`<path>.lock` exists only while a writer holds it: `release()` removes it before unlocking.
An opener that locked a file the previous holder had just removed holds nothing (a third
opener would create a new file and lock that one), so after locking it checks that the
path still names the file it locked, and opens the path again if not. A process that dies
without closing its log leaves the file behind; the next opener locks and reuses it.
"""

from __future__ import annotations

import fcntl
import os

from .._errors import LogInUseError


class WriterLock:
    """Holds `<path>.lock` exclusively until `release()`, which removes it.

    Raises:
        LogInUseError: another session or process holds the lock.
    """

    def __init__(self, path: str) -> None:
        self.path = f"{path}.lock"
        self._fd: int | None = None
        while self._fd is None:
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LogInUseError(
                    f"session log {path} is in use by another session or process "
                    "(one writer at a time)") from None
            if _names(self.path, fd):
                self._fd = fd
            else:                      # removed (or replaced) by the holder before us
                os.close(fd)

    def release(self) -> None:
        """Remove the lock file, then unlock (idempotent)."""
        if self._fd is not None:
            try:
                os.unlink(self.path)   # while still locked: see the module docstring
            except FileNotFoundError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _names(path: str, fd: int) -> bool:
    """True when `path` is the file open as `fd`."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
