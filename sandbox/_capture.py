"""stdout and stderr of a run, captured on the host as the program writes them.

The guest writes each piece of output through at once (`guest/cm_guest/output.py`); in the
wasm tier it arrives through WASI's stdout/stderr (`WasiConfig.stdout_custom`), in the
restricted tier by a direct call. Either way it is held here, so output written before a
run ended at a limit, a trap or a cancellation is still returned with the outcome.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
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


class WasiOutput:
    """stdout and stderr of one wasm instance, through WASI's per-write callbacks
    (`WasiConfig.stdout_custom`): each guest write calls `OutputCapture.write` on the
    host as it happens, on the thread that runs the instance, so nothing is left to read
    when the instance returns and no file descriptor or thread is kept per instance.
    (OS pipes drained by a thread cost ~3 us less per write, but ~0.2 ms per run to
    make, drain and retire; a run writes a few times at most.)

    The captures may be given later than the instance's WASI context (`bind`): an
    instance made ahead of its run (`sandbox._pool`) gets its callbacks before the run
    that will own its output is known. Writes before `bind` and after `finish` are
    discarded.
    """

    __slots__ = ("_captures",)

    def __init__(self, stdout: OutputCapture | None = None,
                 stderr: OutputCapture | None = None) -> None:
        self._captures: tuple[OutputCapture, OutputCapture] | None = None
        if stdout is not None and stderr is not None:
            self.bind(stdout, stderr)

    def bind(self, stdout: OutputCapture, stderr: OutputCapture) -> None:
        """Make `stdout` and `stderr` the captures of what the instance writes."""
        self._captures = (stdout, stderr)

    def attach(self, wasi: wasmtime.WasiConfig) -> None:
        """Make these callbacks the stdout and stderr of the instance `wasi` configures."""
        wasi.stdout_custom = self._writer(0)
        wasi.stderr_custom = self._writer(1)

    def _writer(self, index: int) -> Callable[[bytes], int]:
        def write(data: bytes) -> int:
            captures = self._captures
            if captures is None:              # not bound to a run: nothing to keep
                return len(data)
            return captures[index].write(data)
        return write

    def finish(self) -> None:
        """After the instance returned (or trapped) for the last time: what it writes
        afterwards is not kept. The Store may stay open (it is closed later)."""
        self._captures = None


