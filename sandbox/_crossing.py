"""The host side of a `func(string) -> string` import (the WIT world's `host.dispatch`) in
one step.

wasmtime-py's `LinkerInstance.add_func` defines every host function through one generic
callback, which reads the function's type back from the C API at every call (a `FuncType`,
its parameter list with each name and type, its result) before it converts the values:
about 20 us of a sub-call's ~30 us crossing. `add_string_func` defines the function through
a callback that knows the shape, one string in and one out, and converts just those two,
as wasmtime-py's own `String.convert_from_c` and `convert_to_c` do (UTF-8 both ways); a
call of any other shape (a component whose world differs) goes to wasmtime-py's generic
callback. Exceptions travel as wasmtime-py's do (`catch_exceptions`): a host function
that raises traps the instance, and the call that entered wasm raises the exception.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from wasmtime import WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime import component as wc
from wasmtime.component import _linker
from wasmtime.component._enter import catch_exceptions

StringFunc = Callable[..., object]
"""`func(store, text) -> text`, as `LinkerInstance.add_func` calls a host function."""

_STRING = ffi.WASMTIME_COMPONENT_STRING
_string_at = ctypes.string_at
_memmove = ctypes.memmove
_byref = ctypes.byref
_new_uninitialized = ffi.wasm_byte_vec_new_uninitialized
_delete = ffi.wasm_byte_vec_delete
_generic = _linker.func_impl


def _string_call_impl(idx: Any, context: Any, ty_raw: Any, args: Any, nargs: int, results: Any,
                 nresults: int) -> Any:
    if nargs != 1 or nresults != 1 or args[0].kind != _STRING.value:
        return _generic(idx, context, ty_raw, args, nargs, results, nresults)
    func = _linker.FUNCTIONS.get(idx or 0)

    def run(store: Any) -> None:
        arg = args[0].of.string
        text = _string_at(arg.data, arg.size).decode("utf-8")
        _delete(_byref(arg))
        out = func(store, text)
        if not isinstance(out, str):
            raise TypeError("expected string type")
        data = out.encode("utf-8")
        result = results[0]
        result.kind = _STRING
        vec = result.of.string
        _new_uninitialized(_byref(vec), len(data))
        _memmove(vec.data, data, len(data))
    return catch_exceptions(context, run)


_string_call = ffi.wasmtime_component_func_callback_t(_string_call_impl)


def add_string_func(instance: wc.LinkerInstance, name: str, func: StringFunc) -> None:
    """Define `name` in `instance` as a host function of one string to one string
    (`instance.add_func(name, func)`, with the one-step callback above).

    Raises:
        WasmtimeError: the linker refused the definition (e.g. the name is taken).
    """
    instance._assert_not_locked()
    name_bytes = name.encode("utf-8")
    idx = _linker.FUNCTIONS.allocate(func)
    err = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(name_bytes), len(name_bytes),
        _string_call, idx, _linker.func_finalize)
    if err:
        raise WasmtimeError._from_ptr(err)
