"""The host side of a `func(string) -> string` import (the WIT world's `host.dispatch`) in
one step.

wasmtime-py's `LinkerInstance.add_func` defines every host function through one generic
callback, which reads the function's type back from the C API at every call (a `FuncType`,
its parameter list with each name and type, its result) and then converts each value
through ctypes views: about 20 us of a sub-call's ~30 us crossing. `add_string_func`
defines the function through a callback that knows the shape, one string in and one out:
its arguments arrive as plain addresses, the string is read with one copy and the answer
written with one (UTF-8 both ways, as wasmtime-py's `String.convert_from_c` and
`convert_to_c` do). A call of any other shape (a component whose world differs) goes to
wasmtime-py's generic callback. Exceptions travel as wasmtime-py's do
(`catch_exceptions`): a host function that raises traps the instance, and the call that
entered wasm raises the exception.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

from wasmtime import WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime import component as wc
from wasmtime.component import _linker
from wasmtime.component._enter import catch_exceptions

StringFunc = Callable[..., object]
"""`func(store, text) -> text`, as `LinkerInstance.add_func` calls a host function; here
`store` is None (no caller reads it)."""

# A `wasmtime_component_val_t`: its kind (one byte) at 0, its payload (for a string, a
# `wasm_byte_vec_t`: size_t size, then the data pointer) at `_PAYLOAD`.
_VAL = ffi.wasmtime_component_val_t
_PAYLOAD = _VAL.of.offset
_STRING = ffi.WASMTIME_COMPONENT_STRING.value


class _StringVal(ctypes.Structure):
    """A `wasmtime_component_val_t` holding a string, flat: its kind, then its payload's
    size and data address. Read through `from_address`, three fields cost ~0.35 us, a
    `string_at` copy and an unpack ~1.3 us."""

    _fields_ = [("kind", ctypes.c_uint8), ("size", ctypes.c_size_t), ("data", ctypes.c_size_t)]


# The guest's string, as a view sliced into bytes (~0.6 us; `string_at`, a libffi call,
# ~1 us). A wasm32 memory, and so any string in it, is at most 4 GiB.
_MEMORY = ctypes.c_char * min(1 << 32, sys.maxsize)
# Where wasmtime's layout is not that one, `add_string_func` is plain `add_func`.
SUPPORTED = (_VAL.kind.offset == 0 and ctypes.sizeof(ffi.wasmtime_component_valkind_t) == 1
             and _StringVal.size.offset == _PAYLOAD
             and _StringVal.data.offset == _PAYLOAD + ctypes.sizeof(ctypes.c_size_t)
             and ctypes.sizeof(ffi.wasm_byte_vec_t) == 2 * ctypes.sizeof(ctypes.c_size_t)
             and getattr(ffi.wasm_byte_vec_t, "data").offset  # noqa: B009  (mypy: a field)
             == ctypes.sizeof(ctypes.c_size_t)
             and ctypes.sizeof(_StringVal) <= ctypes.sizeof(_VAL))


def _c_function(name: str, restype: Any, *argtypes: Any) -> Any:
    """A C function of wasmtime's library with address arguments (its own handle: the
    library's shared one keeps wasmtime-py's argument types)."""
    function = ffi.dll._FuncPtr((name, ffi.dll))
    function.argtypes, function.restype = argtypes, restype
    return function


_vec_new = _c_function("wasm_byte_vec_new", None, ctypes.c_void_p, ctypes.c_size_t,
                       ctypes.c_char_p)
_vec_delete = _c_function("wasm_byte_vec_delete", None, ctypes.c_void_p)
_string_val_at = _StringVal.from_address
_memory_at = _MEMORY.from_address
_generic = _linker.func_impl
_functions = _linker.FUNCTIONS
_handles = _functions.handles          # `_functions.get` without its Python frame


def _string_call_impl(idx: int | None, context: int, ty_raw: int, args: int, nargs: int,
                      results: int, nresults: int) -> int:
    # Each ctypes foreign call costs ~0.7 us: the argument is read and the result's kind
    # written through ctypes views instead.
    arg = _string_val_at(args) if nargs == 1 and nresults == 1 else None
    if arg is None or arg.kind != _STRING:
        return int(_generic(idx, ctypes.cast(context, ctypes.POINTER(ffi.wasmtime_context_t)),
                        ctypes.cast(ty_raw, ctypes.POINTER(ffi.wasmtime_component_func_type_t)),
                        ctypes.cast(args, ctypes.POINTER(_VAL)), nargs,
                        ctypes.cast(results, ctypes.POINTER(_VAL)), nresults) or 0)
    try:
        text = _memory_at(arg.data)[:arg.size].decode("utf-8")  # type: ignore[attr-defined]
        _vec_delete(args + _PAYLOAD)
        out = _handles[idx or 0](None, text)
        if not isinstance(out, str):
            raise TypeError("expected string type")
        encoded = out.encode("utf-8")
        _string_val_at(results).kind = _STRING
        _vec_new(results + _PAYLOAD, len(encoded), encoded)
        return 0
    except Exception as exc:
        return _trap(context, exc)


def _trap(context: int, exc: Exception) -> int:
    """Hand `exc` to wasmtime-py's own path: it traps the instance, and `enter_wasm`
    raises `exc` from the call that entered wasm."""
    def reraise(_store: Any) -> None:
        raise exc
    return int(catch_exceptions(context, reraise) or 0)  # type: ignore[arg-type]


# Every pointer as a plain address (ctypes makes no pointer objects per call); the C API's
# callback type, to pass it where wasmtime-py's argument types expect that type.
_string_call_type = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_void_p, ctypes.c_size_t)
_string_call_c = _string_call_type(_string_call_impl)
_string_call = ctypes.cast(_string_call_c, ffi.wasmtime_component_func_callback_t)


def add_string_func(instance: wc.LinkerInstance, name: str, func: StringFunc) -> None:
    """Define `name` in `instance` as a host function of one string to one string, called
    as `func(None, text)` (`instance.add_func(name, func)`, with the one-step callback
    above).

    Raises:
        WasmtimeError: the linker refused the definition (e.g. the name is taken).
    """
    if not SUPPORTED:
        instance.add_func(name, lambda _store, text: func(None, text))
        return
    instance._assert_not_locked()
    name_bytes = name.encode("utf-8")
    idx = _functions.allocate(func)
    err = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(name_bytes), len(name_bytes),
        _string_call, idx, _linker.func_finalize)
    if err:
        raise WasmtimeError._from_ptr(err)
