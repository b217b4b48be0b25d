"""codemode: run model-written Python in a wasmtime sandbox, with every tool call governed
by one pipeline. Re-exports the pipeline's public names.

The pipeline's names load with the package; the rest load on first use (PEP 562), so
`import codemode` pulls in neither the MCP SDK nor wasmtime until a program needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from codemode.pipeline import *  # noqa: F403  (the pipeline's public API is part of ours)
from codemode.pipeline import __all__ as _pipeline_all

if TYPE_CHECKING:  # `X as X`: re-exported for type checkers, which do not run __getattr__
    from ._mcp import McpCallTimeout as McpCallTimeout
    from ._mcp import McpError as McpError
    from ._mcp import McpServer as McpServer
    from ._mcp import McpServerDied as McpServerDied
    from ._mcp import McpStartError as McpStartError
    from ._mcp import McpToolError as McpToolError
    from ._mcp import connect_servers as connect_servers
    from ._policy import Policy as Policy
    from ._policy import PolicyError as PolicyError
    from ._rejections import rejection_code as rejection_code
    from ._run_code import RUN_CODE as RUN_CODE
    from ._run_code import CodeMode as CodeMode
    from ._run_code import CodeRunFailed as CodeRunFailed
    from ._seal import ResumeTampered as ResumeTampered
    from ._seal import SealKey as SealKey
    from ._seal import SealKeyError as SealKeyError
    from ._serve import CodeModeServer as CodeModeServer

# name -> the private module that defines it
_LAZY = {
    **dict.fromkeys(("McpCallTimeout", "McpError", "McpServer", "McpServerDied",
                     "McpStartError", "McpToolError", "connect_servers"), "._mcp"),
    **dict.fromkeys(("Policy", "PolicyError"), "._policy"),
    "rejection_code": "._rejections",
    **dict.fromkeys(("RUN_CODE", "CodeMode", "CodeRunFailed"), "._run_code"),
    **dict.fromkeys(("ResumeTampered", "SealKey", "SealKeyError"), "._seal"),
    "CodeModeServer": "._serve",
}


def _export_order(name: str) -> tuple[bool, bool, str]:
    """The order ruff's RUF022 keeps every other `__all__` in: CONSTANTS, Classes, the rest."""
    return (not (len(name) > 1 and name.isupper()), not name[:1].isupper(), name)


__all__ = sorted({*_pipeline_all, *_LAZY}, key=_export_order)  # noqa: PLE0605  (sorted() is a list)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codemode' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value         # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
