"""The tools a command-line session offers: the built-in demo toolset and upstream MCP
servers, gathered once for `codemode run`, `demo` and `serve`."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack

from codemode.pipeline import ToolDefinition


async def gather_tools(stack: AsyncExitStack, *, builtin: bool, mcp: Sequence[str] = (),
                       mcp_urls: Sequence[str] = (),
                       call_timeout_s: float = 60.0) -> list[ToolDefinition]:
    """The built-in toolset (when `builtin`), then every tool of the MCP servers started
    from `mcp` (commands) and `mcp_urls` (streamable HTTP); the servers close with `stack`.

    Raises:
        McpStartError: a server did not start (the others are closed).
    """
    tools: list[ToolDefinition] = []
    if builtin:
        from codemode.fixtures.toolset import builtin_tools
        tools.extend(builtin_tools())
    if mcp or mcp_urls:
        from .client import connect_servers
        servers = await stack.enter_async_context(
            connect_servers(list(mcp), urls=list(mcp_urls), call_timeout_s=call_timeout_s))
        for server in servers:
            tools.extend(server.definitions)
    return tools

