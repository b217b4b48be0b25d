"""stdout and stderr of a run, captured on the host as the program writes them.

The guest writes each piece of output through at once (`guest/cm_guest/output.py`); in the
wasm tier it arrives through WASI's stdout/stderr (`WasiConfig.stdout_custom`), in the
restricted tier by a direct call. Either way it is held here, so output written before a
run ended at a limit, a trap or a cancellation is still returned with the outcome.
"""

from __future__ import annotations

import errno
import os
import select
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import wasmtime

CUT_MARKER = "\n[... {name} truncated at {limit} bytes]\n"


class OutputCapture:
    """One stream's bytes, up to `limit_bytes` (the run's `output_bytes`).

    Bytes past the limit are refused with EIO and mark the stream `over`: the run then
    ends at the output limit. The guest's sink sends one such byte when it cuts a stream;
    a program writing to the file descriptor itself is stopped the same way.
    """

    def __init__(self, name: str, limit_bytes: int) -> None:
        self.name = name
        self.limit_bytes = limit_bytes
        self.over = False
        self._data = bytearray()
        self._lock = threading.Lock()      # WASI may call from wasmtime's I/O thread

    def write(self, data: bytes) -> int:
        """Keep what fits; the number of bytes taken, or -EIO once nothing more fits."""
        with self._lock:
            room = self.limit_bytes - len(self._data)
            if len(data) <= room:
                self._data += data
                return len(data)
            self._data += data[:max(room, 0)]
            self.over = True
            return -errno.EIO

    def text(self) -> str:
        """The captured text (invalid UTF-8, such as a character cut in two, replaced),
        with a marker where it was cut."""
        with self._lock:
            text = self._data.decode("utf-8", errors="replace")
            over = self.over
        encoded = text.encode("utf-8", errors="surrogatepass")
        if len(encoded) > self.limit_bytes:   # each invalid byte became a 3-byte U+FFFD
            text = encoded[:self.limit_bytes].decode("utf-8", errors="ignore")
            over = True
        if over:
            text += CUT_MARKER.format(name=self.name, limit=self.limit_bytes)
        return text


class PipeCapture:
    """stdout and stderr of one wasm instance through two OS pipes, drained by a thread.

    The instance's WASI stdout and stderr are the pipes' write ends (opened by wasmtime
    through `/proc/self/fd`), so each guest write is a plain write on the host (~3 us over
    WASI's own cost; a Python callback per write costs ~30 us more). A thread per run
    drains both into their `OutputCapture`s, dropping what is over the limit, so the guest
    never blocks on a full pipe. Where `/proc/self/fd` does not exist, WASI's per-write
    callbacks are used instead.
    """

    def __init__(self, stdout: OutputCapture, stderr: OutputCapture) -> None:
        self._captures = (stdout, stderr)
        self._reads: list[int] = []
        self._thread: threading.Thread | None = None

    def attach(self, wasi: wasmtime.WasiConfig) -> None:
        """Make the captures the stdout and stderr of the instance `wasi` configures."""
        if not os.path.isdir("/proc/self/fd"):
            wasi.stdout_custom = self._captures[0].write
            wasi.stderr_custom = self._captures[1].write
            return
        for setter in ("stdout_file", "stderr_file"):
            read, write = os.pipe()
            self._reads.append(read)
            try:
                setattr(wasi, setter, f"/proc/self/fd/{write}")   # wasmtime opens its own
            finally:
                os.close(write)
        self._thread = threading.Thread(target=self._drain, name="codemode-output",
                                        daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            self._drain_until_closed()
        except OSError:            # `close` gave up waiting and closed the read ends
            pass

    def _drain_until_closed(self) -> None:
        poller = select.poll()
        by_fd = dict(zip(self._reads, self._captures, strict=True))
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        while by_fd:
            for fd, _event in poller.poll():
                data = os.read(fd, 1 << 16)
                if data:
                    by_fd[fd].write(data)
                else:                           # EOF: the instance's Store was closed
                    poller.unregister(fd)
                    del by_fd[fd]

    def close(self, timeout_s: float = 5.0) -> None:
        """After the instance's Store is closed: wait until everything written is read."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        for fd in self._reads:
            os.close(fd)
        self._reads = []
