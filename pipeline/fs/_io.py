"""Blocking file primitives for the gate (run them in a worker thread).

Every function takes a confined ``Target`` (``_paths``) and opens ``target.real`` — the
path with every symlink already resolved — with ``O_NOFOLLOW``, so a final component that
became a symlink after confinement is refused instead of followed. Writes never leave a
half-written file: bytes go to a temporary file beside the target, are flushed to disk, and
are moved into place with ``os.replace`` (replace) or ``os.link`` (create only if absent).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat as stat_module

from ._errors import FsNotAFileError, FsOutsideRootError
from ._paths import Target

__all__ = ["create", "load", "replace"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def load(target: Target) -> tuple[bytes, os.stat_result] | None:
    """The file's bytes and its ``fstat`` (same descriptor), or ``None`` if it is missing.

    Raises:
        FsNotAFileError: it exists but is not a regular file (a directory, say).
        FsOutsideRootError: its last component is now a symlink.
    """
    try:
        fd = os.open(target.real, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise FsNotAFileError(f'"{target.display}" is not a regular file') from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FsOutsideRootError(
                f'path "{target.display}" is a symlink that was not confined'
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            raise FsNotAFileError(f'"{target.display}" is not a regular file')
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)


def _temporary(directory: str, name: str, data: bytes, mode: int | None) -> str:
    """Write ``data`` to a fresh temporary file in ``directory``; return its path."""
    path = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return path


def replace(target: Target, data: bytes, previous: os.stat_result) -> os.stat_result:
    """Atomically replace the file with ``data``, keeping ``previous``'s permission bits.
    Returns the new file's ``stat``."""
    directory, name = os.path.split(target.real)
    temp = _temporary(directory, name, data, stat_module.S_IMODE(previous.st_mode))
    try:
        os.replace(temp, target.real)
    except BaseException:
        os.unlink(temp)
        raise
    return os.stat(target.real, follow_symlinks=False)


def create(target: Target, data: bytes) -> os.stat_result:
    """Create the file with ``data`` only if nothing is there (missing parents are made).
    Returns its ``stat``.

    Raises:
        FileExistsError: something appeared at the path meanwhile.
    """
    directory, name = os.path.split(target.real)
    os.makedirs(directory, exist_ok=True)
    temp = _temporary(directory, name, data, None)
    try:
        try:
            os.link(temp, target.real, follow_symlinks=False)
        except FileExistsError:
            raise
        except OSError:                # no hard links here: exclusive create, then write
            _exclusive_write(target.real, data)
    finally:
        os.unlink(temp)
    return os.stat(target.real, follow_symlinks=False)


def _exclusive_write(path: os.PathLike[str] | str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
