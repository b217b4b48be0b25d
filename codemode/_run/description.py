"""The text made of the tools' stubs: the description of `run_code` the model reads, and
the stubs as one Python module mypy checks programs against (docs/codemode.md "Typed tool
stubs and the model-facing description").

Separate from `stubs`, which builds each tool's stub: this is what is printed of a set of
them, with the words around the listing (what a program can do, the modules it may import,
the limits of a run).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from codemode.sandbox import SandboxLimits

from .budget import bounded
from .stubs import ToolStub, _docstring_block

__all__ = [
    "MAX_DOC_CHARS", "describe_tool", "describe_tools", "run_code_description", "stubs_module",
]

MAX_DOC_CHARS = 1200
"""A tool's description in the listing is cut to this many characters (`describe_tools`)."""

_MODULE_HEADER = '''\
# mypy: disable-error-code="empty-body, assignment"
"""Typed stubs of the tools a program can call. Calling one runs the tool on the host."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict'''


_PREAMBLE = """\
Run a Python 3 program in an isolated sandbox (no files, network, environment or \
subprocesses) and get back what it printed and the value of its last expression.

Inside the program each tool below is a plain function: call it and use the value it \
returns. In async code, `await` tool calls; calls gathered with `asyncio.gather` go out \
together, and run concurrently only for tools marked concurrency-safe (others run one at a \
time). An unawaited call in async code is a pending call, not its value: `await` it \
(stderr names any call never awaited). `call_tool(name, **kwargs)` calls a tool by its \
name. A failed call raises \
`ToolCallError` (subclasses `ToolDenied`, `ToolArgumentError`, `ToolNotFound`, \
`ToolError`; attributes `tool_name`, `message`, `code`); catching it does not make the call \
succeed. To return a value, end the program with an expression; use print() for anything \
else you want to see.
"""

_CODE_MODE_RULE = """
Only `run_code` may be called directly: call every other tool inside a program.
"""

_LISTING_HEADING = "\nAvailable tools:\n"


# What a program is likely to import, in the order a model reads them: the modules the
# paragraph names when the sandbox allows them. Debugging, profiling and interpreter
# modules (`pdb`, `dis`, `gc`, `tracemalloc`, ...) stay importable but unnamed.
_LIKELY_MODULES = (
    "json", "re", "datetime", "zoneinfo", "time", "math", "statistics", "decimal",
    "fractions", "random", "collections", "itertools", "functools", "operator", "heapq",
    "bisect", "asyncio", "typing", "dataclasses", "enum", "string", "textwrap", "difflib",
    "unicodedata", "html", "csv", "base64", "hashlib", "uuid", "urllib.parse", "ipaddress",
    "copy", "pprint", "calendar",
)


def _modules_text(modules: frozenset[str]) -> str:
    """The modules a program is likely to import, those of `_LIKELY_MODULES` that `modules`
    holds, as one paragraph, with how many more there are (the full dotted list is several
    hundred names, most of which a program never needs)."""
    named = [m for m in _LIKELY_MODULES if m in modules]
    others = {n.partition(".")[0] for n in modules} - {m.partition(".")[0] for m in named}
    more = (f" and {len(others)} more standard-library packages" if others else "")
    return ("\nModules to import: " + ", ".join(named) + more
            + "; importing one the sandbox does not offer raises ModuleNotFoundError.\n")


def _size(n_bytes: int) -> str:
    """`n_bytes` in the largest binary unit that divides it: "256 MiB", "64 KiB", "100 bytes"."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= size and n_bytes % size == 0:
            return f"{n_bytes // size} {unit}"
    return f"{n_bytes} bytes"


def _limits_text(limits: SandboxLimits) -> str:
    """The limits a program runs under, as one paragraph."""
    parts = [f"{limits.wall_clock_s:g} s of wall-clock time (sleeps and tool calls count)",
             f"{_size(limits.memory_bytes)} of memory",
             f"{_size(limits.output_cap_bytes)} each of printed output and of error output "
             f"(you are shown the first {_size(limits.output_bytes)} of each, and of the "
             "final value's JSON; the run still succeeds)",
             f"{limits.max_subcalls} tool calls",
             f"{_size(limits.request_bytes)} of JSON arguments per tool call"]
    if limits.fuel is not None:
        parts.append(f"{limits.fuel} units of fuel (about one per instruction)")
    return "\nEach run may use at most " + "; ".join(parts) + ". Past a limit the run stops " \
        "and fails.\n"


def run_code_description(stubs: Sequence[ToolStub], *, modules: frozenset[str],
                         limits: SandboxLimits, code_mode: bool,
                         budget: int | None = None) -> str:
    """The description of `run_code`: how to write a program, the `modules` it may import,
    the `limits` of a run, the rule of code mode when `code_mode`, then the listing of
    `stubs` (`describe_tools`). With a `budget` (characters), a listing that does not fit
    gives way to an index of the tools and how to discover them (`budget.bounded`): the
    result never has more than `budget` characters."""
    rule = _CODE_MODE_RULE if code_mode else ""
    head = _PREAMBLE + _modules_text(modules) + _limits_text(limits) + rule

    def full() -> str:
        listing = describe_tools(stubs) if stubs else "(no tools are available)"
        return head + _LISTING_HEADING + listing

    return full() if budget is None else bounded(full, head, stubs, budget)


def stubs_module(stubs: Sequence[ToolStub]) -> str:
    """A complete Python module of the stubs, which compiles and which mypy checks programs against.

    Layout: a `# mypy:` line (trivial bodies and schema defaults are not errors here), the
    imports (`from __future__ import annotations`, `typing`), every TypedDict once (in order of
    first use), then each stub's function (`source()` without its classes), in the given order.

    Raises:
        ValueError: two stubs share an alias, or define one class name differently (stubs built
            apart with `build_stub`; use `build_stubs`), or a class name equals an alias.
    """
    classes = _collect_classes(stubs)
    aliases = [s.alias for s in stubs]
    dupes = sorted({a for a in aliases if aliases.count(a) > 1})
    if dupes:
        raise ValueError(f"stubs share aliases: {dupes}")
    clash = sorted(set(aliases) & classes.keys())
    if clash:
        raise ValueError(f"class names equal tool aliases: {clash}")
    parts = [_MODULE_HEADER, *classes.values(), *(s._function() for s in stubs)]
    return "\n\n\n".join(parts) + "\n"


def describe_tools(stubs: Sequence[ToolStub], *, max_doc_chars: int = MAX_DOC_CHARS) -> str:
    """Compact text that tells the model which functions it can call.

    The TypedDicts come first, each once; then, sorted by alias, each tool's signature with
    its docstring (`ToolStub.doc_text`): the tool's description, cut to `max_doc_chars`
    characters and marked `[… N more characters]` when cut, the note on keys that are not
    Python names, and the `Args:` section (each parameter's description, format, bounds and
    such). No JSON Schema is shown.

    Raises:
        ValueError: two stubs define one class name differently.
    """
    ordered = sorted(stubs, key=lambda s: s.alias)
    classes = _collect_classes(ordered)
    blocks = list(classes.values())
    blocks.extend(_tool_block(stub, max_doc_chars) for stub in ordered)
    return "\n\n".join(blocks) + "\n"


def describe_tool(stub: ToolStub) -> str:
    """What the full listing (`describe_tools`) shows of one tool: the TypedDicts its
    signature refers to, then its signature and docstring, in the same words."""
    classes = _collect_classes([stub]).values()
    return "\n\n".join([*classes, _tool_block(stub, MAX_DOC_CHARS)]) + "\n"


def _tool_block(stub: ToolStub, max_doc_chars: int) -> str:
    """One tool's signature with its docstring as the listing shows it (`ToolStub.doc_text`:
    the whole description cut to `max_doc_chars` and marked, its `Args:` and its note)."""
    doc = stub.doc_text(max_doc_chars)
    if doc:
        return f"{stub.signature}\n{_docstring_block(doc, '    ')}"
    return f"{stub.signature} ..."


def _collect_classes(stubs: Iterable[ToolStub]) -> dict[str, str]:
    classes: dict[str, str] = {}
    for stub in stubs:
        pairs = stub.classes
        if not pairs and stub.typed_dicts:  # a ToolStub made by hand: its text as one unit
            pairs = ((f"<{stub.alias}>", stub.typed_dicts),)
        for name, text in pairs:
            if classes.get(name, text) != text:
                raise ValueError(
                    f"class {name!r} is defined differently by two stubs;"
                    " build them together with build_stubs()"
                )
            classes[name] = text
    return classes
