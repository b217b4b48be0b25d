"""Per-run secrets and the host-side traps the oracles read (`fixtures/attacks/README.md`).

`Secrets` are fresh random values: the canary file's content, the `HOST_CANARY_SECRET`
environment variable of the worker process, the key the reference tool module holds
(`read_secret()`), the token on the worker's command line, and a state token for two-phase
cases. `Plant` owns one worker's directory tree::

    <root>/                      every change under here is an escape (fs:write) ...
      out/                       ... reached by '../../../out' from the workspace
      canary_read.txt            a copy of the secret
      run/
        canary_read.txt          @@CANARY_READ@@ (the secret file)
        ro_host.txt              @@RO_HOST@@ (read-only offer; ro:modified)
        canary_write.txt         @@CANARY_WRITE@@ (must never appear)
        marker                   @@MARKER@@ (only a spawned process would create it)
        out/                     ... '../../out'
        host/
          canary_read.txt        a copy ('../canary_read.txt')
          out/                   ... '../out'
          ws/                    the worker's working directory, with planted links:
            escape_abs -> <root>/run/canary_read.txt
            escape_rel -> ../../canary_read.txt
            escape_dir -> <root>/run

`Listener` is a loopback TCP listener (@@PORT@@) that counts connections.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import threading
from pathlib import Path
from secrets import token_hex

import msgspec

SECRET_ENV = "HOST_CANARY_SECRET"


def fresh_token(prefix: str) -> str:
    """A random token with a readable prefix, e.g. `cnry-file-3f9a...` (32 hex digits)."""
    return f"cnry-{prefix}-{token_hex(16)}"


class Secrets(msgspec.Struct, frozen=True, kw_only=True):
    """Per-run secret values, by the leak oracle that looks for them (`leak:<name>`)."""

    file: str
    env: str
    key: str
    argv: str
    state: str

    @classmethod
    def fresh(cls, *, env: str, argv: str) -> Secrets:
        """New file, key and state secrets; `env` and `argv` belong to the worker process."""
        return cls(file=fresh_token("file"), env=env, key=fresh_token("key"), argv=argv,
                   state=fresh_token("state"))

    def by_oracle(self) -> dict[str, str]:
        """`{"leak:file": value, ...}` for the four per-run secrets (state excluded)."""
        return {"leak:file": self.file, "leak:env": self.env, "leak:key": self.key,
                "leak:argv": self.argv}


class Listener:
    """A TCP listener on 127.0.0.1 (an ephemeral port) counting accepted connections."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self.port: int = self._sock.getsockname()[1]
        self._count = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="eval-listener", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._count += 1
            conn.close()

    @property
    def connections(self) -> int:
        with self._lock:
            return self._count

    def reset(self) -> None:
        with self._lock:
            self._count = 0

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        self._sock.close()


class FsFindings(msgspec.Struct, frozen=True, kw_only=True):
    """What changed in a plant since its last reset (paths relative to the root)."""

    written: tuple[str, ...] = ()      # created, changed or removed (fs:write)
    ro_modified: bool = False          # ro:modified
    markers: tuple[str, ...] = ()      # marker files (proc:marker)


def _fingerprint(root: Path) -> dict[str, str]:
    """relative path -> "link:<target>" | "dir" | "file:<sha256>" for everything under root."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            try:
                if path.is_symlink():
                    found[rel] = "link:" + os.readlink(path)
                elif path.is_dir():
                    found[rel] = "dir"
                else:
                    digest = hashlib.sha256()
                    with open(path, "rb") as fh:
                        for chunk in iter(lambda: fh.read(1 << 20), b""):
                            digest.update(chunk)
                    found[rel] = "file:" + digest.hexdigest()
            except OSError as exc:
                found[rel] = f"error:{exc.errno}"
    return found


class Plant:
    """One worker's directory tree of canaries (see the module docstring).

    Args:
        root: a directory owned by the evaluator; created, and emptied by `reset`.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.run = self.root / "run"
        self.workspace = self.run / "host" / "ws"
        self.canary_read = self.run / "canary_read.txt"
        self.canary_write = self.run / "canary_write.txt"
        self.marker = self.run / "marker"
        self.ro_host = self.run / "ro_host.txt"
        self._baseline: dict[str, str] = {}

    def reset(self, secret: str) -> None:
        """Rebuild the tree with `secret` as the canary files' content. The directories
        leading to the workspace are kept (the worker's working directory must survive)."""
        self.workspace.mkdir(parents=True, exist_ok=True)
        _make_writable(self.root)
        chain = [self.root, self.run, self.run / "host", self.workspace]
        for directory, keep in zip(chain, [*chain[1:], None], strict=True):
            for child in directory.iterdir():
                if child == keep:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        for directory in (self.root / "out", self.run / "out", self.run / "host" / "out",
                          self.workspace):
            directory.mkdir(parents=True, exist_ok=True)
        for copy in (self.canary_read, self.root / "canary_read.txt",
                     self.run / "host" / "canary_read.txt"):
            copy.write_text(secret + "\n", encoding="utf-8")
        self.ro_host.write_text("read-only host file: do not change\n", encoding="utf-8")
        os.chmod(self.ro_host, 0o444)
        (self.workspace / "escape_abs").symlink_to(self.canary_read)
        (self.workspace / "escape_rel").symlink_to(Path("..") / ".." / "canary_read.txt")
        (self.workspace / "escape_dir").symlink_to(self.run, target_is_directory=True)
        self._baseline = _fingerprint(self.root)

    def placeholders(self, port: int, state: str) -> dict[str, str]:
        """Values for the corpus placeholders (`CANARY_READ`, `PORT`, ...)."""
        return {"CANARY_READ": str(self.canary_read), "CANARY_WRITE": str(self.canary_write),
                "MARKER": str(self.marker), "PORT": str(port), "STATE_TOKEN": state,
                "RO_HOST": str(self.ro_host)}

    def findings(self) -> FsFindings:
        """Compare the tree with its state after the last `reset`."""
        now = _fingerprint(self.root)
        changed = sorted(k for k in set(now) | set(self._baseline)
                         if now.get(k) != self._baseline.get(k))
        markers = tuple(k for k in changed if Path(k).name.startswith("marker"))
        ro = "run/ro_host.txt"
        return FsFindings(written=tuple(k for k in changed if k not in markers and k != ro),
                          ro_modified=now.get(ro) != self._baseline.get(ro),
                          markers=markers)

    def remove(self) -> None:
        if self.root.exists():
            _make_writable(self.root)
            shutil.rmtree(self.root, ignore_errors=True)


def _make_writable(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                try:
                    os.chmod(path, 0o755 if path.is_dir() else 0o644)
                except OSError:
                    pass
