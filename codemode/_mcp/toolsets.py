"""The tools a command-line session offers: the built-in demo toolset, the user's own
tools named `MODULE:ATTR` (`--tools`), and upstream MCP servers, gathered once for
`codemode run`, `resume`, `serve`, `describe` and `eval`."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

__all__ = ["ToolsSpecError", "Toolset", "gather_tools", "load_tools"]


class ToolsSpecError(ValueError):
    """A `MODULE:ATTR` that names no tools: malformed, a module that cannot be imported, a
    missing attribute, or a value that is not a tool, a list of tools or a function of no
    arguments returning them. The message says which, for the command line."""


def _import(module: str, path: str) -> Any:
    """`module` imported with `path` first on `sys.path` (kept there: a tool may import its
    siblings when it runs), as `python -m` puts the working directory first.

    Raises:
        ToolsSpecError: no such module, or importing it raised.
    """
    if path not in sys.path:
        sys.path.insert(0, path)
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise ToolsSpecError(f"no module named {exc.name!r} (looked in {path} and on "
                                 "sys.path)") from None
        raise ToolsSpecError(f"importing {module!r} failed: {type(exc).__name__}: "
                             f"{exc}") from None
    except (Exception, SystemExit) as exc:   # its own code raised or exited: say what,
        raise ToolsSpecError(f"importing {module!r} failed: {type(exc).__name__}: "
                             f"{exc}") from None    # not a traceback nor its exit status


def _tools_of(value: Any, where: str, *, call: bool = True) -> list[ToolDefinition]:
    """The tools `value` is: a tool, a list or tuple of tools, or (when `call`) a function
    of no arguments returning one of those."""
    if isinstance(value, ToolDefinition):
        return [value]
    if isinstance(value, (list, tuple)):
        found = []
        for index, item in enumerate(value):
            if not isinstance(item, ToolDefinition):
                raise ToolsSpecError(f"{where}[{index}] is {_kind(item)}, not a tool "
                                     "(decorate the function with @codemode.tool)")
            found.append(item)
        return found
    if call and callable(value):
        try:
            needed = [p for p in inspect.signature(value).parameters.values()
                      if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL,
                                                                  p.VAR_KEYWORD)]
        except (TypeError, ValueError):
            needed = []
        if needed:
            raise ToolsSpecError(f"{where} is a function of arguments "
                                 f"({', '.join(p.name for p in needed)}), not a tool: "
                                 "decorate it with @codemode.tool, or name a list of tools "
                                 "or a function of no arguments returning them")
        try:
            made = value()
        except (Exception, SystemExit) as exc:
            raise ToolsSpecError(f"{where}() raised {type(exc).__name__}: {exc}") from None
        try:
            return _tools_of(made, f"{where}()", call=False)
        except ToolsSpecError:
            raise ToolsSpecError(f"{where}() returned {_kind(made)}, not a tool or a list "
                                 "of tools (decorate each function with @codemode.tool)"
                                 ) from None
    raise ToolsSpecError(f"{where} is {_kind(value)}, not a tool, a list of tools or a "
                         "function of no arguments returning them")


def _module_of(file: str, where: str) -> str:
    """The module name a file path given as `--tools`' module stands for: dotted from
    `where` when the file is under it, else the file's own name (imported from its folder,
    or with that folder on PYTHONPATH)."""
    path = Path(os.path.abspath(os.path.join(where, file)))
    try:
        parts = path.relative_to(os.path.abspath(where)).with_suffix("").parts
    except ValueError:                   # outside the working directory
        parts = (path.stem,)
    return ".".join(parts)


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def load_tools(specs: Sequence[str], *, path: str | None = None) -> list[ToolDefinition]:
    """The tools `specs` name, in order: each `MODULE:ATTR` (`package.module:name`, the
    attribute dotted if it is nested) is a tool (`@codemode.tool`), a list or tuple of
    tools, or a function of no arguments returning one of those (called once per call of
    this function: a fresh set of tools).

    Args:
        specs: the `MODULE:ATTR` texts (`--tools`, repeatable).
        path: the directory imported from first (default: the working directory, as
            `python -m` does); it stays first on `sys.path`.
    Returns:
        The tools, in the order given.
    Raises:
        ToolsSpecError: a spec is malformed, its module cannot be imported, it has no
            such attribute, the attribute is not tools or gives none (an empty list), or
            two specs give a tool of the same name.
    """
    where = path or os.getcwd()
    tools: list[ToolDefinition] = []
    given: dict[str, str] = {}
    for spec in specs:
        module, sep, attr = spec.partition(":")
        if not sep or not module.strip() or not attr.strip():
            raise ToolsSpecError(f"{spec!r} is not MODULE:ATTR (e.g. mytools:TOOLS, "
                                 "package.module:make_tools)")
        module = module.strip()
        if module.endswith(".py") or "/" in module or os.sep in module:
            raise ToolsSpecError(f"{module!r} is a file, and --tools names a module: "
                                 f"{_module_of(module, where)}:{attr.strip()} (imported "
                                 f"from {where} first, then from sys.path and PYTHONPATH)")
        value = _import(module, where)
        owner = module
        for part in attr.strip().split("."):
            if not hasattr(value, part):
                raise ToolsSpecError(f"{owner!r} has no attribute {part!r}")
            value, owner = getattr(value, part), f"{owner}.{part}"
        found = _tools_of(value, spec)
        if not found:                  # an empty list, or a function returning one
            raise ToolsSpecError(f"{spec} names no tools: "
                                 f"{owner}{'()' if callable(value) else ''} is empty")
        for definition in found:
            if definition.name in given:
                raise ToolsSpecError(f"two tools are named {definition.name!r}: from "
                                     f"{given[definition.name]} and from {spec}")
            given[definition.name] = spec
            tools.append(definition)
    return tools


async def gather_tools(stack: AsyncExitStack, *, builtin: bool, mcp: Sequence[str] = (),
                       mcp_urls: Sequence[str] = (), tools: Sequence[ToolDefinition] = (),
                       call_timeout_s: float = 60.0) -> Toolset:
    """The built-in toolset (when `builtin`), then `tools` (the user's, `load_tools`), and
    the MCP servers started from `mcp` (commands) and `mcp_urls` (streamable HTTP); the
    servers close with `stack`.

    Raises:
        McpStartError: a server did not start (the others are closed).
    """
    gathered = Toolset()
    if builtin:
        from codemode.fixtures.toolset import builtin_tools
        gathered.builtin.extend(builtin_tools())
    gathered.builtin.extend(tools)
    if mcp or mcp_urls:
        from .servers import McpTools, connect_servers
        servers = await stack.enter_async_context(
            connect_servers(list(mcp), urls=list(mcp_urls), call_timeout_s=call_timeout_s))
        gathered.mcp = McpTools(servers)
    return gathered
