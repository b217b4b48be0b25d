"""The tools a command-line session offers: the built-in demo toolset and upstream MCP
servers, gathered once for `codemode run`, `demo` and `serve`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codemode.pipeline import Session, ToolDefinition

if TYPE_CHECKING:     # a session without MCP servers never loads the MCP SDK
    from .servers import McpTools


@dataclass
class Toolset:
    """What `gather_tools` gathered.

    Attributes:
        builtin: the built-in toolset's definitions (empty without `builtin`).
        mcp: the MCP servers' tools (`servers.McpTools`), None without servers.
    """

    builtin: list[ToolDefinition] = field(default_factory=list)
    mcp: McpTools | None = None

    def attach(self, session: Session) -> Callable[[], None]:
        """Register the MCP servers' tools on `session` (the built-in ones are passed to
        `Session(tools=...)`) and keep them current as the servers' listings change
        (`McpTools.attach`). Returns the disposer.

        Raises:
            DuplicateToolError: a server's tool has the name of a tool already registered.
        """
        return self.mcp.attach(session) if self.mcp is not None else (lambda: None)


async def gather_tools(stack: AsyncExitStack, *, builtin: bool, mcp: Sequence[str] = (),
                       mcp_urls: Sequence[str] = (),
                       call_timeout_s: float = 60.0) -> Toolset:
    """The built-in toolset (when `builtin`), and the MCP servers started from `mcp`
    (commands) and `mcp_urls` (streamable HTTP); the servers close with `stack`.

    Raises:
        McpStartError: a server did not start (the others are closed).
    """
    tools = Toolset()
    if builtin:
        from codemode.fixtures.toolset import builtin_tools
        tools.builtin.extend(builtin_tools())
    if mcp or mcp_urls:
        from .servers import McpTools, connect_servers
        servers = await stack.enter_async_context(
            connect_servers(list(mcp), urls=list(mcp_urls), call_timeout_s=call_timeout_s))
        tools.mcp = McpTools(servers)
    return tools
