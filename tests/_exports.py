"""The public API of a module is exactly its `__all__`, kept sorted, as httpx's
tests/test_exported_members.py pins its own: a new public name must be listed, and a listed
name must exist.

"Public" means every name a reader finds on the module without a leading underscore, except
submodules (listed ones are checked to exist) and names the module imports from outside
codemode, such as `typing.Any` or `from __future__ import annotations`. `strict=True`
excepts only the module's own submodules: whatever else a reader finds on it, in `dir()`
or as an attribute (`typing.Any`, `importlib`, `annotations`), must be in `__all__`.
"""

import ast
import inspect
import types


def export_order(name: str) -> tuple[bool, bool, str]:
    """The order ruff's RUF022 sorts `__all__` in: CONSTANTS, then Classes, then the rest."""
    return (not (len(name) > 1 and name.isupper()), not name[:1].isupper(), name)


def _imported_from_outside(module: types.ModuleType) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(inspect.getsource(module)).body:  # run-time imports: top level only
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if (node.module or "").split(".")[0] != "codemode":
                names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "codemode":
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def public_names(module: types.ModuleType) -> set[str]:
    outside = _imported_from_outside(module)
    return {name for name in dir(module)
            if not name.startswith("_") and name not in outside
            and not isinstance(getattr(module, name), types.ModuleType)}


def _strict_public_names(module: types.ModuleType) -> set[str]:
    """Every name without a leading underscore that `dir()` lists or the module holds, but
    its own submodules (`codemode.pipeline`, not `importlib`)."""
    found = {name for name in {*dir(module), *vars(module)} if not name.startswith("_")}
    return {name for name in found
            if getattr(getattr(module, name), "__name__", None) != f"{module.__name__}.{name}"}


def check_exports(module: types.ModuleType, *, strict: bool = False) -> None:
    listed = list(module.__all__)
    assert listed == sorted(set(listed), key=export_order), "__all__ is not sorted (or repeats)"
    submodules = {n for n in listed if isinstance(getattr(module, n), types.ModuleType)}
    found = _strict_public_names(module) if strict else public_names(module)
    assert found - submodules == set(listed) - submodules
