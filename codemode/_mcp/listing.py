"""A server's tool listing (`tools/list`, every page, within bounds) and what each listed
tool becomes: a pipeline `ToolDefinition` whose body sends `tools/call` (`client`).

Pages. `tools/list` answers a page and, while more follow, a `nextCursor`; the listing
follows cursors until a page has none. A server that answers a cursor it already gave (a
loop) or more than `MAX_TOOL_PAGES` pages fails the listing with `McpProtocolError` naming
the server at once, instead of asking for the same pages until a timeout.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import ClientSession
from mcp_types import PaginatedRequestParams

from codemode.pipeline import RunContext, ToolDefinition

from .._run.tagged import mark_tagged
from .answers import render
from .errors import McpProtocolError
from .values import admit_markers, wrapped_result

__all__ = ["MAX_TOOL_PAGES", "list_all_tools", "tool_definition"]

MAX_TOOL_PAGES = 1000
"""Pages of one `tools/list` listing a server may answer (with a server's usual 50 to 100
tools a page, 50,000 to 100,000 tools); one more fails the listing."""


async def list_all_tools(session: ClientSession, *, server: str,
                         max_pages: int = MAX_TOOL_PAGES) -> list[Any]:
    """Every page of `tools/list`, in order (the MCP `Tool` objects).

    Args:
        session: the connection's SDK session.
        server: the server's display name, for the error.
        max_pages: pages allowed (>= 1).
    Raises:
        McpProtocolError: a page answered a cursor the listing already followed, or more
            than `max_pages` pages were needed; the message names the server.
        Exception: what the SDK raised for a failed request.
    """
    listing = await session.list_tools()
    tools = list(listing.tools)
    followed: set[str] = set()
    pages = 1
    while listing.next_cursor:
        cursor = listing.next_cursor
        if cursor in followed:
            raise McpProtocolError(
                f"MCP server {server!r} answered tools/list page {pages} with the cursor "
                f"{cursor[:80]!r} it had already given: its listing loops", server=server)
        if pages >= max_pages:
            raise McpProtocolError(
                f"MCP server {server!r} listed its tools in more than {max_pages} pages "
                f"(MAX_TOOL_PAGES): the listing was stopped", server=server)
        followed.add(cursor)
        listing = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        tools.extend(listing.tools)
        pages += 1
    return tools


Call = Callable[[str, dict[str, Any], RunContext], Awaitable[Any]]


def tool_definition(mcp_tool: Any, call: Call, server: str = "") -> tuple[ToolDefinition, bool]:
    """A listed MCP tool as a `ToolDefinition` whose body is `call(tool_name, args, ctx)`,
    of the group `server` (the server's display name: a description's index groups by it).

    Returns:
        the definition (`parameters`: the tool's `inputSchema`; `output_schema`: its
        `outputSchema`, unwrapped from the `{"result": value}` envelope and admitting the
        `{"$int": ...}` marker of a too-big int; `is_concurrency_safe` answers True for a
        tool annotated `readOnlyHint: true`, and `read_only` is then True: a dry run runs it;
        `destructive` and `idempotent` are its `destructiveHint` and `idempotentHint`, None
        when the server does not say), and whether the structured value is such an
        envelope.
    """
    tool_name: str = mcp_tool.name

    async def execute(args: dict[str, Any], ctx: RunContext) -> Any:
        return await call(tool_name, args, ctx)

    execute.__name__ = f"{tool_name}_execute"
    annotations = mcp_tool.annotations
    read_only = bool(annotations is not None and annotations.read_only_hint is True)
    safe: Callable[[Any], bool] | None = (lambda _args: True) if read_only else None
    output_schema = (dict(mcp_tool.output_schema)
                     if mcp_tool.output_schema is not None else None)
    inner = wrapped_result(tool_name, output_schema)
    if inner is not None:      # the framework's {"result": value} envelope: the value
        output_schema = inner
    if output_schema is not None:     # a too-big int becomes {"$int": ...}: allowed there
        output_schema = admit_markers(output_schema)
    definition = ToolDefinition(
        name=tool_name,
        description=mcp_tool.description or "",
        parameters=dict(mcp_tool.input_schema),
        execute=execute,
        output_schema=output_schema,
        render=render,
        is_concurrency_safe=safe,
        group=server,
        read_only=read_only,
        destructive=annotations.destructive_hint if annotations is not None else None,
        idempotent=annotations.idempotent_hint if annotations is not None else None,
    )
    mark_tagged(execute)      # its values come tagged for the wire (`values.lossless`)
    return definition, inner is not None
