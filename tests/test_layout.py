"""The layout docs/architecture.md draws ("Where each concern lives") is the layout of the code:
the layers import one way, no module imports itself back through others, `codemode/` keeps
a short top level, and every module is short enough to hold one concept."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"pipeline": ROOT / "pipeline", "sandbox": ROOT / "sandbox"}

# codemode's own packages, lowest first: a module imports only from its own package, the
# layers (pipeline, sandbox, fixtures) and the packages listed before its own.
CODEMODE_ORDER = ["_version", "_run", "_policy", "_mcp", "telemetry", "ray", "adapters",
                  "_eval", "cli", "__main__", "__init__"]

MAX_LINES = 600
# Longer modules, each with the reason docs/architecture.md gives for it.
LONGER: dict[str, str] = {}

MAX_TOP_LEVEL = 12
# The layers' folders, linked into codemode/ so that the wheel has one top-level name.
LINKS = {"pipeline", "sandbox", "fixtures"}


def module_name(path: Path) -> str:
    """`codemode.x.y` of a file of the repository (the layers under `codemode.`)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts if parts[0] == "codemode" else ["codemode", *parts])


def sources() -> Iterator[Path]:
    """Every module of the three packages, the guest runtime included, each once."""
    for top in (ROOT / "codemode", *LAYERS.values()):
        for path in sorted(top.rglob("*.py")):
            rel = path.relative_to(ROOT).parts
            if "__pycache__" in rel or (rel[0] == "codemode" and rel[1] in LINKS):
                continue
            yield path


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, *, typing_only: bool) -> set[str]:
    """The `codemode.*` modules `path` imports (at any depth: lazy imports count), each
    resolved to a module of the repository; `typing_only` keeps those under
    `if TYPE_CHECKING:` too."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test) and not typing_only:
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = [f"{base}.{alias.name}" for alias in child.names]
                found.update(_existing(name) or _existing(base) or "" for name in names)
            elif isinstance(child, ast.Import):
                found.update(_existing(alias.name) or "" for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {name for name in found if name.startswith("codemode") and name != me}


_MODULES = {module_name(path): path for path in sources()}


def _existing(name: str) -> str | None:
    """`name` when it is a module of the repository (the sandbox's guest aside)."""
    return name if name in _MODULES else None


def _layer(name: str) -> str:
    """`pipeline`, `sandbox`, `fixtures` or the codemode package `name` belongs to."""
    parts = name.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def test_the_layers_import_one_way() -> None:
    wrong = []
    for name, path in _MODULES.items():
        mine = _layer(name)
        for target in imports(path, typing_only=True):
            theirs = _layer(target)
            if theirs == mine or (theirs == "fixtures" and mine not in LAYERS):
                continue
            if mine in LAYERS:
                wrong.append(f"{name} -> {target}")    # the layers import no one
            elif theirs in LAYERS:
                continue                                 # codemode joins the layers
            elif CODEMODE_ORDER.index(theirs) > CODEMODE_ORDER.index(mine):
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_no_module_imports_itself_back() -> None:
    graph = {name: imports(path, typing_only=False) for name, path in _MODULES.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}                  # 1: on the current path, 2: done

    def walk(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph.get(name, ())):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target):], target])
            elif target not in state:
                walk(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert cycles == []


@pytest.mark.parametrize("path", list(sources()), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_module_is_short_enough_to_hold_one_concept(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES or rel in LONGER, f"{rel}: {lines} lines"


def test_each_longer_module_is_explained_in_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for rel in LONGER:
        assert f"`{rel}`" in page, rel
        assert len((ROOT / rel).read_text(encoding="utf-8").splitlines()) > MAX_LINES, rel


def test_codemode_keeps_a_short_top_level_that_the_architecture_page_lists() -> None:
    entries = sorted(p.name for p in (ROOT / "codemode").iterdir()
                     if p.name not in LINKS | {"__pycache__", "py.typed"})
    assert len(entries) <= MAX_TOP_LEVEL, entries
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for entry in entries:
        shown = entry + ("/" if (ROOT / "codemode" / entry).is_dir() else "")
        assert shown in page, shown
    assert {name.split(".")[1] for name in _MODULES if name.count(".") >= 1
            and _layer(name) not in LAYERS} <= {*CODEMODE_ORDER, *LINKS}
