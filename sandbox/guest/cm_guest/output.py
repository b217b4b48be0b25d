"""Captured stdout/stderr: real text streams over a byte-capped sink (docs/design.md §3).

Every write leaves the program at once (`write_through`, no buffer): the sink hands the
bytes to `emit`, which in the component writes them to WASI stdout/stderr, where the host
captures them as they arrive. So what a program printed survives however its run ends
(a trap at a time or fuel limit included); the guest keeps no copy.
"""

import builtins
import io
import sys

from .errors import LimitReached


class CappedSink(io.RawIOBase):
    """Emits up to `limit_bytes` of what is written; past that, marks the run and raises.

    The write that crosses the limit emits what fits and then one byte more: the host keeps
    `limit_bytes` of the stream and reads a byte past them as "cut here", which also ends
    the run from the host's side even if the program catches the `LimitReached`.

    Args:
        limit_bytes: bytes emitted at most (the run's `output_bytes`).
        state: the run's `RunState`; the output limit is recorded on it before raising.
        stream_name: "stdout" or "stderr", for the limit's message.
        emit: called with each piece of bytes, in order.
    """

    def __init__(self, limit_bytes, state, stream_name, emit):
        super().__init__()
        self._emit = emit
        self._kept = 0
        self._limit = limit_bytes
        self._state = state
        self._name = stream_name

    def bind(self, limit_bytes, emit):
        """Set the limit and the emitter (a sink made before its run's request was known)."""
        self._limit = limit_bytes
        self._emit = emit

    def writable(self):
        return True

    def write(self, data):
        n = len(data)
        room = self._limit - self._kept
        if n <= room:
            if n:
                self._emit(bytes(data))
                self._kept += n
            return n
        if room > 0:
            self._emit(bytes(data[:room]))
            self._kept = self._limit
        message = f"{self._name} exceeded {self._limit} bytes"
        self._state.trip("output", message)
        try:
            self._emit(bytes(data[room:room + 1]))
        except OSError:            # the host refuses it: that is the signal
            pass
        raise LimitReached("output", message)


def text_stream(sink):
    """A real `io.TextIOWrapper` (what `print` and `sys.stdout.write` expect) over `sink`,
    passing each write through at once."""
    return io.TextIOWrapper(sink, encoding="utf-8", errors="backslashreplace",
                            line_buffering=False, write_through=True)


def print(*objects, sep=" ", end="\n", file=None, flush=False):
    """`builtins.print`, writing the whole line with one `write` (CPython's writes each
    piece apart): each write leaves the sandbox at once, so one per line halves the cost."""
    if sep is not None and not isinstance(sep, str):
        raise TypeError(f"sep must be None or a string, not {type(sep).__name__}")
    if end is not None and not isinstance(end, str):
        raise TypeError(f"end must be None or a string, not {type(end).__name__}")
    if file is None:
        file = sys.stdout
        if file is None:
            return
    line = (" " if sep is None else sep).join(map(str, objects))
    file.write(line + ("\n" if end is None else end))
    if flush:
        file.flush()


print.__module__ = "builtins"
print.__doc__ = builtins.print.__doc__
