"""Captured stdout/stderr: real text streams over a byte-capped sink (DESIGN.md §3)."""

import io

from .errors import LimitReached

# Each write is charged this many bytes on top of its length, so a flood of one-character
# writes reaches the cap at a predictable rate instead of only by its payload.
WRITE_OVERHEAD_BYTES = 8


class CappedSink(io.RawIOBase):
    """Keeps up to `limit_bytes` of what is written; past that, marks the run and raises."""

    def __init__(self, limit_bytes, state, stream_name):
        super().__init__()
        self._chunks = []
        self._kept = 0
        self._charged = 0
        self._limit = limit_bytes
        self._state = state
        self._name = stream_name
        self.truncated = False

    def writable(self):
        return True

    def write(self, data):
        n = len(data)
        self._charged += n + WRITE_OVERHEAD_BYTES
        room = self._limit - self._kept
        if room > 0:
            piece = bytes(data[:room])
            self._chunks.append(piece)
            self._kept += len(piece)
        if self._charged > self._limit or n > room:
            self.truncated = True
            self._state.trip("output", f"{self._name} exceeded {self._limit} bytes")
            raise LimitReached("output", f"{self._name} exceeded {self._limit} bytes")
        return n

    def text(self):
        data = b"".join(self._chunks).decode("utf-8", errors="replace")
        if self.truncated:
            data += f"\n[... {self._name} truncated at {self._limit} bytes]\n"
        return data


def text_stream(sink):
    """A real `io.TextIOWrapper` (what `print` and `sys.stdout.write` expect) over `sink`."""
    return io.TextIOWrapper(io.BufferedWriter(sink, buffer_size=8192), encoding="utf-8",
                            errors="backslashreplace", line_buffering=False, write_through=False)
