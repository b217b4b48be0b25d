"""The byte side of an MCP connection: the command that starts a server, the SDK's stdio
and streamable-HTTP transports, the capture of a server's stderr, and the relay that carries
the transport's messages to the session. Apart from `client`, which owns the connection's
lifetime: it enters what is built here in its owner task and builds none of it itself.

A server over stdio is started from an argv (or one string split with `shlex`) with the
SDK's default environment plus what the caller adds. Its stdout is decoded as UTF-8 with
`errors="replace"`: a byte that is not UTF-8 becomes U+FFFD instead of ending the reader.
Its stderr goes to a temporary file, whose tail error messages quote (`stderr_tail`).

The SDK logs every line of stdout it cannot parse with a traceback; a filter on its logger
lets each distinct message through once, as one line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
from mcp import StdioServerParameters, stdio_client

__all__ = ["STDERR_TAIL_BYTES", "argv_of", "default_name", "http_transport", "relay",
           "stderr_capture", "stderr_tail", "stdio_transport"]


class _OncePerMessage(logging.Filter):
    """Let each distinct message through once: a server that writes a flood of non-MCP
    lines would otherwise log a traceback per line (the SDK logs every parse failure)."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = record.getMessage()
        if key in self._seen:
            return False
        self._seen.add(key)
        record.exc_info = None          # one line is enough; the start error says the rest
        return True


logging.getLogger("mcp.client.stdio").addFilter(_OncePerMessage())

STDERR_TAIL_BYTES = 2000
"""How much of the end of a server's stderr an error message quotes, in bytes."""


def argv_of(command: str | Sequence[str]) -> list[str]:
    """The argv of a server command: a string split with `shlex`, a sequence as strings.

    Raises:
        ValueError: the command is empty.
    """
    if isinstance(command, str):
        argv = shlex.split(command)
    else:
        argv = [str(part) for part in command]
    if not argv or not argv[0]:
        raise ValueError(f"empty MCP server command: {command!r}")
    return argv


def default_name(argv: Sequence[str]) -> str:
    """The module after `-m` (`mcp_server_time`), the stem of a script run by a Python
    interpreter (`server` for `python server.py`), else the program's file name."""
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[2]
    program = Path(argv[0]).name
    if program.startswith("python") and len(argv) >= 2 and argv[1].endswith(".py"):
        return Path(argv[1]).stem
    return program


def stderr_capture() -> IO[bytes]:
    """A new file for a server's stderr (its owner closes it once the process is gone)."""
    return tempfile.TemporaryFile()


def stdio_transport(argv: Sequence[str], *, env: Mapping[str, str] | None,
                    cwd: str | os.PathLike[str] | None,
                    stderr: IO[bytes]) -> Callable[[], Any]:
    """The SDK's stdio client context for `argv`, to be entered by the owner task: `env`
    over the SDK's default environment, `cwd` the working directory, stderr into `stderr`."""
    params = StdioServerParameters(
        command=argv[0], args=list(argv[1:]), env=dict(env) if env is not None else None,
        cwd=os.fspath(cwd) if cwd is not None else None,
        encoding_error_handler="replace")       # a stray byte must not end the reader
    return lambda: stdio_client(params, errlog=stderr)  # type: ignore[arg-type]


def http_transport(url: str) -> Callable[[], Any]:
    """The SDK's streamable-HTTP client context for `url`, to be entered by the owner task."""
    from mcp.client.streamable_http import streamable_http_client

    return lambda: streamable_http_client(url)


def stderr_tail(stderr: IO[bytes], limit_bytes: int = STDERR_TAIL_BYTES) -> str:
    """The last `limit_bytes` bytes of `stderr` so far, decoded leniently ("" when the file
    cannot be read)."""
    try:
        fd = stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - limit_bytes)
        data = os.pread(fd, size - start, start)
    except (OSError, ValueError):
        return ""
    return data.decode("utf-8", errors="replace")


async def relay(source: Any, sink: Any, ended: asyncio.Event,
                recover: Callable[[Exception], list[Any]]) -> None:
    """Forward the transport's messages to the session; set `ended` when they stop. A line
    the transport could not parse arrives as an exception: `recover` makes it the messages
    to deliver (none, one, or one per call a batch answered)."""
    try:
        async with sink:
            async for message in source:
                if isinstance(message, Exception):
                    for recovered in recover(message):     # never raises
                        await sink.send(recovered)
                    continue
                await sink.send(message)
            ended.set()             # before the session sees its stream close (`answer`)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        ended.set()
