"""Ray: code mode beyond one machine (docs/integrations.md). Needs the `ray` extra.

    import ray
    from codemode.fixtures.toolset import builtin_tools
    from codemode.ray import SandboxActor, connect

    connect("local")                                    # or "auto", "ray://HEAD:10001"
    agents = [SandboxActor.remote(builtin_tools) for _ in range(4)]
    results = ray.get([a.run.remote("add(a=1, b=2)") for a in agents])   # CallResults

Each `SandboxActor` is one agent's code mode on some node of the cluster: its own `Session`
with the tools a factory builds there, `run_code` installed by `CodeMode` (or by a
`Policy`), and a fresh sandbox instance per `run`. Tool bodies run in the actor, on its
node; the results come back as the `CallResult` a local `session.call("run_code", ...)`
returns. `codemode eval --ray ADDRESS` runs corpus cases on the cluster the same way
(`codemode/_eval/_ray.py`).
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
from collections.abc import Callable, Iterable
from typing import Any

import ray

from ._policy.policy import Policy
from ._run.run_code import RUN_CODE, CodeMode
from .pipeline import CallResult, Session, ToolDefinition
from .sandbox import SandboxLimits

__all__ = ["SandboxActor", "connect"]


def connect(address: str, **init_options: Any) -> None:
    """Join a Ray cluster, unless this process already has.

    wasmtime turns a trap (a wasm stack overflow, an out-of-bounds access) into an error
    through its own handlers of SIGSEGV, SIGILL and the like; `ray.init` puts crash
    handlers over them (abseil's failure handler; Python's `faulthandler` unless it was
    already on), after which a trap kills the process instead of ending its run. This
    turns abseil's off (`RAY_DISABLE_FAILURE_SIGNAL_HANDLER`) and undoes a `faulthandler`
    that `ray.init` turned on. That keeps traps catchable in a process that joins before
    it first runs a sandbox, or that never had `faulthandler` on; a process that had it on
    (`python -X faulthandler`, pytest) and ran a sandbox before joining still dies on a
    trap. Run sandboxes in actors (`SandboxActor`) or join first. Ray's worker processes
    set their handlers up before any sandbox, so actors are not affected.

    Args:
        address: "local" starts a cluster on this machine (or joins the one the
            `RAY_ADDRESS` environment variable names); anything else is passed to
            `ray.init(address=...)`: "auto" (a cluster started with `ray start` here),
            "ray://HEAD:10001" (Ray Client), "HOST:6379".
        init_options: passed to `ray.init` (e.g. `num_cpus=2` for a local cluster).
    """
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    had_faulthandler = faulthandler.is_enabled()
    init_options.setdefault("log_to_driver", False)
    if address != "local":
        init_options["address"] = address
    ray.init(**init_options)
    if not had_faulthandler and faulthandler.is_enabled():
        faulthandler.disable()              # back to the handlers it replaced


class _SandboxActor:
    """One agent's code mode in a Ray actor (see the module docstring).

    Args:
        tools: builds the actor's tools, called once in the actor (a module-level function,
            so that Ray can send it to another node), e.g. `builtin_tools`.
        policy: install this policy (tier, limits, exposed tools, rules) instead of plain
            `CodeMode`; the actor mounts no approval channel, so calls an `ask` rule
            matches are denied.
        limits: the limits of every run when there is no policy (default `SandboxLimits()`).
        log: a session log file (.db or .jsonl) on the actor's node, or None.
    """

    def __init__(self, tools: Callable[[], Iterable[ToolDefinition]], *,
                 policy: Policy | None = None, limits: SandboxLimits | None = None,
                 log: str | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._session = Session(tools=tools(), log=log)
        if policy is not None:
            policy.apply(self._session)
        else:
            CodeMode(self._session, limits=limits)

    def run(self, code: str, agent: str | None = None) -> CallResult:
        """Run one program through `run_code` and the pipeline; the call's result."""
        result: CallResult = self._loop.run_until_complete(
            self._session.call(RUN_CODE, {"code": code}, agent=agent))
        return result

    def close(self) -> None:
        """Close the session (and its log); the actor can then be killed."""
        self._session.close()
        self._loop.close()


SandboxActor: Any = ray.remote(_SandboxActor)
"""The Ray actor class of `_SandboxActor`: `SandboxActor.remote(tools, policy=..., ...)`.
Ray's actor defaults apply (a CPU to be placed, none held while it lives, so a fleet of
mostly idle agents can outnumber the cores); `SandboxActor.options(num_cpus=1)` reserves a
core per actor instead."""
