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
from collections.abc import Callable, Iterable
from typing import Any

import ray

from ._policy import Policy
from ._run_code import RUN_CODE, CodeMode
from .pipeline import CallResult, Session, ToolDefinition
from .sandbox import SandboxLimits

__all__ = ["SandboxActor", "connect"]


def connect(address: str) -> None:
    """Join a Ray cluster, unless this process already has.

    Args:
        address: "local" starts a cluster on this machine (or joins the one the
            `RAY_ADDRESS` environment variable names); anything else is passed to
            `ray.init(address=...)`: "auto" (a cluster started with `ray start` here),
            "ray://HEAD:10001" (Ray Client), "HOST:6379".
    """
    if ray.is_initialized():
        return
    if address == "local":
        ray.init(log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)


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
