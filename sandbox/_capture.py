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


class PipeCapture:
    """stdout and stderr of one wasm instance through two OS pipes, drained by a thread.

    The instance's WASI stdout and stderr are the pipes' write ends (opened by wasmtime
    through `/proc/self/fd`), so each guest write is a plain write on the host (~3 us over
    WASI's own cost; a Python callback per write costs ~30 us more). A thread per instance
    drains both into their `OutputCapture`s, dropping what is over the limit, so the guest
    never blocks on a full pipe. Where `/proc/self/fd` does not exist, WASI's per-write
    callbacks are used instead. (Callbacks alone would save the pipes and the thread, ~0.2
    ms per run, but wasmtime may call them on its own I/O threads, and one that enters
    Python while the interpreter exits aborts the process: "tokio-rt-worker ... panic in a
    function that cannot unwind", seen in CLI runs on a loaded machine.)

    The captures may be given later than the pipes (`bind`): an instance made ahead of its
    run (`sandbox._pool`) gets its pipes, and its draining thread, before the run that
    will own its output is known. Nothing is read before `bind`.
    """

    def __init__(self, stdout: OutputCapture | None = None,
                 stderr: OutputCapture | None = None) -> None:
        self._captures: tuple[OutputCapture, OutputCapture] | None = None
        self._bound = threading.Event()
        self._reads: list[int] = []
        self._wake: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        if stdout is not None and stderr is not None:
            self.bind(stdout, stderr)

    def bind(self, stdout: OutputCapture, stderr: OutputCapture) -> None:
        """Make `stdout` and `stderr` the captures of what the instance writes (once)."""
        self._captures = (stdout, stderr)
        self._bound.set()

    def attach(self, wasi: wasmtime.WasiConfig) -> None:
        """Make the pipes the stdout and stderr of the instance `wasi` configures, and
        start the thread that drains them once the captures are bound.

        Raises:
            OSError: no pipes could be made (file descriptors exhausted).
        """
        if not os.path.isdir("/proc/self/fd"):
            wasi.stdout_custom = self._writer(0)
            wasi.stderr_custom = self._writer(1)
            return
        for setter in ("stdout_file", "stderr_file"):
            read, write = os.pipe()
            self._reads.append(read)
            try:
                os.set_blocking(read, False)
                setattr(wasi, setter, f"/proc/self/fd/{write}")   # wasmtime opens its own
            finally:
                os.close(write)
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._drain, name="codemode-output",
                                        daemon=True)
        self._thread.start()

    def _writer(self, index: int) -> Callable[[bytes], int]:
        def write(data: bytes) -> int:
            if self._captures is None:        # not bound to a run: nothing to keep
                return len(data)
            return self._captures[index].write(data)
        return write

    def _drain(self) -> None:
        self._bound.wait()
        try:
            self._drain_until_finished()
        except OSError:            # `finish` gave up waiting and closed the read ends
            pass

    def _drain_until_finished(self) -> None:
        assert self._captures is not None and self._wake is not None
        poller = select.poll()
        by_fd = dict(zip(self._reads, self._captures, strict=True))
        for fd in (*by_fd, self._wake[0]):
            poller.register(fd, select.POLLIN)
        while by_fd:
            for fd, _event in poller.poll():
                if fd == self._wake[0]:
                    # The instance returned: every write it made is in the pipes, since a
                    # WASI write returns once the host has written it.
                    for fd_left, capture in by_fd.items():
                        while data := _read(fd_left):
                            capture.write(data)
                    return
                data = _read(fd)
                if data:
                    by_fd[fd].write(data)
                elif data == b"":                # EOF: the instance's Store was closed
                    poller.unregister(fd)
                    del by_fd[fd]

    def finish(self, timeout_s: float = 5.0) -> None:
        """After the instance returned (or trapped) for the last time: read what it wrote
        into the captures, stop the thread and close the read ends. The Store may stay open
        (it is closed later, off the run's path); nothing it writes afterwards is read."""
        if self._thread is not None and self._wake is not None:
            if not self._bound.is_set():        # never bound: drain into nothing
                self.bind(OutputCapture("stdout", 0), OutputCapture("stderr", 0))
            os.write(self._wake[1], b"x")
            self._thread.join(timeout_s)
            self._thread = None
        for fd in (*self._reads, *(self._wake or ())):
            os.close(fd)
        self._reads, self._wake = [], None

    def close(self, timeout_s: float = 5.0) -> None:
        """The same as `finish` (kept for callers that close the Store first)."""
        self.finish(timeout_s)


def _read(fd: int) -> bytes | None:
    """What the pipe `fd` holds now (b"" at EOF), or None when it is empty."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
