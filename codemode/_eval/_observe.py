"""What a worker watches while a case runs: the sandbox's dispatch traffic, and the host's
own state before and after.

- `ObservedSandbox` wraps a tier's sandbox (same `run(request, dispatch, cancel)`
  contract) and records per run: its outcome, each dispatch batch (scanned for secrets as it
  passes), dispatches that start while another is being served on the same thread
  (re-entrancy), batches that are not a `SubCallBatch` (a live object), and dispatches
  after `run` returned.
- `HostState` fingerprints the host modules a program could poison (json, decimal, random,
  builtins, ...) and checks they still behave normally.
- `BridgeState` fingerprints the host's bridge: the reference tool module, the dispatcher
  and runner code, the session's tools.
"""

from __future__ import annotations

import decimal
import importlib
import json
import os
import random
import sys
import threading
import types
from collections.abc import Iterable, Mapping
from typing import Any

from codemode.sandbox import (
    Dispatch,
    RunOutcome,
    RunRequest,
    Sandbox,
    SubCallBatch,
    SubCallErr,
    SubCallReply,
)


class LeakScanner:
    """Finds secret values in text. A secret counts as leaked when any 12-character window
    of its random part appears (windows every 2 characters: any 13 consecutive characters of
    it are a leak, so a cut or partial copy still counts); a secret shorter than that must
    appear whole."""

    WINDOW = 12
    STEP = 2

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self._needles: dict[str, tuple[str, ...]] = {}
        for name, value in secrets.items():
            if not value:
                continue
            random_part = value.rsplit("-", 1)[-1]
            if len(random_part) < self.WINDOW:
                self._needles[name] = (value,)
                continue
            starts = range(0, len(random_part) - self.WINDOW + 1, self.STEP)
            windows = [random_part[i:i + self.WINDOW] for i in starts]
            windows.append(random_part[-self.WINDOW:])
            self._needles[name] = tuple(dict.fromkeys(windows))

    def scan(self, text: str) -> set[str]:
        """Names of the secrets found in `text`."""
        return {name for name, needles in self._needles.items()
                if any(needle in text for needle in needles)}


class RunRecord:
    """One `run` call of an `ObservedSandbox`."""

    def __init__(self, scanner: LeakScanner) -> None:
        self.scanner = scanner
        self.outcome: RunOutcome | None = None
        self.returned = False
        self.batches = 0
        self.batch_bytes_max = 0
        self.leaks: set[str] = set()
        self.reentrant = 0
        self.live = 0
        self.after_return = 0
        self.refused: dict[str, int] = {}     # "CODE: message" of calls the host refused
        self._depth = threading.local()
        self._lock = threading.Lock()

    def enter(self, batch: Any) -> None:
        depth = getattr(self._depth, "n", 0)
        with self._lock:
            self.batches += 1
            if self.returned:
                self.after_return += 1
            if depth:
                self.reentrant += 1
            if type(batch) is not SubCallBatch:
                self.live += 1
            else:           # what the program sent: each call's name and JSON arguments
                text = "\n".join(f"{c.name} {bytes(c.args).decode()}" for c in batch.calls)
                self.batch_bytes_max = max(self.batch_bytes_max, len(text))
                self.leaks |= self.scanner.scan(text)
        self._depth.n = depth + 1

    def leave(self) -> None:
        self._depth.n = getattr(self._depth, "n", 1) - 1

    def replied(self, reply: SubCallReply) -> None:
        """Count the refusals (rule, guard, approval, unknown tool) in a dispatch reply."""
        results = reply.results if type(reply) is SubCallReply else ()
        for item in results:
            if type(item) is SubCallErr:
                key = f"{item.code}: {item.message[:100]}"
                with self._lock:
                    self.refused[key] = self.refused.get(key, 0) + 1


class ObservedSandbox:
    """A sandbox that records how the one it wraps is used (see `RunRecord`).

    Args:
        inner: the tier's sandbox.
        scanner: what counts as a leaked secret in dispatch batches.
    """

    def __init__(self, inner: Sandbox, scanner: LeakScanner) -> None:
        self.inner = inner
        self.scanner = scanner
        self.records: list[RunRecord] = []

    @property
    def allowed_modules(self) -> frozenset[str]:
        """The wrapped sandbox's."""
        return self.inner.allowed_modules

    def run(self, request: RunRequest, dispatch: Dispatch,
            cancel: threading.Event | None = None) -> RunOutcome:
        record = RunRecord(self.scanner)
        self.records.append(record)

        def observed(batch: SubCallBatch) -> SubCallReply:
            record.enter(batch)
            try:
                reply = dispatch(batch)
                record.replied(reply)
                return reply
            finally:
                record.leave()

        try:
            outcome = self.inner.run(request, observed, cancel)
            record.outcome = outcome
            return outcome
        finally:
            record.returned = True


# ---- host state ----------------------------------------------------------------------

POISON_MODULES = ("builtins", "json", "json.encoder", "json.decoder", "json.scanner",
                  "decimal", "random", "copy", "re", "os", "os.path", "operator",
                  "functools", "string", "types", "collections", "itertools", "typing",
                  "dataclasses", "enum", "inspect", "traceback", "math", "time", "io")
_SYS_HOOKS = ("stdout", "stderr", "stdin", "displayhook", "excepthook", "breakpointhook",
              "unraisablehook", "meta_path", "path_hooks", "settrace", "setprofile")


def _module_fingerprint(names: Iterable[str]) -> dict[str, int]:
    """`"module.attr" -> id(value)` for module attributes and for the attributes of the
    classes they define (a replaced method changes its class's entry)."""
    found: dict[str, int] = {}
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
        found[f"sys.modules[{name}]"] = id(module)
        for attr, value in list(vars(module).items()):
            found[f"{name}.{attr}"] = id(value)
            if isinstance(value, type) and value.__module__ == name and name != "builtins":
                for cattr, cvalue in list(vars(value).items()):
                    found[f"{name}.{attr}.{cattr}"] = id(cvalue)
    return found


def _json_behaves() -> str | None:
    try:
        text = json.dumps({"a": [1, 2.5, None, True, "\u00e9"]}, sort_keys=True)
    except Exception as exc:
        return f"json.dumps of plain data raised {type(exc).__name__}"
    if text != '{"a": [1, 2.5, null, true, "\\u00e9"]}':
        return f"json.dumps of plain data gave {text[:80]!r}"
    try:
        json.dumps({"s": {1, 2}})
    except TypeError:
        pass
    else:
        return "json.dumps accepted a set"
    if json.loads('{"a": [1]}') != {"a": [1]}:
        return "json.loads gave something else"
    return None


def _decimal_behaves() -> str | None:
    problems = []

    def check(where: str, ctx: decimal.Context) -> None:
        if ctx.prec != 28 or ctx.rounding != decimal.ROUND_HALF_EVEN:
            problems.append(f"{where}: prec={ctx.prec} rounding={ctx.rounding}")

    check("decimal context", decimal.getcontext())
    check("decimal.DefaultContext", decimal.DefaultContext)
    seen: list[decimal.Context] = []
    thread = threading.Thread(target=lambda: seen.append(decimal.getcontext()))
    thread.start()
    thread.join()
    if seen:
        check("a new thread's decimal context", seen[0])
    return "; ".join(problems) or None


class HostState:
    """The host's module fingerprint and behaviour, to compare after a run."""

    def __init__(self) -> None:
        self.modules = _module_fingerprint(POISON_MODULES)
        self.sys_hooks = {name: id(getattr(sys, name, None)) for name in _SYS_HOOKS}
        self.trace = (id(sys.gettrace()), id(sys.getprofile()))
        self.recursion_limit = sys.getrecursionlimit()
        self.random_state = random.getstate()
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()

    def poisoned(self) -> list[str]:
        """What differs now from when this state was captured, or misbehaves."""
        problems: list[str] = []
        now = _module_fingerprint(POISON_MODULES)
        changed = sorted(k for k in self.modules if now.get(k) != self.modules[k])
        if changed:
            problems.append("replaced: " + ", ".join(changed[:8])
                            + (f" (+{len(changed) - 8})" if len(changed) > 8 else ""))
        hooks = [n for n, i in self.sys_hooks.items() if id(getattr(sys, n, None)) != i]
        if hooks:
            problems.append("sys hooks replaced: " + ", ".join(hooks))
        if (id(sys.gettrace()), id(sys.getprofile())) != self.trace:
            problems.append("a trace or profile function was installed")
        if sys.getrecursionlimit() != self.recursion_limit:
            problems.append(f"recursion limit {self.recursion_limit} -> "
                            f"{sys.getrecursionlimit()}")
        if random.getstate() != self.random_state:
            problems.append("the random module's state changed")
        if dict(os.environ) != self.environ:
            problems.append("the environment changed")
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = "<gone>"
        if cwd != self.cwd:
            problems.append(f"the working directory changed to {cwd}")
        for check in (_json_behaves, _decimal_behaves):
            problem = check()
            if problem:
                problems.append(problem)
        return problems


BRIDGE_MODULES = ("codemode.fixtures.reference_tools", "codemode._run.dispatch",
                  "codemode._run.subcalls", "codemode._run.approvals", "codemode._run.resumed",
                  "codemode._run.run_code", "codemode._run.description",
                  "codemode._run.render", "codemode._run.rejections",
                  "codemode._policy.policy", "codemode.sandbox._wasm",
                  "codemode.sandbox._wire", "codemode.sandbox._restricted",
                  "codemode.sandbox._restricted_policy", "codemode.sandbox._restricted_run",
                  "codemode.sandbox._restricted_modules", "codemode.sandbox._restricted_guards",
                  "codemode.pipeline._registry", "codemode.pipeline._pending",
                  "codemode.pipeline._pending_state", "codemode.pipeline._admission",
                  "codemode.pipeline._dispatch", "codemode.pipeline._commit",
                  "codemode.pipeline._materialize", "codemode.pipeline._shield",
                  "codemode.pipeline._session", "codemode.pipeline._batches",
                  "codemode.pipeline._turns")


def _code_fingerprint(names: Iterable[str]) -> dict[str, int]:
    """`"module.qualname" -> id(code)` (and defaults) for every function and method."""
    found: dict[str, int] = {}
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            continue
        stack: list[tuple[str, Any]] = list(vars(module).items())
        seen: set[int] = set()
        while stack:
            attr, value = stack.pop()
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, types.FunctionType):
                found[f"{name}.{attr}"] = id(value.__code__)
                found[f"{name}.{attr}.__defaults__"] = id(value.__defaults__)
                found[f"{name}.{attr}.__kwdefaults__"] = id(value.__kwdefaults__)
            elif isinstance(value, type) and getattr(value, "__module__", None) == name:
                stack.extend((f"{attr}.{k}", v) for k, v in vars(value).items())
            elif isinstance(value, (staticmethod, classmethod)):
                stack.append((attr, value.__func__))
    return found


class BridgeState:
    """The host's bridge: code of the bridge modules, the reference module's globals,
    the session's tool definitions."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.code = _code_fingerprint(BRIDGE_MODULES)
        reference = sys.modules.get("codemode.fixtures.reference_tools")
        self.reference = ({k: id(v) for k, v in vars(reference).items()}
                          if reference is not None else {})
        self.tools = {d.name: id(d) for d in session.visible_tools()}

    def tampered(self) -> list[str]:
        problems: list[str] = []
        code = _code_fingerprint(BRIDGE_MODULES)
        changed = sorted(k for k in self.code if code.get(k) != self.code[k])
        if changed:
            problems.append("bridge code replaced: " + ", ".join(changed[:8]))
        reference = sys.modules.get("codemode.fixtures.reference_tools")
        if reference is not None:
            now = {k: id(v) for k, v in vars(reference).items()}
            moved = sorted(k for k in set(now) | set(self.reference)
                           if now.get(k) != self.reference.get(k))
            if moved:
                problems.append("reference tool module changed: " + ", ".join(moved[:8]))
            if not reference.cached_config_intact():
                problems.append("the host-kept configuration changed")
            registry = getattr(reference, "_REGISTRY", {})
            if any(registry.get(n) is not getattr(reference, n, None) for n in registry):
                problems.append("the reference registry maps a name to another function")
            if reference.EXPOSED_TOOLS != frozenset({
                    "get_weather", "add", "search_docs", "echo", "sleep_ms",
                    "get_cached_config", "fail"}):
                problems.append("the reference allow-list changed")
        tools = {d.name: id(d) for d in self.session.visible_tools()}
        if tools != self.tools:
            problems.append("the session's tools changed")
        return problems
