"""The one-copy lowering of `bytes` into a `list<u8>` (`sandbox/_lowering.py`)."""

import ctypes

from wasmtime import _ffi as ffi

from codemode.sandbox import RunRequest, Tape, WasmSandbox, _lowering
from codemode.sandbox._lowering import _elements, _Sample

from .conftest import noop


def test_it_installs_and_lowers_every_byte_value_as_wasmtime_py_would() -> None:
    assert _lowering.install()
    data = bytes(range(256)) * 3 + b"\x00"
    val = ffi.wasmtime_component_val_t()
    from wasmtime.component import _types
    _types.ListType.convert_to_c(_Sample(), None, data, ctypes.pointer(val))  # type: ignore[arg-type]
    try:
        assert int(val.kind) == int(ffi.WASMTIME_COMPONENT_LIST.value)
        assert int(val.of.list.size) == len(data)
        kinds_and_values = _elements(val.of.list, len(data))
        assert {k for k, _ in kinds_and_values} == {int(ffi.WASMTIME_COMPONENT_U8.value)}
        assert bytes(v for _, v in kinds_and_values) == data
    finally:
        ffi.wasmtime_component_vallist_delete(ctypes.byref(val.of.list))


def test_a_recorded_run_gets_the_random_bytes_it_recorded() -> None:
    program = "import os\nprint(os.urandom(300).hex())"
    first = WasmSandbox().run(RunRequest(code=program, tape=Tape()), noop)
    assert first.tape is not None
    again = WasmSandbox().run(RunRequest(code=program, tape=first.tape),
                              noop)
    assert first.stdout == again.stdout and len(first.stdout.strip()) == 600
    recorded = b"".join(e.data for e in first.tape.entries[-2:])    # libc reads 256 + 44
    assert first.stdout.strip() == recorded.hex()
