"""The type check of a program before it runs, against the stubs the model reads
(docs/codemode.md "Type check before the run").

The checker is ty (PyPI `ty`, a type checker written in Rust; the one Monty ships), run as
a process on the program alone: about 0.1 s a check where mypy takes a second or more
(docs/benchmarks.md "Type check"). The stubs are written as the `__builtins__.pyi` of a
directory ty is pointed at (so the program's own lines and columns are the ones ty
reports): those of the tools the program names (the others cannot matter to it, and ty
reads the whole file on every check, so a check costs the same with 10 tools or 5,000),
once per tool set and set of tools named, and reused by every run that names the same.

What is reported is only what would fail at run time anyway, and before any tool ran: a
call of a tool (or of `call_tool`, `search_tools`, `describe`) with an argument of the
wrong type, an unknown keyword, a missing required argument, too many positional arguments
or an argument given twice; and a name that is not defined (an unknown tool) used outside
function bodies (a body may use a global set later). The rest of ty's rules are off, and
calls of library functions are not judged (typeshed's overloads refuse some correct
calls), so dynamic code, untyped helpers and JSON values of unknown shape pass; so does an
argument ty only knows as a union (`float | str`), which may hold the right type when it
runs. `await` on a call and a call passed to an asyncio entry point (`gather`, `wait`,
`create_task`, ...) pass too, as a call in async code is a pending call
(docs/codemode.md "Async"). A program that does not parse is left to the sandbox, which
reports its `SyntaxError` as always, and so is one that names no tool (`TypeChecker.check`).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import itertools
import logging
import os
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from codemode.pipeline import HarnessError

from .description import _collect_classes
from .stubs import ToolStub

__all__ = [
    "DEFAULT_TYPE_CHECK",
    "REPORTED_RULES",
    "TypeCheck",
    "TypeCheckError",
    "TypeCheckFailed",
    "TypeCheckUnavailable",
    "TypeChecker",
    "format_errors",
]

TypeCheck = Literal["off", "warn", "enforce"]
"""What a run does with the check: "off" (no check), "warn" (run anyway; the errors come
beside the result), "enforce" (a program with errors does not start)."""

DEFAULT_TYPE_CHECK: TypeCheck = "enforce"
"""The default (docs/codemode.md says why): only errors that would fail the run anyway are
reported, and refusing them before the first call keeps earlier calls from having effects."""

REPORTED_RULES = (
    "invalid-argument-type",          # get_weather(42) where a str is expected
    "unknown-argument",               # get_weather("Paris", unit="c")
    "missing-argument",               # a required parameter not given
    "too-many-positional-arguments",
    "parameter-already-assigned",     # f(1, a=1)
    "unresolved-reference",           # a name (a tool) that does not exist
)
"""ty's rules a check reports; every other rule is off."""

PROGRAM = "<program>"
_log = logging.getLogger("codemode.typecheck")
REMEMBERED_CHECKS = 1024
"""Runs whose errors `TypeChecker.errors_of` still answers (the latest ones)."""

CHECK_TIMEOUT_S = 60.0
"""Seconds one check may take before it is abandoned (and the run goes on unchecked)."""

_TOP_LEVEL_ASYNC = "outside of an asynchronous function"   # top-level await is allowed
_PYTHON_VERSION = "3.14"         # the guest's CPython (the wasm tier)
_MAX_PREPARED = 32               # stubs directories kept (per tool set and tools used)

_PRELUDE = '''\
"""What every program has besides its tools: call_tool, discovery, read_output (when
output paging is on), the rejections."""
from typing import Any, Literal, NotRequired, TypedDict

class ToolCallError(Exception):
    tool_name: str
    message: str
    code: str
    def __init__(self, tool_name: str, message: str, code: str | None = None) -> None: ...

class ToolDenied(ToolCallError): ...
class ToolArgumentError(ToolCallError, TypeError): ...
class ToolNotFound(ToolCallError): ...
class ToolError(ToolCallError): ...

def call_tool(name: str, /, **kwargs: Any) -> Any: ...
def search_tools(query: str, limit: int = 10) -> Any: ...
def describe(name: str) -> Any: ...
def read_output(handle: str, part: Literal["stdout", "stderr", "value"] = "stdout",
                offset: int = 0, size: int = 20000) -> str: ...

class _CodemodeToolNamespace:
    def __getattr__(self, alias: str) -> Any: ...

tools: _CodemodeToolNamespace
'''

class TypeCheckError(msgspec.Struct, frozen=True, kw_only=True):
    """One error the check found in a program.

    Attributes:
        line, column: where it starts, both from 1 (as in a `SyntaxError`).
        end_line, end_column: where it ends (exclusive column).
        rule: ty's rule, one of `REPORTED_RULES`.
        message: ty's words, e.g. "Argument to function `get_weather` is incorrect:
            Expected `str`, found `Literal[42]`".
    """

    line: int
    column: int
    end_line: int
    end_column: int
    rule: str
    message: str


class TypeCheckFailed(HarnessError):
    """The program failed the type check against its tools' stubs (`type_check =
    "enforce"`) and did not start: no sandbox ran, no tool was called. Shaped as a
    `SyntaxError`'s `CodeRunFailed`: code `CODE_RUN_FAILED`, message `code run failed
    (type-check): <n> type errors (<program>, line L, column C: <first>); ...`, then each
    error as a `SyntaxError` traceback shows one (`format_errors`).

    Attributes:
        errors: the `TypeCheckError`s, in order of position (line and column from 1).
        outcome: None (no run took place), as `CodeRunFailed.outcome` of a run that did not.
    """

    code = "CODE_RUN_FAILED"

    def __init__(self, message: str, errors: Sequence[TypeCheckError]) -> None:
        super().__init__(message)
        self.errors = tuple(errors)
        self.outcome = None


class TypeCheckUnavailable(RuntimeError):
    """ty could not be run or did not answer (missing binary, crash, `CHECK_TIMEOUT_S`)."""


class _Position(msgspec.Struct):
    line: int
    column: int


class _Positions(msgspec.Struct):
    begin: _Position
    end: _Position


class _Location(msgspec.Struct):
    path: str
    positions: _Positions


class _Diagnostic(msgspec.Struct):
    """One entry of ty's `--output-format gitlab` report."""

    check_name: str
    description: str
    location: _Location


_DIAGNOSTICS = msgspec.json.Decoder(list[_Diagnostic])


def checked_stubs(stubs: Sequence[ToolStub]) -> str:
    """The stubs as the `__builtins__.pyi` ty checks a program against: the prelude (the
    names every program has), each TypedDict once, each tool's signature (no docstrings).

    Raises:
        ValueError: two stubs define one class name differently (`build_stubs` never does).
    """
    classes = _collect_classes(stubs)
    functions = [f"{s.signature}\n    ..." for s in stubs]
    return "\n\n".join([_PRELUDE, *classes.values(), *functions]) + "\n"


def _ty_binary() -> str:
    """The path of ty's binary (the `ty` package's), else `ty` on PATH.

    Raises:
        TypeCheckUnavailable: neither exists."""
    try:
        from ty import find_ty_bin
        return find_ty_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("ty")
        if found is None:
            raise TypeCheckUnavailable("the type checker `ty` is not installed "
                                       "(pip install ty)") from None
        return found


class TypeChecker:
    """Checks programs against a tool set's stubs with ty; one per `CodeMode`.

    For each tool set (the tuple of stubs `CodeMode` keeps per set of definitions) and
    set of tools a program names, the stubs are written to a directory once and reused;
    `_MAX_PREPARED` directories are kept. Safe for concurrent checks. `close()` removes
    the directories.
    """

    def __init__(self) -> None:
        self._root: Path | None = None
        self._prepared: dict[tuple[int, frozenset[str] | None],
                             tuple[Sequence[ToolStub], Path]] = {}
        self._lock = threading.Lock()
        self._count = itertools.count()
        self._users: dict[Path, int] = {}       # checks running on each directory
        self._evicted: set[Path] = set()        # removed once their last check ends
        self._errors: dict[str, tuple[TypeCheckError, ...]] = {}   # call id -> its errors
        self._removal: Callable[[], object] = lambda: None   # removes the root, once

    def close(self) -> None:
        """Remove the prepared directories (also done when the checker is collected, or
        at the interpreter's exit, for a `CodeMode` nobody closed)."""
        with self._lock:
            root, self._root = self._root, None
            self._prepared.clear()
        if root is not None:
            self._removal()

    def prepare(self, stubs: Sequence[ToolStub], names: frozenset[str] | None = None) -> Path:
        """The directory holding the stubs for ty: those of the tools whose alias is in
        `names` (the names a program uses: the others cannot matter to it, and ty reads
        the whole file on every check), or all of `stubs` when None. Made on first use of
        this tuple and these tools. The caller holds the directory until `release`."""
        chosen = (None if names is None
                  else frozenset(s.alias for s in stubs if s.alias in names))
        key = (id(stubs), chosen)
        with self._lock:
            found = self._prepared.get(key)
            if found is not None and found[0] is stubs:
                self._users[found[1]] = self._users.get(found[1], 0) + 1
                return found[1]
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="codemode-typecheck-"))
                self._removal = weakref.finalize(self, shutil.rmtree, self._root,
                                                 ignore_errors=True)
            folder = self._root / f"tools-{next(self._count)}"
        folder.mkdir()
        used = stubs if chosen is None else [s for s in stubs if s.alias in chosen]
        (folder / "__builtins__.pyi").write_text(checked_stubs(used), encoding="utf-8")
        rules = "\n".join(f'{rule} = "error"' for rule in REPORTED_RULES)
        (folder / "ty.toml").write_text(
            f'[environment]\npython-version = "{_PYTHON_VERSION}"\n\n'
            f'[rules]\nall = "ignore"\n{rules}\n', encoding="utf-8")
        with self._lock:
            if len(self._prepared) >= _MAX_PREPARED:          # the oldest goes
                _, old = self._prepared.pop(next(iter(self._prepared)))
                if self._users.get(old):
                    self._evicted.add(old)
                else:
                    shutil.rmtree(old, ignore_errors=True)
            self._prepared[key] = (stubs, folder)
            self._users[folder] = self._users.get(folder, 0) + 1
        return folder

    def release(self, folder: Path) -> None:
        """A check on `folder` (from `prepare`) ended; an evicted directory goes with its
        last check."""
        with self._lock:
            left = self._users.get(folder, 1) - 1
            if left > 0:
                self._users[folder] = left
                return
            self._users.pop(folder, None)
            if folder not in self._evicted:
                return
            self._evicted.discard(folder)
        shutil.rmtree(folder, ignore_errors=True)

    def errors_of(self, call_id: str) -> list[TypeCheckError]:
        """The errors `run_check` found for the run `call_id`; [] when none, unchecked or
        not known (the latest `REMEMBERED_CHECKS` runs with errors are kept)."""
        return list(self._errors.get(call_id, ()))

    async def run_check(self, mode: TypeCheck, code: str, stubs: Sequence[ToolStub],
                        call_id: str) -> tuple[TypeCheckError, ...]:
        """What a run does with the check under `mode`: () for "off"; the errors for
        "warn" (remembered for `errors_of(call_id)` when there are any); under "enforce"
        errors are remembered and raised. A checker that cannot run (or a stubs directory
        that cannot be written) is logged (logger `codemode.typecheck`) and the program
        runs unchecked.

        Raises:
            TypeCheckFailed: `mode` is "enforce" and the check found errors.
        """
        if mode == "off":
            return ()
        try:
            errors = await self.check(code, stubs)
        except (TypeCheckUnavailable, OSError) as exc:     # OSError: the stubs' directory
            _log.warning("the program runs without a type check: %s", exc)
            return ()
        if not errors:
            return ()
        self._errors[call_id] = errors
        while len(self._errors) > REMEMBERED_CHECKS:
            self._errors.pop(next(iter(self._errors)))
        if mode == "enforce":
            raise TypeCheckFailed(f"code run failed (type-check): {summary(errors)}; the "
                                  "program did not run and no tool was called\n\n"
                                  + format_errors(code, errors), errors)
        return errors

    async def check(self, code: str, stubs: Sequence[ToolStub]) -> tuple[TypeCheckError, ...]:
        """The errors ty finds in `code` against `stubs`, in order of position; () when
        there are none, when the program does not parse (the sandbox reports that), and,
        without running ty, when it names no tool: no tool alias of `stubs` and none of the
        names that reach tools (`_REACHES_TOOLS`). The check exists to refuse a program
        before any tool runs; such a program runs no tool by name, so it has nothing to
        prevent, and what ty would report of it (a name not defined) the run reports too.

        Raises:
            TypeCheckUnavailable: ty is missing, failed, or took `CHECK_TIMEOUT_S`.
        """
        tree = _parsed(code)
        if tree is None:            # the sandbox reports the SyntaxError, as without a check
            return ()
        names = frozenset(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))
        aliases = frozenset(s.alias for s in stubs)
        if not names & (aliases | _REACHES_TOOLS):
            return ()               # it names no tool: nothing it does can be refused ahead
        # On the loop: only the named tools' stubs are written (a few KiB, well under a
        # millisecond), and a thread here would start the default executor's pool.
        folder = self.prepare(stubs, names)
        program = folder / f"program_{next(self._count)}.py"
        try:
            program.write_text(code, encoding="utf-8")
            report = await _run_ty(folder, program)
        finally:
            with contextlib.suppress(OSError):
                program.unlink()
            self.release(folder)
        return _errors(report, aliases, tree)


async def _run_ty(folder: Path, program: Path) -> bytes:
    """ty's gitlab report on `program`, with `folder`'s configuration and builtins."""
    argv = [_ty_binary(), "check", "--project", str(folder), "--output-format", "gitlab",
            "--no-progress", "--color", "never", str(program)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TY_")}
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=folder, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        raise TypeCheckUnavailable(f"the type checker could not start: {exc}") from None
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            out, err = await process.communicate()
    except BaseException:            # a timeout, or the run was cancelled: no ty left behind
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    if process.returncode not in (0, 1):
        raise TypeCheckUnavailable(f"the type checker failed (exit {process.returncode}): "
                                   f"{err.decode(errors='replace').strip()[:500]}")
    return out


def _surely_wrong(message: str, aliases: frozenset[str]) -> bool:
    """Whether a call ty finds wrong is wrong whatever the run: a call of a tool (or of
    `call_tool`, `search_tools`, `describe`), whose stub is exact, not of a library
    function (typeshed's overloads reject some correct calls, and a call passed to an
    asyncio entry point is a pending call, which it accepts); and not an argument ty only
    knows as a union (`seen[3]` of `[1.5, "a"]` is `float | str`; `d.get(k)` is
    `str | None`; the loop variable over `("c", "k")` is `Literal["c", "k"]`), which may
    well hold the right type when the program runs."""
    callee = _FUNCTION.search(message)
    if callee is None or callee["name"] not in aliases | _GIVEN:
        return False
    found = _FOUND.search(message)
    return found is None or not (" | " in found["type"]
                                 or _LITERALS.fullmatch(found["type"]) is not None)


_FUNCTION = re.compile(r"function `(?P<name>[^`]+)`")
_FOUND = re.compile(r"found `(?P<type>.*)`$")
_LITERALS = re.compile(r"Literal\[.+, .+\]")     # ty writes a union of literals as one
_GIVEN = frozenset({"call_tool", "search_tools", "describe", "read_output"})
# Names a program reaches tools through besides their aliases: the given functions and the
# `tools` namespace (`tools.get_weather(...)`).
_REACHES_TOOLS = _GIVEN | {"tools"}


class _FunctionBodies:
    """Where the program's function and lambda bodies are: a name they use that is not
    defined is an error only if they run (a global set later, or by other means, is
    fine), so only the module level's undefined names are reported."""

    def __init__(self, tree: ast.AST) -> None:
        self.spans: list[tuple[int, int, int, int]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = node.body[0]
                self.spans.append((first.lineno, 0, node.end_lineno or first.lineno,
                                   (node.end_col_offset or 0) + 1))
            elif isinstance(node, ast.Lambda):
                self.spans.append((node.body.lineno, node.body.col_offset + 1,
                                   node.body.end_lineno or node.body.lineno,
                                   (node.body.end_col_offset or 0) + 1))

    def holds(self, line: int, column: int) -> bool:
        """Whether (line, column), both from 1, is inside a body."""
        return any((line, column) >= (l0, c0) and (line, column) <= (l1, c1)
                   for l0, c0, l1, c1 in self.spans)


_RAISED_AS = {"unresolved-reference": frozenset({"NameError", "Exception", "BaseException"})}
_CALL_FAILURE = frozenset({"ToolArgumentError", "ToolCallError", "TypeError", "Exception",
                           "BaseException"})    # what a wrong call of a tool raises, and bases


class _Handled:
    """Where the program catches a failure itself: the body of each `try`, with the names
    its handlers catch (None: anything, for a bare `except` or one not named plainly). A
    reported error there would not fail the run, so it is not reported."""

    def __init__(self, tree: ast.AST) -> None:
        self.spans: list[tuple[int, int, int, int, frozenset[str] | None]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Try, ast.TryStar)) and node.handlers:
                names: set[str] | None = set()
                for handler in node.handlers:
                    caught = _names_of(handler.type)
                    names = None if names is None or caught is None else names | caught
                first, last = node.body[0], node.body[-1]
                self.spans.append((first.lineno, first.col_offset + 1,
                                   last.end_lineno or last.lineno,
                                   (last.end_col_offset or 0) + 1,
                                   None if names is None else frozenset(names)))

    def catches(self, line: int, column: int, rule: str) -> bool:
        """Whether a `rule` error at (line, column), both from 1, is caught by the program."""
        raised = _RAISED_AS.get(rule, _CALL_FAILURE)
        return any((line, column) >= (l0, c0) and (line, column) <= (l1, c1)
                   and (names is None or bool(names & raised))
                   for l0, c0, l1, c1, names in self.spans)


def _names_of(caught: ast.expr | None) -> set[str] | None:
    """The exception names an `except` clause names (`E`, `mod.E`, a tuple of them); None
    for a bare `except` or an expression that is not a plain name."""
    if isinstance(caught, ast.Tuple):
        names: set[str] = set()
        for element in caught.elts:
            one = _names_of(element)
            if one is None:
                return None
            names |= one
        return names
    if isinstance(caught, ast.Name):
        return {caught.id}
    if isinstance(caught, ast.Attribute):
        return {caught.attr}
    return None


_NAME_MAKERS = frozenset({"exec", "globals", "vars", "locals", "__builtins__", "__import__",
                          "setattr"})


def _defines_names_at_run_time(tree: ast.AST) -> bool:
    """Whether the program may define names ty cannot see (`exec` of a string, a write
    through `globals()`, a module's `__dict__`): then no undefined name is reported."""
    return any((isinstance(node, ast.Name) and node.id in _NAME_MAKERS)
               or (isinstance(node, ast.Attribute) and node.attr == "__dict__")
               for node in ast.walk(tree))


def _parsed(code: str) -> ast.Module | None:
    """`code` parsed by this Python (top-level `await` allowed), or None when it cannot:
    newer syntax, or not a program (the sandbox then says why)."""
    try:
        return ast.parse(code, "<program>")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _errors(report: bytes, aliases: frozenset[str],
            tree: ast.Module | None) -> tuple[TypeCheckError, ...]:
    """The reported errors of ty's `report`; `tree`: the program, for where its function
    bodies are (None: every stub was given, and no undefined name is reported)."""
    try:
        diagnostics = _DIAGNOSTICS.decode(report) if report.strip() else []
    except msgspec.DecodeError as exc:
        raise TypeCheckUnavailable(f"the type checker's report does not decode: {exc}") from None
    found: list[TypeCheckError] = []
    functions = None if tree is None else _FunctionBodies(tree)
    handled = None if tree is None else _Handled(tree)
    dynamic = tree is not None and _defines_names_at_run_time(tree)
    for d in diagnostics:
        message = d.description.removeprefix(f"{d.check_name}: ")
        if d.check_name == "invalid-syntax":
            if _TOP_LEVEL_ASYNC in message:
                continue
            return ()                       # the sandbox reports the SyntaxError
        if d.check_name not in REPORTED_RULES:
            continue
        begin, end = d.location.positions.begin, d.location.positions.end
        if handled is not None and handled.catches(begin.line, begin.column, d.check_name):
            continue
        if d.check_name == "unresolved-reference":
            if functions is None or dynamic or functions.holds(begin.line, begin.column):
                continue
        elif not _surely_wrong(message, aliases):
            continue
        found.append(TypeCheckError(line=begin.line, column=begin.column, end_line=end.line,
                                    end_column=end.column, rule=d.check_name, message=message))
    return tuple(sorted(found, key=lambda e: (e.line, e.column)))


MAX_SHOWN = 20
"""Errors shown in the text the model reads; the rest are counted."""


def format_errors(code: str, errors: Sequence[TypeCheckError]) -> str:
    """The errors as a `SyntaxError` traceback shows one, each in turn::

          File "<program>", line 3, column 13
            get_weather(42)
                        ^^
        TypeCheckError: Argument to function `get_weather` is incorrect: ... [invalid-argument-type]

    at most `MAX_SHOWN` of them, then how many more there are."""
    lines = code.splitlines()
    blocks = []
    for e in errors[:MAX_SHOWN]:
        block = [f'  File "{PROGRAM}", line {e.line}, column {e.column}']
        if 0 < e.line <= len(lines):
            text = lines[e.line - 1]
            stripped = text.lstrip()
            indent = len(text) - len(stripped)
            width = (e.end_column - e.column) if e.end_line == e.line else len(text) - e.column + 1
            block.append(f"    {stripped}")
            block.append("    " + " " * max(e.column - 1 - indent, 0) + "^" * max(width, 1))
        block.append(f"TypeCheckError: {e.message} [{e.rule}]")
        blocks.append("\n".join(block))
    if len(errors) > MAX_SHOWN:
        blocks.append(f"... and {len(errors) - MAX_SHOWN} more")
    return "\n".join(blocks)


def summary(errors: Sequence[TypeCheckError]) -> str:
    """"2 type errors (first: line 3, column 13: Argument to ...)"."""
    first = errors[0]
    count = f"{len(errors)} type error{'s' if len(errors) != 1 else ''}"
    return f"{count} ({PROGRAM}, line {first.line}, column {first.column}: {first.message})"



def warned(code: str, errors: Sequence[TypeCheckError]) -> str:
    """What "warn" adds to a run's text: the errors found before the run."""
    return f"The type check found {summary(errors)} before the run:\n" + \
        format_errors(code, errors)
