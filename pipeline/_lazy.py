"""A package's exports loaded on first use (PEP 562), for its `__init__`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], lazy: Mapping[str, str],
                 exported: list[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of the package `package` (its
    `__name__`), whose `namespace` (its `globals()`) holds the names of `lazy` ({name: the
    module that defines it, relative to `package`}) only once they are used; `exported` is
    its `__all__`.

    `__getattr__(name)` imports that module, keeps the value in `namespace` (later lookups
    do not reach `__getattr__`) and returns it; any other name raises AttributeError, as a
    module's missing attribute does. `__dir__()` lists the loaded names and `exported`.
    """
    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exported})

    return __getattr__, __dir__
