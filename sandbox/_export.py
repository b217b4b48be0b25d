"""The guest's `run(request: string) -> string` export, resolved once per component.

wasmtime-py's `Instance.get_func(store, "run")` looks the name up on every instance, and
`Func.__call__` reads the function's type back from the C API on every call (~40 us
together). The export's index belongs to the component and its type to the component's
world, so both are resolved once (`RunExport`) and each instance only fetches its
function by index; the call itself goes through wasmtime-py's own lowering and lifting
of the two strings (`convert_to_c`, `convert_from_c`) and `enter_wasm`, as
`Func.__call__` does, so traps surface as the same `WasmtimeError`s.
"""

from __future__ import annotations

from ctypes import byref, pointer
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime import component as wc
from wasmtime.component._enter import enter_wasm


class RunExport:
    """The `run` export of one component.

    Raises:
        RuntimeError: the component exports no `run`.
    """

    def __init__(self, component: wc.Component, name: str = "run") -> None:
        index = component.get_export_index(name)
        if index is None:
            raise RuntimeError(f"the guest component exports no `{name}`")
        self._index = index
        self._name = name
        self._types: tuple[Any, Any, Any] | None = None    # (FuncType kept alive, param, result)

    def func(self, instance: wc.Instance, store: wasmtime.Store) -> wc.Func:
        """The export's function in `instance`.

        Raises:
            RuntimeError: the instance has no such function (another component's).
        """
        func = instance.get_func(store, self._index)
        if func is None:
            raise RuntimeError(f"the guest instance has no `{self._name}` function")
        if self._types is None:
            fty = func.type(store)
            (_, param), = fty.params
            self._types = (fty, param, fty.result)
        return func

    def call(self, func: wc.Func, store: wasmtime.Store, text: str) -> str:
        """`run(text)` in the instance `func` belongs to.

        Raises:
            wasmtime.WasmtimeError: the instance trapped.
            TypeError: `text` is not a str.
        """
        assert self._types is not None, "call after func"
        _, param_ty, result_ty = self._types
        params = (ffi.wasmtime_component_val_t * 1)()
        param_ty.convert_to_c(store, text, pointer(params[0]))
        result = ffi.wasmtime_component_val_t()
        try:
            enter_wasm(lambda: ffi.wasmtime_component_func_call(
                byref(func._func), store._context(), params, 1, byref(result), 1))
        finally:
            ffi.wasmtime_component_val_delete(byref(params[0]))
        value: str = result_ty.convert_from_c(result)
        return value
