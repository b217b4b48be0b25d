"""The program's output printed as it is written, where the sandbox hands it over.

A sandbox whose `run` takes `on_output` (`codemode.sandbox.OnOutput`: `on_output(stream,
text)`, each piece of stdout or stderr as the program writes it, on a sandbox thread that
must not block) gets `Echo.piece`; the pieces go through a queue to a thread of their own,
which writes them with `write_output` (as they are, or made safe on a terminal) and flushes
each. Once a run has been echoed, the command prints nothing more of its output at the end
(the pieces joined are the whole streams) nor on a stop (`OutputSoFar`). A sandbox without
`on_output` is run as before: its output is printed when the run ends.
"""

from __future__ import annotations

import inspect
import queue
import sys
import threading
from typing import Any, TextIO

from ._render import write_output

__all__ = ["Echo", "takes_on_output"]


def takes_on_output(sandbox: Any) -> bool:
    """Whether `sandbox.run` accepts an `on_output` keyword argument."""
    try:
        return "on_output" in inspect.signature(sandbox.run).parameters
    except (TypeError, ValueError):
        return False


class Echo:
    """Writes the pieces of output `piece` is given, in order, on a thread of its own.

    Args:
        stdout, stderr: where each stream goes (default: the process's).
    """

    def __init__(self, stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self._streams = {"stdout": stdout or sys.stdout, "stderr": stderr or sys.stderr}
        self._pieces: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.used = False
        """True once a piece came: the output has been (or is being) printed."""

    def piece(self, stream: str, text: str) -> None:
        """The sandbox's `on_output`: queue `text` of `stream` ("stdout" or "stderr");
        returns at once."""
        with self._lock:
            self.used = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, name="codemode-echo",
                                                daemon=True)
                self._thread.start()
        self._pieces.put((stream, text))

    def _write(self) -> None:
        while (item := self._pieces.get()) is not None:
            stream, text = item
            try:
                write_output(self._streams.get(stream, self._streams["stderr"]), text)
            except (OSError, ValueError):     # a closed pipe: the reader went away
                pass

    def close(self) -> None:
        """Wait until every queued piece is written (call it before printing anything
        else); the writing thread then ends."""
        with self._lock:
            thread = self._thread
            self._thread = None
        if thread is not None:
            self._pieces.put(None)
            thread.join()
