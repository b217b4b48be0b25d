"""Lowering `bytes` into a component `list<u8>` in one copy (docs/sandbox.md, "Pausing and
replaying").

wasmtime-py lowers a `list<u8>` that a host function returns element by element (a ctypes
write per byte, about 1 us each). A recorded run answers the guest's random reads through
host functions (`wasi:random/random.get-random-bytes`), and componentize-py reseeds
`random` with 2,496 such bytes at the start of every run, so that path cost ~2.4 ms per
run. `install()` gives `ListType.convert_to_c` a fast path for exactly that case, `bytes`
for a `list<u8>`: the element array is built in one `bytearray` (a template element per
byte, the byte values written with one strided slice assignment) and copied with one
`memmove`. Anything else goes to wasmtime-py's own code. The fast path is installed only
after it produced the same elements as wasmtime-py's own on a sample, so a wasmtime-py whose
value layout differs keeps its own lowering.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from wasmtime import _ffi as ffi
from wasmtime.component import _types

_installed = False
_lock = threading.Lock()


def _elements(raw: Any, count: int) -> list[tuple[int, int]]:
    """(kind, u8) of the first `count` elements of a lowered list."""
    return [(int(raw.data[i].kind), int(raw.data[i].of.u8)) for i in range(count)]


def install() -> bool:
    """Install the fast path (idempotent). Returns whether it is installed: False when
    wasmtime-py's own lowering of a sample disagrees with it."""
    global _installed
    with _lock:
        if _installed:
            return True
        list_type: Any = _types.ListType
        original = list_type.convert_to_c
        element_size = ctypes.sizeof(ffi.wasmtime_component_val_t)
        template = ffi.wasmtime_component_val_t()
        _types.U8().convert_to_c(None, 0, ctypes.pointer(template))   # type: ignore[arg-type]
        u8_offset = ffi.wasmtime_component_val_t.of.offset
        template_bytes = ctypes.string_at(ctypes.addressof(template), element_size)

        def lower(self: Any, store: Any, val: Any, ptr: Any) -> None:
            if not (type(val) is bytes and self._is_bytes()):
                original(self, store, val, ptr)
                return
            raw = ffi.wasmtime_component_vallist_t()
            ffi.wasmtime_component_vallist_new_uninit(raw, len(val))
            if val:
                elements = bytearray(template_bytes * len(val))
                elements[u8_offset::element_size] = val
                ctypes.memmove(raw.data, bytes(elements), len(elements))
            ptr.contents.kind = ffi.WASMTIME_COMPONENT_LIST
            ptr.contents.of.list = raw

        sample = bytes(range(256))
        theirs, ours = ffi.wasmtime_component_val_t(), ffi.wasmtime_component_val_t()
        list_of_u8: Any = _Sample()
        original(list_of_u8, None, sample, ctypes.pointer(theirs))
        lower(list_of_u8, None, sample, ctypes.pointer(ours))
        same = (int(theirs.kind) == int(ours.kind)
                and _elements(theirs.of.list, 256) == _elements(ours.of.list, 256))
        ffi.wasmtime_component_vallist_delete(ctypes.byref(theirs.of.list))
        ffi.wasmtime_component_vallist_delete(ctypes.byref(ours.of.list))
        if same:
            list_type.convert_to_c = lower
            _installed = True
        return _installed


class _Sample:
    """Stands in for a `ListType` of `u8` in the self-check (the real ones come from a
    component's types)."""

    element = _types.U8()

    def _is_bytes(self) -> bool:
        return True
