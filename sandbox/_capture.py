"""stdout and stderr of a run, captured on the host as the program writes them.

The guest writes each piece of output through at once (`guest/cm_guest/output.py`); in the
wasm tier it arrives through WASI's stdout/stderr (`WasiConfig.stdout_custom`), in the
restricted tier by a direct call. Either way it is held here, so output written before a
run ended at a limit, a trap or a cancellation is still returned with the outcome, and
handed on as it arrives to the run's `on_output` callback, if any (`OutputTap`).

A capture keeps up to its cap (`SandboxLimits.output_cap_bytes`); the outcome's text is
its first `output_bytes` (`text`), cut with `CUT_MARKER`, and the whole is `full_text`.
"""

from __future__ import annotations

import _thread
import array
import codecs
import errno
import fcntl
import os
import select
import termios
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import wasmtime

OnOutput = Callable[[str, str], None]
"""`on_output(stream, text)`: one piece of a run's output as the program wrote it; `stream`
is "stdout" or "stderr". The pieces of one stream, joined, are the stream's whole text
(`RunOutcome.full`'s, or the outcome's own when nothing was cut), a stream stopped at its
cap ending with `CAP_MARKER`. Called on a sandbox thread (the process's output reader,
or the run's own), with the stream's lock held: it must return quickly and not block (hand
the text to another thread or an event loop). An exception it raises is ignored."""

CUT_MARKER = "\n[... {name} truncated at {limit} bytes of {total}]\n"
"""Ends a stream's text in the outcome when the stream was longer than `output_bytes`;
`total` is its size in bytes, or "more than N" when it went past its cap."""

CAP_MARKER = "\n[... {name} truncated at {cap} bytes]\n"
"""Ends a stream's whole text when the program wrote past the cap (the run then ends with
`OutputLimitExceeded`)."""


class OutputTap:
    """Hands a stream's bytes to an `OnOutput` callback as text, as they arrive (an
    incremental UTF-8 decoder: invalid bytes become U+FFFD, as in `OutputCapture.text`)."""

    def __init__(self, name: str, callback: OnOutput) -> None:
        self._name = name
        self._callback = callback
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, data: bytes) -> None:
        self._call(self._decoder.decode(data))

    def end(self, marker: str = "") -> None:
        """The stream is over: what the decoder holds (a character cut in two), then
        `marker`."""
        self._call(self._decoder.decode(b"", final=True) + marker)

    def _call(self, text: str) -> None:
        if text:
            try:
                self._callback(self._name, text)
            except Exception:          # the caller's bug must not end the capture
                pass


class OutputCapture:
    """One stream's bytes, up to `cap_bytes` (the run's `output_cap_bytes`); the outcome
    keeps the first `limit_bytes` (`output_bytes`) of them.

    Bytes past the cap are refused with EIO and mark the stream `over`: the run then ends
    at the output limit. The guest's sink sends one such byte when it cuts a stream; a
    program writing to the file descriptor itself is stopped the same way. `tap`, when
    set, gets every byte kept, as it arrives, and the end of the stream (`end`).
    """

    def __init__(self, name: str, limit_bytes: int, cap_bytes: int | None = None,
                 tap: OutputTap | None = None) -> None:
        self.name = name
        self.limit_bytes = limit_bytes
        self.cap_bytes = max(cap_bytes or limit_bytes, limit_bytes)
        self.over = False
        self.tap = tap
        self._data = bytearray()
        self._ended = False
        self._lock = threading.Lock()      # WASI may call from wasmtime's I/O thread

    def write(self, data: bytes) -> int:
        """Keep what fits; the number of bytes taken, or -EIO once nothing more fits (or
        the stream has ended)."""
        with self._lock:
            if self._ended:
                return -errno.EIO
            room = self.cap_bytes - len(self._data)
            if len(data) <= room:
                self._data += data
                if self.tap is not None:
                    self.tap.write(data)
                return len(data)
            kept = data[:max(room, 0)]
            self._data += kept
            if not self.over and self.tap is not None:
                self.tap.write(kept)
                self.tap.end(CAP_MARKER.format(name=self.name, cap=self.cap_bytes))
            self.over = True
            self._ended = True
            return -errno.EIO

    def end(self) -> None:
        """No more bytes are taken (later writes get EIO); the tap gets the stream's end."""
        with self._lock:
            if not self._ended:
                self._ended = True
                if self.tap is not None:
                    self.tap.end()

    @property
    def total_bytes(self) -> int:
        """Bytes captured (at most `cap_bytes`)."""
        return len(self._data)

    def texts(self) -> tuple[str, str | None]:
        """(kept, whole): the first `limit_bytes` as text (invalid UTF-8 replaced; a
        character the cut falls in dropped), ending with `CUT_MARKER` where it was cut;
        and the whole stream as text, ending with `CAP_MARKER` when it went past its cap,
        or None when the kept text is whole."""
        with self._lock:
            total = len(self._data)
            over = self.over
            whole = self._data.decode("utf-8", errors="replace")
        size = total
        if len(whole) * 4 > self.limit_bytes:   # an invalid byte became a 3-byte U+FFFD
            size = max(size, len(whole.encode("utf-8", errors="surrogatepass")))
        if not over and size <= self.limit_bytes:
            return whole, None
        if total > self.limit_bytes:
            kept = codecs.getincrementaldecoder("utf-8")("replace").decode(
                self._data[:self.limit_bytes])
        else:
            kept = whole
        encoded = kept.encode("utf-8", errors="surrogatepass")
        if len(encoded) > self.limit_bytes:
            kept = encoded[:self.limit_bytes].decode("utf-8", errors="ignore")
        kept += CUT_MARKER.format(name=self.name, limit=self.limit_bytes,
                                  total=f"more than {self.cap_bytes}" if over else size)
        if over:
            whole += CAP_MARKER.format(name=self.name, cap=self.cap_bytes)
        return kept, whole


class PipeCapture:
    """stdout and stderr of one wasm instance through two OS pipes, drained by one thread
    shared by every instance of the process (`_Drain`).

    The instance's WASI stdout and stderr are the pipes' write ends (opened by wasmtime
    through `/proc/self/fd`), so each guest write is a plain write on the host (~3 us over
    WASI's own cost; a Python callback per write costs ~30 us more). The drain thread
    watches the pipes from `attach` on, when the instance is made (ahead of its run, in
    the pool's background), and reads what arrives into the bound `OutputCapture`s,
    dropping what is over the limit, so the guest never blocks on a full pipe. When the
    run ends, the run's own thread reads the rest (`finish`); the pipes are unwatched and
    closed with the Store (`close`). So a run's own path makes no system call for its
    output but reading what is left: binding and settling change the drain's table only
    (with the pipes watched and unwatched there, a paced run spent ~42 us on its output's
    bookkeeping, now ~28 us). A run that writes nothing never wakes the drain thread.
    Where `/proc/self/fd` does not exist, WASI's per-write callbacks are used instead.

    Why not the callbacks everywhere: wasmtime's C API gives a custom stdout to WASI as an
    `AsyncWrite` (`wasi_config_set_stdout_custom`, no `p2_stream` of its own), which
    wasmtime-wasi wraps in its `AsyncWriteStream`: each write is handed to a task on
    wasmtime's tokio runtime, and the callback enters Python on a `tokio-rt-worker` thread,
    possibly after the guest's write returned, after the run ended, or while the interpreter
    exits, which aborts the process ("panic in a function that cannot unwind", seen in CLI
    runs on a loaded machine). A pipe's write end has no such thread: wasmtime writes it
    before the guest's write returns.

    The captures may be given later than the pipes (`bind`): an instance made ahead of its
    run (`sandbox._pool`) gets its pipes before the run that will own its output is known.
    The pool's warm-up writes nothing; should anything be written before `bind`, the drain
    reads it and drops it, so that a full pipe never blocks the instance.
    """

    def __init__(self, stdout: OutputCapture | None = None,
                 stderr: OutputCapture | None = None) -> None:
        self._captures: tuple[OutputCapture, OutputCapture] | None = None
        self._reads: list[int] = []
        self._watched = False
        self._finished = False
        if stdout is not None and stderr is not None:
            self._captures = (stdout, stderr)

    def bind(self, stdout: OutputCapture, stderr: OutputCapture) -> None:
        """Make `stdout` and `stderr` the captures of what the instance writes (once); the
        drain reads into them from now on."""
        self._captures = (stdout, stderr)
        if self._watched:
            _DRAIN.bind(zip(self._reads, self._captures, strict=True))

    def attach(self, wasi: wasmtime.WasiConfig) -> None:
        """Make the pipes the stdout and stderr of the instance `wasi` configures, watched
        by the drain from now on.

        Raises:
            OSError: no pipes could be made, or the drain could not watch them (file
                descriptors exhausted); `close` closes what was made.
        """
        if not os.path.isdir("/proc/self/fd"):
            wasi.stdout_custom = self._writer(0)
            wasi.stderr_custom = self._writer(1)
            return
        for setter in ("stdout_file", "stderr_file"):
            read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self._reads.append(read)
            try:
                setattr(wasi, setter, f"/proc/self/fd/{write}")   # wasmtime opens its own
            finally:
                os.close(write)
        self._watched = True                  # so `close` unwatches what `watch` got to
        _DRAIN.watch(self._reads)
        if self._captures is not None:
            self.bind(*self._captures)

    def _writer(self, index: int) -> Callable[[bytes], int]:
        def write(data: bytes) -> int:
            if self._captures is None:        # not bound to a run: nothing to keep
                return len(data)
            return self._captures[index].write(data)
        return write

    def finish(self) -> None:
        """After the instance returned (or trapped) for the last time: read what it wrote
        into the captures (every write is in the pipes by now, since a WASI write returns
        once the host has written it). The drain reads nothing more into them. The Store
        and the pipes may stay open (closed later, off the run's path: `close`)."""
        if self._watched and self._captures is not None and not self._finished:
            _DRAIN.settle(zip(self._reads, self._captures, strict=True))
        self._finished = True

    def close(self) -> None:
        """`finish`, then unwatch and close the pipes: before the Store is closed (its
        write ends), so that the drain never sees a watched pipe hang up."""
        self.finish()
        if self._watched:
            _DRAIN.unwatch(self._reads)
            self._watched = False
        for fd in self._reads:
            os.close(fd)
        self._reads = []


class _Drain:
    """One thread per process reading every watched pipe (`PipeCapture`) as data arrives
    (epoll), started on first use. A pipe is read under `_lock`: once `settle` or
    `unwatch` returns, no read of that pipe into its capture is under way or to come."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._epoll: select.epoll | None = None
        self._watched: set[int] = set()
        self._captures: dict[int, OutputCapture] = {}     # the bound pipes
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a child process (fork) the parent's thread does not exist: start again."""
        self._lock = threading.Lock()
        self._epoll = None
        self._watched = set()
        self._captures = {}

    def watch(self, fds: Iterable[int]) -> None:
        """Read these pipes as data arrives (dropped until they are bound).

        Raises:
            OSError: epoll could not be made or could not watch a pipe.
        """
        with self._lock:
            if self._epoll is None:
                self._epoll = select.epoll()
                # Not `threading.Thread.start`, which waits until the new thread runs (up
                # to milliseconds on a loaded machine, on the first run's path); a daemon
                # either way, as nothing it holds needs saving at exit.
                _thread.start_new_thread(self._loop, (self._epoll,))
            for fd in fds:
                self._epoll.register(fd, select.EPOLLIN)
                self._watched.add(fd)

    def bind(self, pipes: Iterable[tuple[int, OutputCapture]]) -> None:
        """Read each watched pipe into its capture from now on."""
        with self._lock:
            for fd, capture in pipes:
                if fd in self._watched:
                    self._captures[fd] = capture

    def settle(self, pipes: Iterable[tuple[int, OutputCapture]]) -> None:
        """Read what each pipe holds into its capture, and nothing more after that."""
        with self._lock:
            for fd, capture in pipes:
                self._captures.pop(fd, None)
                while data := _read(fd):
                    capture.write(data)

    def unwatch(self, fds: Iterable[int]) -> None:
        """Stop watching these pipes (waits for a read of one of them under way)."""
        with self._lock:
            for fd in fds:
                self._forget(fd)

    def _forget(self, fd: int) -> None:
        """Under `_lock`."""
        self._captures.pop(fd, None)
        if fd in self._watched:
            self._watched.discard(fd)
            if self._epoll is not None:
                self._epoll.unregister(fd)

    def _loop(self, epoll: select.epoll) -> None:
        while True:
            events = epoll.poll()
            with self._lock:
                for fd, event in events:
                    if fd not in self._watched:   # unwatched since the poll returned
                        continue
                    try:
                        data = _read(fd)
                    except OSError:               # never let one pipe stop the thread
                        data = None
                        event |= select.EPOLLERR
                    if data:
                        capture = self._captures.get(fd)
                        if capture is not None:   # (unbound: dropped, kept for no run)
                            capture.write(data)
                    elif event & (select.EPOLLHUP | select.EPOLLERR):
                        self._forget(fd)          # EOF: the write ends were closed


_DRAIN = _Drain()


def _read(fd: int) -> bytes | None:
    """What the pipe `fd` holds now, or None when it holds nothing (empty, or at EOF). Asks
    the pipe how much it holds first (`FIONREAD`): an `os.read` of an empty pipe still
    allocates its whole buffer, ~10 us twice per run for nothing."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count, True)
    return os.read(fd, count[0]) if count[0] else None
