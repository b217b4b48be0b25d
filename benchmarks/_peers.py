"""The runtimes `benchmarks.run` compares, behind one small interface.

Each peer runs a program's source from scratch (`run`) and returns the value of its final
line, an expression. A peer that needs an optional package (`NEEDS`) is left out
when the package is missing; `available()` says which ones are present.

- `sandbox`: `WasmSandbox.run`, a fresh wasmtime Store and instance per run, with an echo
  host for sub-calls (no pipeline).
- `run_code`: a `run_code` call through the whole pipeline (`Session` + `CodeMode`, the
  built-in toolset; sub-calls go to its `add` tool).
- `monty`: pydantic-monty's pool of `monty` worker processes; a fresh REPL session per run
  (`checkout()`), sub-calls to a host function (`external_lookup`).
- `eryx`: pyeryx (Python 3.12+), CPython 3.14 compiled to a component in wasmtime as
  here: a `SandboxFactory` snapshot with the callback declared, a fresh instance per
  `execute`, sub-calls to a host callback (`await echo(...)`, its callbacks are async).
- `harness`: pydantic-ai-harness's `CodeMode` (Monty underneath): one agent run per program,
  driven by pydantic-ai's `FunctionModel`, whose first response calls `run_code` with the
  program and whose second ends the run; its nested calls (`await echo(...)`) go through the
  agent's tool validation and execution path.
- `restricted`: RestrictedPython's `compile_restricted` and `exec` in this process, with
  its safe builtins and guards, a fresh globals dict per run.
- `native`: `compile` and `exec` in this process, a fresh globals dict per run.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.metadata
import importlib.util
import json
import operator
import os
import tempfile
from pathlib import Path
from typing import Any

NAMES = ("sandbox", "run_code", "eryx", "monty", "harness", "restricted", "native")
# Peer: the module it needs, for the peers that need an optional package.
NEEDS = {"eryx": "eryx", "monty": "pydantic_monty", "harness": "pydantic_ai_harness"}

# Per peer: what a program writes for one sub-call, given a loop variable `i`.
CALL = {"sandbox": "echo(value=i)", "run_code": "add(a=i, b=1)", "monty": "echo(value=i)",
        "eryx": "await echo(value=i)", "harness": "await echo(value=i)",
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
    "eryx": "from benchmarks._peers import EryxPeer\nprint(EryxPeer().run('x = 1\\nx'))",
    "harness": "from benchmarks._peers import HarnessPeer\nprint(HarnessPeer().run('x = 1\\nx'))",
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
    return [n for n in NAMES if n not in NEEDS or importlib.util.find_spec(NEEDS[n])]


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


FACTORY_FILE = "codemode-bench-eryx-{version}.bin"


class EryxPeer(Peer):
    name = "eryx"

    def __init__(self) -> None:
        """A sandbox from a factory whose snapshot has the `echo` callback's declarations
        baked in (else each `execute` installs them, a few ms), made once per pyeryx
        version (a minute or more) and kept in the temporary directory (`FACTORY_FILE`)."""
        import eryx

        callbacks: list[Any] = [{"name": "echo", "fn": echo}]
        path = Path(tempfile.gettempdir()) / FACTORY_FILE.format(
            version=importlib.metadata.version("pyeryx"))
        if path.exists():
            factory = eryx.SandboxFactory.load(path, callbacks=callbacks)
        else:
            factory = eryx.SandboxFactory(callbacks=callbacks)
            partial = path.with_suffix(f".{os.getpid()}.part")
            factory.save(partial)
            partial.replace(path)               # whole or absent for a concurrent reader
        limits = eryx.ResourceLimits(max_callback_invocations=None)
        self._sandbox = factory.create_sandbox(resource_limits=limits, callbacks=callbacks)

    def run(self, code: str) -> Any:
        """The final expression's value, printed with `repr` in the guest and read back
        with `ast.literal_eval` (eryx returns a run's output, not a value)."""
        *body, last = code.rstrip("\n").split("\n")
        out = self._sandbox.execute("\n".join([*body, f"print(repr({last}))"]))
        return ast.literal_eval(out.stdout_text.strip())


class HarnessPeer(Peer):
    name = "harness"

    def __init__(self) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import FunctionModel
        from pydantic_ai_harness import CodeMode

        self._code, self._out = "", None

        def model(messages: list[Any], _info: Any) -> Any:
            returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
            if returned:
                self._out = returned[0].content
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": self._code})])

        mode = CodeMode(max_tool_calls=1_000_000, resource_limits="unlimited")
        self._agent = Agent(FunctionModel(model), capabilities=[mode])

        @self._agent.tool_plain
        def echo(value: int) -> int:
            """Returns its argument."""
            return value

    def run(self, code: str) -> Any:
        self._code, self._out = code, None
        self._agent.run_sync("run the program")
        if isinstance(self._out, str):           # a type or run error, as the model sees it
            raise RuntimeError(f"harness: {self._out}")
        return self._out


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
    "eryx": EryxPeer, "harness": HarnessPeer,
    "restricted": RestrictedPeer, "native": NativePeer,
}


def make(name: str) -> Peer:
    """A ready peer: its runtime loaded and one trivial run done (warm)."""
    peer = _CLASSES[name]()
    peer.run("x = 1\nx")
    return peer
