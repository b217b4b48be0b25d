"""codemode: run model-written Python in a wasmtime sandbox, with every tool call governed
by one pipeline. Re-exports the pipeline's public names, but for its low-level building
blocks (`eager`, `launch`, `message_of`, `POINTS`), which stay in `codemode.pipeline`.

Every name loads on first use (PEP 562): `import codemode` (and `import codemode.sandbox`,
which imports this package first) pulls in neither the pipeline, nor the MCP SDK, nor
wasmtime until a program uses a name that needs them.

The namespace holds the API alone: `__all__`, the layers (`pipeline`, `sandbox`,
`fixtures`) and the submodules a program imports (`codemode.adapters`, ...); what this module
needs to do its work has a leading underscore, so `dir(codemode)` and attribute access
show nothing else.
"""

import typing as _typing
from importlib import import_module as _import_module

if _typing.TYPE_CHECKING:  # `X as X`: re-exported for type checkers, which do not run __getattr__
    from codemode.pipeline import *  # noqa: F403  (the pipeline's public API is part of ours)
    from codemode.pipeline import __all__ as _pipeline_all

    from ._mcp.client import McpServer as McpServer
    from ._mcp.errors import McpCallTimeout as McpCallTimeout
    from ._mcp.errors import McpError as McpError
    from ._mcp.errors import McpServerDied as McpServerDied
    from ._mcp.errors import McpStartError as McpStartError
    from ._mcp.errors import McpToolError as McpToolError
    from ._mcp.serve import CodeModeServer as CodeModeServer
    from ._mcp.servers import McpTools as McpTools
    from ._mcp.servers import connect_servers as connect_servers
    from ._policy.policy import Policy as Policy
    from ._policy.policy import PolicyError as PolicyError
    from ._policy.policy import PolicyWarning as PolicyWarning
    from ._run.plan import Plan as Plan
    from ._run.plan import PlanEntry as PlanEntry
    from ._run.plan import PlanFailed as PlanFailed
    from ._run.plan import PlanOverQuota as PlanOverQuota
    from ._run.plan import PlanQuota as PlanQuota
    from ._run.plan_approval import ApprovalUsed as ApprovalUsed
    from ._run.plan_approval import PlanApproval as PlanApproval
    from ._run.plan_approval import approve_plan as approve_plan
    from ._run.plan_approval import run_approved as run_approved
    from ._run.rejections import rejection_code as rejection_code
    from ._run.run_code import RUN_CODE as RUN_CODE
    from ._run.run_code import CodeMode as CodeMode
    from ._run.run_code import CodeRunFailed as CodeRunFailed
    from ._run.seal import ResumeTampered as ResumeTampered
    from ._run.seal import SealKey as SealKey
    from ._run.seal import SealKeyError as SealKeyError

# name -> the private module that defines it
_LAZY = {
    "McpServer": "._mcp.client",
    **dict.fromkeys(("McpTools", "connect_servers"), "._mcp.servers"),
    **dict.fromkeys(("McpCallTimeout", "McpError", "McpServerDied", "McpStartError",
                     "McpToolError"), "._mcp.errors"),
    **dict.fromkeys(("Policy", "PolicyError", "PolicyWarning"), "._policy.policy"),
    **dict.fromkeys(("Plan", "PlanEntry", "PlanFailed", "PlanOverQuota", "PlanQuota"),
                   "._run.plan"),
    **dict.fromkeys(("ApprovalUsed", "PlanApproval", "approve_plan",
                     "run_approved"), "._run.plan_approval"),
    "rejection_code": "._run.rejections",
    **dict.fromkeys(("RUN_CODE", "CodeMode", "CodeRunFailed"), "._run.run_code"),
    **dict.fromkeys(("ResumeTampered", "SealKey", "SealKeyError"), "._run.seal"),
    "CodeModeServer": "._mcp.serve",
}


# The pipeline's low-level names, kept in `codemode.pipeline` alone: the pieces its own
# stages are built from, which no codemode program or policy needs.
_PIPELINE_ONLY = frozenset({"POINTS", "eager", "launch", "message_of"})

# The layers, reached as attributes after `import codemode` alone (`codemode.pipeline`).
_SUBPACKAGES = frozenset({"pipeline", "sandbox", "fixtures"})


def _export_order(name: str) -> tuple[bool, bool, str]:
    """The order ruff's RUF022 keeps every other `__all__` in: CONSTANTS, Classes, the rest."""
    return (not (len(name) > 1 and name.isupper()), not name[:1].isupper(), name)


if _typing.TYPE_CHECKING:
    __all__ = sorted({*_pipeline_all, *_LAZY} - _PIPELINE_ONLY, key=_export_order)  # noqa: PLE0605


def _public_names() -> list[str]:
    """`__all__`: the pipeline's public names but its low-level ones (`_PIPELINE_ONLY`), and
    ours (importing the pipeline)."""
    from codemode.pipeline import __all__ as pipeline_all

    return sorted({*pipeline_all, *_LAZY} - _PIPELINE_ONLY, key=_export_order)


def __getattr__(name: str) -> _typing.Any:
    if name.startswith("__") and name != "__all__":   # introspection: loads nothing
        raise AttributeError(f"module 'codemode' has no attribute {name!r}")
    if name == "__all__":
        value: _typing.Any = _public_names()
    elif name in _SUBPACKAGES:
        value = _import_module(f".{name}", __name__)
    elif name in _LAZY:
        value = getattr(_import_module(_LAZY[name], __name__), name)
    else:
        pipeline = _import_module(".pipeline", __name__)
        if name not in pipeline.__all__ or name in _PIPELINE_ONLY:
            raise AttributeError(f"module 'codemode' has no attribute {name!r}")
        value = getattr(pipeline, name)
    globals()[name] = value         # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The API (`__all__`), the layers, the submodules imported so far and the module's
    dunders (`__name__`, ...); never a name with one leading underscore."""
    loaded = {name for name, value in globals().items() if not name.startswith("_")
              and getattr(value, "__name__", None) == f"{__name__}.{name}"}
    dunders = {name for name in globals() if name.startswith("__")}
    return sorted({*dunders, *_public_names(), *_SUBPACKAGES, *loaded})
