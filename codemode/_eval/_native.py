"""The reference run of a benign program: native CPython, the reference toolset as plain
functions behind a bridge with the sandbox's surface (`call_tool(name, **kwargs)`, one
function per tool, `ToolCallError` and its subclasses, JSON round trips of arguments and
values).

Run as a script (`python codemode/_eval/_native.py`, which imports only the reference tools
and the pipeline, not the sandbox) it reads the program on stdin, runs it, and writes what it
printed to stdout; an uncaught exception exits with status 1 and `Type: message` as the
last line of stderr. `reference_run(code)` does that in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

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


def namespace() -> dict[str, Any]:
    """Globals for the program: the exposed reference tools, `call_tool`, the errors."""
    from codemode.fixtures.reference_tools import plain_tools

    functions = plain_tools()

    def bridge(name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = json.loads(json.dumps([args, kwargs], allow_nan=False))
            try:
                value = fn(*args, **kwargs)
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
    code = compile(source, "<program>", "exec")
    try:
        exec(code, namespace())
    except BaseException as exc:
        sys.stdout.flush()
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def reference_run(code: str, timeout_s: float = 30.0) -> ReferenceRun:
    """Run `code` natively in a subprocess (see the module docstring).

    Raises:
        subprocess.TimeoutExpired: it ran longer than `timeout_s` seconds.
    """
    done = subprocess.run([sys.executable, str(Path(__file__).resolve())], input=code,
                          capture_output=True, text=True, timeout=timeout_s, cwd=_ROOT)
    error = None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        error = lines[-1] if lines else f"exit status {done.returncode}"
    return ReferenceRun(stdout=done.stdout, error=error)


if __name__ == "__main__":
    main()
