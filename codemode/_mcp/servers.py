"""Several MCP servers at once: distinct server names, distinct tool names across them, and a
session's tools kept in step with the servers' listings as they change.

Names. Each server keeps its display name unless an earlier server has it: two instances of
one command are `mcp_server_git` and `mcp_server_git_2`. A tool name only one server offers
stays as it is; a name several servers offer becomes `<server>.<tool>` for each of them
(`mcp_server_git.git_status`, `mcp_server_git_2.git_status`), so both stay reachable. The
program calls each under its Python alias (`mcp_server_git_2_git_status`, `stubs.aliases_for`),
which is what `run_code`'s description shows. The names follow the current listings: a
name becomes prefixed once a second server offers it, and plain again when it no longer does.

Changes. `McpTools.attach(session)` registers the tools and, on each server's new listing
(`McpServer.on_tools_changed`, after its `notifications/tools/list_changed`), registers what
was added or changed and disposes of what was removed; a tool whose name, description and
schemas are unchanged stays registered as it was. The session then fires `tools/changed`,
which `run_code`'s description, stubs and policy checks follow. A run in progress keeps the
tools it started with; a call it makes to a tool removed since fails as an unknown tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

import msgspec

from codemode.pipeline import DuplicateToolError, Session, ToolDefinition

from .client import McpServer
from .transport import argv_of, default_name

__all__ = ["McpTools", "connect_servers", "distinct_names"]


def distinct_names(names: Iterable[str]) -> list[str]:
    """`names` in order, each one already used by an earlier one suffixed with the first
    free `_2`, `_3`, ... (`["git", "git", "time"]` -> `["git", "git_2", "time"]`)."""
    taken: set[str] = set()
    result = []
    for name in names:
        unique, n = name, 2
        while unique in taken:
            unique, n = f"{name}_{n}", n + 1
        taken.add(unique)
        result.append(unique)
    return result


def _same(a: ToolDefinition, b: ToolDefinition) -> bool:
    return (a.name == b.name and a.description == b.description
            and a.parameters == b.parameters and a.output_schema == b.output_schema
            and (a.is_concurrency_safe is None) == (b.is_concurrency_safe is None))


class McpTools:
    """The tools of several connected servers under names distinct across them (the module
    docstring says how they are named and kept current).

    Args:
        servers: the servers, in the order their tools are listed.
    """

    def __init__(self, servers: Sequence[McpServer]) -> None:
        self.servers = tuple(servers)

    def named(self) -> list[tuple[McpServer, ToolDefinition]]:
        """Each server's current definitions, renamed where several servers offer a name:
        `(server, definition)` in server order, then each server's listing order."""
        offered = Counter(name for s in self.servers
                          for name in {d.name for d in s.definitions})
        return [(server, d if offered[d.name] < 2 else
                 msgspec.structs.replace(d, name=f"{server.name}.{d.name}"))
                for server in self.servers for d in server.definitions]

    def definitions(self) -> list[ToolDefinition]:
        """The current definitions under their distinct names (`named`)."""
        return [d for _, d in self.named()]

    def attach(self, session: Session, *, agent: str | None = None) -> Callable[[], None]:
        """Register the tools on `session` (for `agent`, default: globally) and keep them
        current while the servers' listings change.

        Returns:
            an idempotent disposer: stops following the servers and unregisters the tools.
        Raises:
            DuplicateToolError: a tool's name is already registered on the session (the
                message names the server); what was registered before it stays.
        """
        registered: dict[str, tuple[ToolDefinition, Callable[[], None]]] = {}

        def sync(_server: McpServer | None = None) -> None:
            wanted = {d.name: (server, d) for server, d in self.named()}
            for name, (held, dispose) in list(registered.items()):
                if name not in wanted or not _same(held, wanted[name][1]):
                    del registered[name]
                    dispose()
            for name, (server, definition) in wanted.items():
                if name in registered:
                    continue
                try:
                    dispose = session.register(definition, agent=agent)
                except DuplicateToolError:
                    raise DuplicateToolError(
                        f'MCP server {server.name!r} ({" ".join(server.command)}) offers a '
                        f'tool named "{name}", and a tool of that name is already '
                        "registered") from None
                registered[name] = (definition, dispose)

        followers = [server.on_tools_changed(sync) for server in self.servers]
        closed = False

        def detach() -> None:
            nonlocal closed
            if closed:
                return
            closed = True
            for unfollow in followers:
                unfollow()
            for _, dispose in registered.values():
                dispose()
            registered.clear()

        try:
            sync()
        except BaseException:
            detach()
            raise
        return detach


@contextlib.asynccontextmanager
async def connect_servers(
    commands: Sequence[str | Sequence[str]],
    *,
    startup_timeout_s: float = 20.0,
    call_timeout_s: float = 60.0,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    urls: Sequence[str] = (),
) -> AsyncIterator[list[McpServer]]:
    """Connect to several servers at once; close them all on exit (`AsyncExitStack`).

    Args:
        commands: one command per server (a string is split with `shlex`).
        startup_timeout_s, call_timeout_s, cwd, env: as for `McpServer.connect`, per server.
        urls: streamable-HTTP endpoints of servers already running (`McpServer.connect_url`).
    Yields:
        the servers, in the order of `commands` then `urls`, with distinct names
        (`distinct_names` over each one's default name: a second instance of a command is
        `<name>_2`). `McpTools(servers).definitions()` are their tools under distinct names;
        `McpTools(servers).attach(session)` registers them and keeps them current.
    Raises:
        ValueError: an empty command.
        McpStartError: the first command (in order) that failed; the servers that did start
            are closed before it propagates.
    """
    names = distinct_names([default_name(argv_of(c)) for c in commands]
                           + [urlsplit(u).netloc or u for u in urls])
    async with contextlib.AsyncExitStack() as stack:
        outcomes = await asyncio.gather(
            *(McpServer.connect(c, name=name, startup_timeout_s=startup_timeout_s,
                                call_timeout_s=call_timeout_s, cwd=cwd, env=env)
              for c, name in zip(commands, names, strict=False)),
            *(McpServer.connect_url(u, name=name, startup_timeout_s=startup_timeout_s,
                                    call_timeout_s=call_timeout_s)
              for u, name in zip(urls, names[len(commands):], strict=True)),
            return_exceptions=True)
        servers: list[McpServer] = []
        for outcome in outcomes:
            if isinstance(outcome, McpServer):
                stack.push_async_callback(outcome.aclose)
                servers.append(outcome)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        yield servers
