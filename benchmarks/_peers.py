"""The runtimes `benchmarks.run` compares, behind one small interface.

Each peer runs a program's source from scratch (`run`) and returns the value of its final
line, an expression. A peer that needs an optional package (pydantic-monty) is left out
when the package is missing; `available()` says which ones are present.

- `sandbox`: `WasmSandbox.run`, a fresh wasmtime Store and instance per run, with an echo
  host for sub-calls (no pipeline).
- `run_code`: a `run_code` call through the whole pipeline (`Session` + `CodeMode`, the
  built-in toolset; sub-calls go to its `add` tool).
- `monty`: pydantic-monty's pool of `monty` worker processes; a fresh REPL session per run
  (`checkout()`), sub-calls to a host function (`external_lookup`).
- `restricted`: RestrictedPython's `compile_restricted` and `exec` in this process, with
  its safe builtins and guards, a fresh globals dict per run.
- `native`: `compile` and `exec` in this process, a fresh globals dict per run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import operator
from typing import Any

NAMES = ("sandbox", "run_code", "monty", "restricted", "native")

# Per peer: what a program writes for one sub-call, given a loop variable `i`.
CALL = {"sandbox": "echo(value=i)", "run_code": "add(a=i, b=1)", "monty": "echo(value=i)",
        "restricted": "echo(value=i)", "native": "echo(value=i)"}

# The statements a fresh interpreter runs for "first result in a new process"; each prints 1.
FIRST_RESULT = {
    "sandbox": "from codemode.sandbox import WasmSandbox, RunRequest, SubCallReply\n"
               "print(WasmSandbox().run(RunRequest(code='x = 1\\nx'),\n"
               "                        lambda b: SubCallReply()).value)",
    "run_code": "import asyncio\nfrom codemode import CodeMode, Session\n"
                "from codemode.fixtures.toolset import builtin_tools\n"
                "s = Session(tools=builtin_tools(), log=None)\nCodeMode(s)\n"
                "r = asyncio.run(s.call('run_code', {'code': 'x = 1\\nx'}))\n"
                "print(r.value['result'])",
    "monty": "import pydantic_monty\n"
             "with pydantic_monty.Monty(min_processes=1, max_processes=1) as pool:\n"
             "    with pool.checkout() as s:\n"
             "        print(s.feed_run('x = 1\\nx'))",
    "restricted": "from RestrictedPython import compile_restricted, safe_globals\n"
                  "g = dict(safe_globals)\nexec(compile_restricted('x = 1', '<p>', 'exec'), g)\n"
                  "print(g['x'])",
    "native": "g = {}\nexec(compile('x = 1', '<p>', 'exec'), g)\nprint(g['x'])",
}


def echo(value: Any) -> Any:
    """The host function of the sub-call benchmark: returns its argument."""
    return value


def available() -> list[str]:
    """The peers whose packages are installed, in `NAMES` order."""
    return [n for n in NAMES if n != "monty" or importlib.util.find_spec("pydantic_monty")]


def _with_result(code: str) -> str:
    """The program with its final expression assigned to `result` (for `exec`)."""
    *body, last = code.rstrip("\n").split("\n")
    return "\n".join([*body, f"result = {last}"])


class Peer:
    """One runtime. `run(code)` runs `code` from scratch and returns its final value."""

    name = ""

    def run(self, code: str) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class SandboxPeer(Peer):
    name = "sandbox"

    def __init__(self) -> None:
        from codemode.sandbox import (
            ParamSpec,
            RunRequest,
            SandboxLimits,
            SubCallOk,
            SubCallReply,
            ToolSpec,
            WasmSandbox,
        )

        self._request, self._sandbox = RunRequest, WasmSandbox()
        self._tools = (ToolSpec(name="echo", alias="echo", params=(ParamSpec(name="value"),)),)
        self._limits = SandboxLimits(max_subcalls=1_000_000)

        def echo(batch: Any) -> Any:
            """The echo host: each call's arguments back (its classes imported once, not
            at every batch, so a sub-call's figure holds no import machinery)."""
            return SubCallReply(results=tuple(SubCallOk(id=c.id, value=c.arguments)
                                              for c in batch.calls))
        self._echo = echo

    def run(self, code: str, tools: Any = None) -> Any:
        """`code`'s value; `tools`: the `ToolSpec`s the guest binds (default: `echo`)."""
        out = self._sandbox.run(self._request(code=code, tools=self._tools if tools is None
                                              else tools, limits=self._limits), self._echo)
        if out.status != "ok":
            raise RuntimeError(f"sandbox: {out.error}")
        return out.value


class RunCodePeer(Peer):
    name = "run_code"

    def __init__(self) -> None:
        from codemode import CodeMode, Session
        from codemode.fixtures.toolset import builtin_tools
        from codemode.sandbox import SandboxLimits

        self.loop = asyncio.new_event_loop()      # started and stopped by each `run`
        self._session = Session(tools=builtin_tools(), log=None)
        self.code_mode = CodeMode(self._session, limits=SandboxLimits(max_subcalls=1_000_000))

    def run(self, code: str) -> Any:
        result = self.loop.run_until_complete(self._session.call("run_code", {"code": code}))
        if result.is_error:
            raise RuntimeError(f"run_code: {result.text}")
        return result.value.get("result")

    def close(self) -> None:
        self._session.close()
        self.loop.close()


class MontyPeer(Peer):
    name = "monty"

    def __init__(self) -> None:
        import pydantic_monty

        self._pool = pydantic_monty.Monty(min_processes=1, max_processes=1)
        self._pool.__enter__()
        self._lookup = {"echo": echo}

    def run(self, code: str) -> Any:
        with self._pool.checkout() as session:
            return session.feed_run(code, external_lookup=self._lookup)

    def close(self) -> None:
        self._pool.__exit__(None, None, None)


def _inplace(op: str, x: Any, y: Any) -> Any:
    return {"+=": operator.iadd, "-=": operator.isub, "*=": operator.imul}[op](x, y)


class RestrictedPeer(Peer):
    name = "restricted"

    def __init__(self) -> None:
        import RestrictedPython
        from RestrictedPython import Guards

        self._compile = RestrictedPython.compile_restricted
        allowed = {"json": json}

        def restricted_import(name: str, *args: Any) -> Any:
            if name not in allowed:
                raise ImportError(f"import of {name!r} is not allowed")
            return allowed[name]

        self._globals = {
            **RestrictedPython.safe_globals,
            "__builtins__": {**RestrictedPython.safe_builtins, "__import__": restricted_import,
                             "sorted": sorted, "sum": sum, "list": list, "dict": dict},
            "_getattr_": Guards.safer_getattr, "_getitem_": operator.getitem,
            "_getiter_": iter, "_write_": Guards.full_write_guard,
            "_iter_unpack_sequence_": Guards.guarded_iter_unpack_sequence,
            "_inplacevar_": _inplace, "echo": echo,
        }

    def run(self, code: str) -> Any:
        namespace = dict(self._globals)
        exec(self._compile(_with_result(code), "<program>", "exec"), namespace)
        return namespace["result"]


class NativePeer(Peer):
    name = "native"

    def run(self, code: str) -> Any:
        namespace: dict[str, Any] = {"__name__": "__main__", "echo": echo}
        exec(compile(_with_result(code), "<program>", "exec"), namespace)
        return namespace["result"]


_CLASSES: dict[str, type[Peer]] = {
    "sandbox": SandboxPeer, "run_code": RunCodePeer, "monty": MontyPeer,
    "restricted": RestrictedPeer, "native": NativePeer,
}


def make(name: str) -> Peer:
    """A ready peer: its runtime loaded and one trivial run done (warm)."""
    peer = _CLASSES[name]()
    peer.run("x = 1\nx")
    return peer
