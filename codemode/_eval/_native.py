"""The reference run of a benign program: native CPython, the reference toolset as plain
functions behind a bridge with the sandbox's surface (`call_tool(name, **kwargs)`, one
function per tool, `ToolCallError` and its subclasses, JSON round trips of arguments and
values).

With the user's own tools (`codemode eval --tools`; `reference_run(code, tools=...)`) the
bridge offers the tools the policy exposes instead, each call going through a session of
those tools (their validation, their errors; no policy): the reference run of a benign
case runs the tools' bodies too.

Run as a script (`python codemode/_eval/_native.py [TOOLS-JSON]`, which imports only the
tools and the pipeline, not the sandbox) it reads the program on stdin, runs it, and writes
what it printed to stdout; an uncaught exception exits with status 1 and `Type: message` as
the last line of stderr. `reference_run(code)` does that in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:      # run as a script, this module imports nothing of codemode's at first
    from ._messages import ToolSource

_ROOT = Path(__file__).resolve().parents[2]


class ReferenceRun(msgspec.Struct, frozen=True, kw_only=True):
    """What native CPython printed, and the uncaught error (`Type: message`) if any."""

    stdout: str
    error: str | None = None


class ToolCallError(Exception):
    code = "TOOL_CALL_FAILED"

    def __init__(self, tool_name: str, message: str, code: str | None = None) -> None:
        super().__init__(f"{tool_name}: {message}")
        self.tool_name, self.message = tool_name, message
        if code is not None:
            self.code = code


class ToolDenied(ToolCallError):
    code = "DENIED"


class ToolArgumentError(ToolCallError):
    code = "INVALID_ARGS"


class ToolNotFound(ToolCallError):
    code = "UNKNOWN_TOOL"


class ToolError(ToolCallError):
    code = "TOOL_ERROR"


def _own_functions(tools: ToolSource) -> dict[str, Any]:
    """Name -> a plain function calling the user's tool through a session (on an event
    loop of its own thread); a failed call raises `ToolArgumentError` (INVALID_ARGS) or
    `ToolError` with the tool's message."""
    import asyncio
    import threading

    from codemode._mcp.toolsets import load_tools
    from codemode.pipeline import Session, thaw

    definitions = [d for d in load_tools(tools.specs, path=tools.path)
                   if d.name in tools.exposed]
    session = Session(tools=definitions)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="reference-tools", daemon=True).start()

    def function(name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            result = asyncio.run_coroutine_threadsafe(session.call(name, kwargs), loop).result()
            if result.is_error:
                detail = result.error
                message = detail.message if detail is not None else result.text
                if detail is not None and detail.code == "INVALID_ARGS":
                    raise ToolArgumentError(name, message)
                raise ToolError(name, message)
            return thaw(result.value)
        return call

    return {d.name: function(d.name) for d in definitions}


def namespace(tools: ToolSource | None = None) -> dict[str, Any]:
    """Globals for the program: the exposed reference tools (or the user's `tools`),
    `call_tool`, the errors."""
    if tools is None:
        from codemode.fixtures.reference_tools import plain_tools
        functions = plain_tools()
    else:
        functions = _own_functions(tools)

    def bridge(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = json.loads(json.dumps([args, kwargs], allow_nan=False))
            try:
                value = fn(*args, **kwargs)
            except ToolCallError:
                raise
            except TypeError as exc:
                raise ToolArgumentError(name, f"invalid arguments: {exc}") from None
            except Exception as exc:
                raise ToolError(name, str(exc)) from None
            return json.loads(json.dumps(value))
        call.__name__ = call.__qualname__ = name
        return call

    bindings = {name: bridge(name, fn) for name, fn in functions.items()}

    def call_tool(name: str, /, **kwargs: Any) -> Any:
        if name not in bindings:
            raise ToolNotFound(name, f'unknown tool "{name}"')
        return bindings[name](**kwargs)

    errors = {c.__name__: c for c in (ToolCallError, ToolDenied, ToolArgumentError,
                                      ToolNotFound, ToolError)}
    return {"__name__": "__main__", "call_tool": call_tool, **bindings, **errors}


def main() -> None:
    source = sys.stdin.read()
    sys.path.insert(0, str(_ROOT))
    from codemode._eval._messages import ToolSource
    tools = msgspec.json.decode(sys.argv[1], type=ToolSource) if len(sys.argv) > 1 else None
    code = compile(source, "<program>", "exec")
    try:
        exec(code, namespace(tools))
    except BaseException as exc:
        sys.stdout.flush()
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


class ReferenceStopped(Exception):
    """`reference_run`'s `stop` was set (the evaluation is stopping): the run was killed."""


def reference_run(code: str, timeout_s: float = 30.0, tools: ToolSource | None = None,
                  stop: threading.Event | None = None) -> ReferenceRun:
    """Run `code` natively in a subprocess (see the module docstring), with the reference
    tools or the user's `tools`.

    Args:
        stop: set by another thread to end the run early (a stopping evaluation must not
            wait up to `timeout_s` for a case that sleeps).

    Raises:
        subprocess.TimeoutExpired: it ran longer than `timeout_s` seconds.
        ReferenceStopped: `stop` was set; the subprocess was killed.
    """
    argv = [sys.executable, str(Path(__file__).resolve())]
    if tools is not None:
        argv.append(msgspec.json.encode(tools).decode())
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=_ROOT)
    deadline = time.monotonic() + timeout_s
    given: str | None = code
    while True:
        try:        # in short slices, so that `stop` is seen within a tenth of a second
            stdout, stderr = proc.communicate(input=given, timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            given = None                       # the input is already being written
            stopped = stop is not None and stop.is_set()
            if stopped or time.monotonic() > deadline:
                proc.kill()
                proc.communicate()
                if stopped:
                    raise ReferenceStopped from None
                raise subprocess.TimeoutExpired(argv, timeout_s) from None
    error = None
    if proc.returncode != 0:
        lines = stderr.strip().splitlines()
        error = lines[-1] if lines else f"exit status {proc.returncode}"
    return ReferenceRun(stdout=stdout, error=error)


if __name__ == "__main__":
    main()
