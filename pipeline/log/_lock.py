"""One writer per log file: an exclusive, non-blocking `flock` on a sidecar lock file, and
one on the log file itself.

Two processes appending to one log would each number events from their own counter
(duplicate `seq`s in JSONL, a UNIQUE failure in SQLite, two write-ahead logs of one
database), and both could use one plan approval. The second opener gets a clear
`LogInUseError` instead, whatever path names the file: the sidecar is named after the
resolved path (`os.path.realpath`: a symbolic link to the log, or to its directory, names
the same sidecar), and the lock on the log file itself (made empty if it does not exist
yet) is the file's, so a hard link to it is refused too. The locks are advisory and
released when the log closes or the process exits. SQLite's own locks are `fcntl` locks,
which a `flock` neither blocks nor releases (Linux).

`<real path>.lock` exists only while a writer holds it: `release()` removes it before unlocking.
An opener that locked a file the previous holder had just removed holds nothing (a third
opener would create a new file and lock that one), so after locking it checks that the
path still names the file it locked, and opens the path again if not. A process that dies
without closing its log leaves the file behind; the next opener locks and reuses it.
"""

from __future__ import annotations

import fcntl
import os

from .._errors import LogError, LogInUseError


class WriterLock:
    """Holds `<real path>.lock` and the log file `path` itself exclusively until
    `release()`, which removes the former.

    Raises:
        LogInUseError: another session or process holds the lock, through this path or
            another one of the same file (a symbolic or hard link).
        LogError: the lock file or the log file cannot be opened (a directory that cannot
            be written, a file system that has no such files, such as /proc).
    """

    def __init__(self, path: str) -> None:
        real = os.path.realpath(path)
        self.path = lock_file(path)
        self._fd: int | None = None
        self._log_fd: int | None = None
        while self._fd is None:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            except OSError as exc:     # said of the log: the lock file is ours, not the user's
                raise LogError(f"session log {path} cannot be opened for writing: its lock "
                               f"file {self.path}: {exc.strerror or exc}") from exc
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
        try:
            # read-only is enough to lock; non-blocking, so a FIFO named as a log cannot hang
            self._log_fd = os.open(real, os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK, 0o666)
            fcntl.flock(self._log_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.release()
            raise LogInUseError(
                f"session log {path} is in use by another session or process, through "
                f"another path to the same file (one writer at a time)") from None
        except OSError as exc:
            self.release()
            raise LogError(f"session log {path} cannot be opened for writing: "
                           f"{exc.strerror or exc}") from exc
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Remove the lock file, then unlock (idempotent)."""
        if self._log_fd is not None:
            os.close(self._log_fd)             # closing it releases its flock
            self._log_fd = None
        if self._fd is not None:
            try:
                os.unlink(self.path)   # while still locked: see the module docstring
            except FileNotFoundError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def lock_file(path: str | os.PathLike[str]) -> str:
    """The lock file of the log at `path` (`<real path>.lock`), which exists while a writer
    holds the log, or after a writer died without closing it."""
    return f"{os.path.realpath(path)}.lock"


def _names(path: str, fd: int) -> bool:
    """True when `path` is the file open as `fd`."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
