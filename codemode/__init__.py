"""codemode: run model-written Python in a wasmtime sandbox, with every tool call governed
by one pipeline (DESIGN.md §1). Re-exports the pipeline's public names."""

from codemode.pipeline import *  # noqa: F403  (the pipeline's public API is part of ours)
from codemode.pipeline import __all__ as _pipeline_all

from ._mcp import (McpCallTimeout, McpError, McpServer, McpServerDied, McpStartError,
                   McpToolError, connect_servers)
from ._policy import Policy, PolicyError
from ._rejections import rejection_code
from ._run_code import RUN_CODE, CodeMode, CodeRunFailed

__all__ = sorted({
    *_pipeline_all, "CodeMode", "CodeRunFailed", "McpCallTimeout", "McpError", "McpServer",
    "McpServerDied", "McpStartError", "McpToolError", "Policy", "PolicyError", "RUN_CODE",
    "connect_servers",
    "rejection_code",
})
