"""Seals on the records of paused runs (docs/codemode.md "Who can change a paused run").

A paused run is resumed from its `tool/suspended` event, and that event decides what the
resumed run may do: its program, its limits, the calls already answered, the clock and
random tape, the requests a person decides on. Anyone who can write the log file could
change them, so `run_code` seals the event when it logs it: an HMAC-SHA256 (RFC 2104) over
its canonical JSON, stored as `state["seal"]`, with a key the log's writer cannot read
(`SealKey`). A resumption checks the seal before anything runs and fails
`RESUME_TAMPERED` when it does not match: no program runs, no tool is called.

The canonical JSON is the event's fields that a resumption uses (`run_id`, the tool's
name, its `arguments`, the `requests`, the `state` without its seal, the `agent`) as one
object, normalized by a JSON round trip and encoded with sorted keys, so the same record
read back from either log backend gives the same bytes.
"""

from __future__ import annotations

import errno
import math
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from codemode.pipeline import HarnessError

SEAL_FIELD = "seal"
"""The key of the seal in a paused run's `state` (hex HMAC-SHA256)."""

KEY_ENV = "CODEMODE_SEAL_KEY"
"""Environment variable holding the key itself (text of at least `MIN_KEY_BYTES` bytes)."""

KEY_FILE_ENV = "CODEMODE_SEAL_KEY_FILE"
"""Environment variable naming the key file (created on first use when missing)."""

MIN_KEY_BYTES = 32
"""Shortest key accepted, in bytes (a generated key has 32 random bytes, as 64 hex digits)."""

MIN_KEY_ENTROPY_BITS = 96
"""Least entropy a key's bytes must show (length times the Shannon entropy of their
frequencies, an upper bound of the real entropy): 32 identical bytes show 0, a 32-byte key
of 8 symbols 96, 32 random hex digits about 120, 64 about 240."""

_VERSION = 1


class ResumeTampered(HarnessError):
    """A paused run's record does not carry a valid seal: it was changed after the run
    paused (or sealed with another key, or never sealed). Nothing of it runs."""

    code = "RESUME_TAMPERED"


class SealKeyError(HarnessError):
    """The seal key cannot be used: a key shorter than `MIN_KEY_BYTES` or with less than
    `MIN_KEY_ENTROPY_BITS` of entropy in its bytes; a key file that cannot be read or
    created, that is a symbolic link or not a regular file, that another user owns or
    others may read or write, or whose directory others may write. The message says which."""

    code = "SEAL_KEY_INVALID"


def default_key_path() -> Path:
    """Where the key is kept when none is given: `$XDG_CONFIG_HOME/codemode/seal.key`,
    else `~/.config/codemode/seal.key`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "codemode" / "seal.key"


class SealKey:
    """The key that seals paused runs, found once, when first needed.

    Args:
        key: the key's bytes (or text, UTF-8), at least `MIN_KEY_BYTES` long; None: from
            the environment, first `CODEMODE_SEAL_KEY` (the key as text), then
            `CODEMODE_SEAL_KEY_FILE` (a file), else the file `default_key_path()`. A key
            file that does not exist is created with 32 random bytes (64 hex digits),
            readable and writable by its owner only (mode 0600, in a directory of mode
            0700). An existing one is used only when it is a regular file (not a symbolic
            link) owned by the current user, that its group and others may not read or
            write, in a directory that others may not write and that the current user (or
            root) owns: mode bits alone say little where processes run as root. The key is
            the file's bytes without surrounding whitespace; any key (given, from the
            environment or a file) needs `MIN_KEY_BYTES` and `MIN_KEY_ENTROPY_BITS`.
        path: a key file to use instead of the environment (same rules).
    Raises:
        SealKeyError: on first use (`sign`, `check`), not on construction.
    """

    def __init__(self, key: bytes | str | None = None, *,
                 path: str | os.PathLike[str] | None = None) -> None:
        self._given = key.encode() if isinstance(key, str) else key
        self._path = None if path is None else Path(path)
        self._key: bytes | None = None

    def value(self) -> bytes:
        """The key's bytes.

        Raises:
            SealKeyError: see the class.
        """
        if self._key is None:
            self._key = _checked(self._find(), "the seal key")
        return self._key

    def _find(self) -> bytes:
        if self._given is not None:
            return self._given
        if self._path is not None:
            return _read_or_create(self._path)
        from_env = os.environ.get(KEY_ENV)
        if from_env:
            return _checked(from_env.encode(), KEY_ENV)
        path = os.environ.get(KEY_FILE_ENV)
        return _read_or_create(Path(path) if path else default_key_path())

    def sign(self, *, run_id: str, name: str, arguments: Any, requests: Any, state: Any,
             agent: str | None) -> str:
        """The seal (hex HMAC-SHA256) of a suspension's fields; `state`'s own seal, if any,
        is left out."""
        import hashlib  # here, not at the top: it loads OpenSSL, which only seals need
        import hmac

        payload = _canonical(run_id=run_id, name=name, arguments=arguments,
                             requests=requests, state=state, agent=agent)
        return hmac.new(self.value(), payload, hashlib.sha256).hexdigest()

    def sealed(self, *, run_id: str, name: str, arguments: Any, requests: Any,
               state: dict[str, Any], agent: str | None) -> dict[str, Any]:
        """`state` with its seal (`state["seal"]`) over the suspension's fields."""
        seal = self.sign(run_id=run_id, name=name, arguments=arguments, requests=requests,
                         state=state, agent=agent)
        return {**state, SEAL_FIELD: seal}

    def check(self, *, run_id: str, name: str, arguments: Any, requests: Any, state: Any,
              agent: str | None) -> None:
        """Check the seal a suspension's `state` carries (compared in constant time).

        Raises:
            ResumeTampered: no seal, or not the one these fields and this key give.
            SealKeyError: the key cannot be used.
        """
        given = state.get(SEAL_FIELD) if isinstance(state, dict) else None
        if not isinstance(given, str):
            raise ResumeTampered(f"the paused run {run_id!r} has no seal: its record was "
                                 "not written by run_code, or was changed; nothing ran")
        want = self.sign(run_id=run_id, name=name, arguments=arguments, requests=requests,
                         state=state, agent=agent)
        import hmac

        if not hmac.compare_digest(given, want):
            raise ResumeTampered(
                f"the paused run {run_id!r} was changed after it paused (its seal does not "
                "match its record, or it was sealed with another key); nothing ran")


def _canonical(*, run_id: str, name: str, arguments: Any, requests: Any, state: Any,
               agent: str | None) -> bytes:
    """The bytes a seal covers: the fields as one JSON object, sorted keys, after one JSON
    round trip (so values JSON changes, such as tuples, read back the same)."""
    if isinstance(state, dict):
        state = {k: v for k, v in state.items() if k != SEAL_FIELD}
    payload = {"version": _VERSION, "run_id": run_id, "name": name, "arguments": arguments,
               "requests": msgspec.to_builtins(requests), "state": state, "agent": agent}
    normal = msgspec.json.decode(msgspec.json.encode(payload))
    return msgspec.json.encode(normal, order="sorted")


def _checked(key: bytes, where: str) -> bytes:
    key = key.strip()
    why = weak_secret(key)
    if why is not None:
        raise SealKeyError(f"{where}: {why}")
    return key


def weak_secret(secret: bytes, what: str = "seal key") -> str | None:
    """Why `secret` (a seal key, an approval token: `what`) is too weak to guard anything:
    shorter than `MIN_KEY_BYTES`, or with less than `MIN_KEY_ENTROPY_BITS` in its bytes;
    None when it is strong enough. The one rule every secret of the project follows."""
    if len(secret) < MIN_KEY_BYTES:
        return f"a {what} needs at least {MIN_KEY_BYTES} bytes (got {len(secret)})"
    bits = _entropy_bits(secret)
    if bits < MIN_KEY_ENTROPY_BITS:
        return (f"the {what} is too predictable (about {int(bits)} bits of entropy in its "
                f"bytes, at least {MIN_KEY_ENTROPY_BITS} needed); use random bytes, e.g. "
                "`python -c 'import secrets; print(secrets.token_hex(32))'`")
    return None


def _entropy_bits(key: bytes) -> float:
    """The key's length times the Shannon entropy of its bytes' frequencies (bits): 0 for
    32 identical bytes, about 240 for 64 random hex digits. An upper bound of its real
    entropy, so it only refuses keys that are surely weak."""
    n = len(key)
    return -n * sum(c / n * math.log2(c / n) for c in Counter(key).values())


def _read_or_create(path: Path) -> bytes:
    """The key in `path`, created (32 random bytes, hex, mode 0600) when missing.

    Raises:
        SealKeyError: the file cannot be read or created, or its group or others may
            read or write it.
    """
    try:
        return _read_private(path)
    except FileNotFoundError:
        pass
    import secrets

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Written aside, then linked into place: a second process creating the key at the
        # same time finds the whole file or none, and one of the two keys wins.
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32) + "\n")
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass
        finally:
            temporary.unlink(missing_ok=True)
        return _read_private(path)
    except OSError as exc:
        raise SealKeyError(f"{path}: cannot create the seal key file: "
                           f"{exc.strerror or exc}") from None


def _read_private(path: Path) -> bytes:
    """The key in `path`, once the file is shown to be the current user's own (on POSIX).

    Raises:
        FileNotFoundError: there is no such file.
        SealKeyError: it is a symbolic link, not a regular file, owned by another user, or
            readable or writable by its group or others; its directory may be written by
            others or is owned by another user (who could replace the file); its key is
            too short or too predictable; or it cannot be read.
    """
    # O_NONBLOCK: a FIFO put in the key's place must not block the open (it is refused)
    flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NONBLOCK", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SealKeyError(f"{path}: the seal key file is a symbolic link; name the "
                               "file itself") from None
        raise SealKeyError(f"{path}: cannot read the seal key file: "
                           f"{exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "rb") as source:
            if os.name == "posix":
                _check_owned(path, os.fstat(source.fileno()))
            return _checked(source.read(), str(path))
    except OSError as exc:
        raise SealKeyError(f"{path}: cannot read the seal key file: "
                           f"{exc.strerror or exc}") from None


def _check_owned(path: Path, found: os.stat_result) -> None:
    """Raises SealKeyError unless `found` (the open key file's status) is a regular file
    of the current user that no one else may read or write, in a directory that only its
    owner (the current user, or root) may write."""
    me = os.geteuid()
    if not stat.S_ISREG(found.st_mode):
        raise SealKeyError(f"{path}: the seal key file is not a regular file")
    if found.st_uid != me:
        raise SealKeyError(f"{path}: the seal key file is owned by uid {found.st_uid}, not "
                           f"by the current user (uid {me})")
    if found.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SealKeyError(f"{path}: the seal key file may be read or written by others "
                           f"(mode {stat.S_IMODE(found.st_mode):04o}); make it 0600")
    folder = os.stat(path.parent)
    if folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SealKeyError(f"{path}: the seal key file's directory may be written by others "
                           f"(mode {stat.S_IMODE(folder.st_mode):04o}), who could replace "
                           "the file; keep the key in a directory of mode 0700")
    if folder.st_uid not in (me, 0):
        raise SealKeyError(f"{path}: the seal key file's directory is owned by uid "
                           f"{folder.st_uid}, who could replace the file")
