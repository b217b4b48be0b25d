"""Building, compiling and loading the guest component (docs/design.md §3).

The component is built from source with componentize-py (never shipped as a binary) the
first time it is needed on a machine, and compiled by wasmtime; both the `.wasm` and the
serialized compiled code are cached on disk. The compiled file's name holds the guest
source hash, the wasmtime version and the Engine configuration, since
`Component.deserialize` accepts only bytes from the same version and configuration. Within a
process, one Engine, Component and Linker exist per configuration.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec
import wasmtime
from wasmtime import component as wc

from . import _crossing, _lowering
from ._cache import (
    GUEST_DIR,
    WIT_DIR,
    _FileLock,
    _write_atomic,
    cache_dir,
    dist_version,
    older_components,
    source_hash,
)
from ._export import RunExport

WORLD = "guest"
ENTRY_MODULE = "guest_main"
HOST_INSTANCE = "codemode:sandbox/host@0.1.0"
# The async stack also holds the host functions' frames on top of the wasm stack.
ASYNC_STACK_HEADROOM_BYTES = 1 << 20


class SandboxUnavailable(RuntimeError):
    """The guest component could not be built, compiled or loaded."""


def _set_async_stack_size(config: wasmtime.Config, size_bytes: int) -> None:
    """`Config::async_stack_size`, which wasmtime-py does not wrap but its C library
    exports. The C API turns async support on, and wasmtime refuses a `max_wasm_stack`
    over the async stack size (2 MiB by default), so raising the wasm stack needs it."""
    from wasmtime import _ffi

    setter = _ffi.dll.wasmtime_config_async_stack_size_set
    setter.restype = None
    setter.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    setter(ctypes.cast(config.ptr(), ctypes.c_void_p), size_bytes)


# Structs, not dataclasses: a dataclass's generated methods are compiled at every import
# (~0.6 ms each here, on the path of a new process's first run); a Struct's are C.
class EngineConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The Engine settings compiled code depends on (part of the cache key)."""

    fuel: bool
    stack_bytes: int

    def key(self) -> str:
        return f"epoch-fuel{int(self.fuel)}-stack{self.stack_bytes}"

    def build(self) -> wasmtime.Engine:
        return wasmtime.Engine(self.wasmtime_config())

    def wasmtime_config(self) -> wasmtime.Config:
        """The Engine's settings. Everything else is wasmtime's default, on purpose: the
        on-demand instance allocator and the snapshot's memory mapped copy-on-write
        (`memory_init_cow`). Each fresh run then faults in the pages its guest runtime
        touches (~585 a run of `x = 1`), which costs less CPU than every alternative the
        C library offers: the pooling allocator keeping linear memory resident restores
        the whole kept range at every reset (16 MiB: ~220 faults for +0.6 ms a run; 32
        MiB: none for +3 ms), and without copy-on-write each instance copies the whole
        image. Resetting only the pages a run dirtied (`pagemap_scan`, eryx's choice)
        has no C setter; docs/benchmarks.md, "Page faults", has every option's figures
        (`python -m benchmarks.engines`)."""
        config = wasmtime.Config()
        config.epoch_interruption = True
        config.consume_fuel = self.fuel
        if self.stack_bytes > 2 * 1024 * 1024:
            _set_async_stack_size(config, self.stack_bytes + ASYNC_STACK_HEADROOM_BYTES)
        config.max_wasm_stack = self.stack_bytes
        return config


def _say(message: str) -> None:
    print(f"codemode: {message}", file=sys.stderr, flush=True)


def _componentize_command() -> list[str]:
    exe = Path(sys.executable).parent / "componentize-py"
    found = str(exe) if exe.exists() else shutil.which("componentize-py")
    if found is None:
        raise SandboxUnavailable(
            "componentize-py is not installed; install codemode with pip to get it")
    return [found]


def _tzdata_path(tmp: Path) -> list[str]:
    """`-p DIR` with a copy of the `tzdata` package (the IANA time zone database, pure
    data): the guest reads it into memory while its snapshot is taken. No arguments when
    `tzdata` is not installed (then `zoneinfo` knows no zones)."""
    spec = importlib.util.find_spec("tzdata")
    if spec is None or spec.origin is None:
        return []
    target = tmp / "tzdata-path"
    shutil.copytree(Path(spec.origin).parent, target / "tzdata",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return ["-p", str(target)]


def build_wasm(digest: str) -> Path:
    """The guest component for these sources: from the cache, or built now (15-40 s on two cores).

    Raises:
        SandboxUnavailable: componentize-py is missing or the build failed.
    """
    target = cache_dir() / f"guest-{digest}.wasm"
    if target.exists():
        return target
    # only to build: not on a new process's path to its first run
    import subprocess

    with _FileLock(cache_dir() / "build.lock"):
        if target.exists():           # another process built it while we waited
            return target
        _say("building the sandbox component from source (once per version of its sources, "
             "15-40 s on two cores)..." + older_components())
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "guest.wasm"
            command = [
                *_componentize_command(), "-q", "-d", str(WIT_DIR), "-w", WORLD, "componentize",
                ENTRY_MODULE, "-p", str(GUEST_DIR), *_tzdata_path(Path(tmp)), "-o", str(out)]
            env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  cwd=tmp, check=False)
            if done.returncode != 0 or not out.exists():
                raise SandboxUnavailable(
                    f"building the guest component failed (exit {done.returncode}):\n"
                    f"{done.stderr.strip() or done.stdout.strip()}")
            _write_atomic(target, out.read_bytes())
    return target


def load_component(engine: wasmtime.Engine, config: EngineConfig) -> wc.Component:
    """The compiled component for `engine`: deserialized from the cache, or compiled now.

    Raises:
        SandboxUnavailable: building or compiling failed, or the cache directory cannot be
            used (not a directory, not writable).
        OSError: another file could not be used (the build's temporary directory).
    """
    try:
        return _load_component(engine, config)
    except OSError as exc:
        if not isinstance(exc.filename, str) or not Path(exc.filename).is_relative_to(
                cache_dir()):
            raise                       # not the cache's: said as it is
        raise SandboxUnavailable(
            f"the component cache {cache_dir()} cannot be used ({exc}); point "
            "CODEMODE_CACHE_DIR at a writable directory") from exc


def _load_component(engine: wasmtime.Engine, config: EngineConfig) -> wc.Component:
    digest = source_hash()
    compiled = cache_dir() / (
        f"guest-{digest}-wasmtime{dist_version('wasmtime')}-{config.key()}.cwasm")
    if compiled.exists():
        try:
            return wc.Component.deserialize_file(engine, str(compiled))
        except wasmtime.WasmtimeError:
            compiled.unlink(missing_ok=True)      # stale or corrupt: compile again
    wasm = build_wasm(digest)
    with _FileLock(cache_dir() / "compile.lock"):
        if compiled.exists():
            return wc.Component.deserialize_file(engine, str(compiled))
        _say("compiling the sandbox component (once per version, wasmtime version and "
             "engine configuration)...")
        try:
            component = wc.Component.from_file(engine, str(wasm))
        except wasmtime.WasmtimeError as exc:
            raise SandboxUnavailable(f"compiling the guest component failed: {exc}") from exc
        _write_atomic(compiled, bytes(component.serialize()))
    # Loaded back from the file, as every later process loads it: its instances then map
    # their memory image from the file's pages (shared with other processes), not from an
    # image only this process holds.
    return wc.Component.deserialize_file(engine, str(compiled))


HostFunc = Callable[..., object]
Shadows = Mapping[str, Mapping[str, HostFunc]]
"""WASI interfaces to answer on the host instead of by wasmtime: the interface's name
without its version ("wasi:clocks/wall-clock") -> {function name: host function}, every
function of the interface."""


class Runtime(msgspec.Struct):
    """The per-process, per-configuration Engine, Component and Linkers.

    Attributes:
        linker: WASI as wasmtime implements it, plus the host interface; used by runs
            without a tape.
        recording_linker: the same with the clock and random interfaces answered by the
            host (`Shadows`); used by runs with a tape (`RunRequest.tape`). Built on first
            use (~2 ms), off the path of a process's first unrecorded run.
        run_export: the component's `run` export, resolved once.
        shadowed_calls: calls made to the shadowing host functions, all runs together
            (a count for tests and benchmarks; not exact under concurrent runs).
    """

    config: EngineConfig
    engine: wasmtime.Engine
    component: wc.Component
    linker: wc.Linker
    run_export: RunExport
    host_funcs: tuple[HostFunc, HostFunc, Shadows]     # dispatch, sleep, shadows
    shadowed_calls: int = 0
    _recording: wc.Linker | None = None
    _recording_lock: threading.Lock = msgspec.field(default_factory=threading.Lock)

    @property
    def recording_linker(self) -> wc.Linker:
        with self._recording_lock:
            if self._recording is None:
                dispatch, sleep, shadows = self.host_funcs
                self._recording = _linker(self.engine, self.component, dispatch, sleep,
                                          shadows, self._count)
                _lowering.install()   # the recording linker returns random bytes as list<u8>
            return self._recording

    def _count(self) -> None:
        self.shadowed_calls += 1


_runtimes: dict[EngineConfig, Runtime] = {}
_runtimes_lock = threading.Lock()


def _versioned(component: wc.Component, engine: wasmtime.Engine, interface: str) -> str | None:
    """`interface` with the version the component imports it at
    ("wasi:clocks/wall-clock@0.2.9"), or None when it does not import it."""
    for name in component.type.imports(engine):
        if name.split("@", 1)[0] == interface:
            return name
    return None


def _linker(engine: wasmtime.Engine, component: wc.Component, dispatch: HostFunc,
            sleep: HostFunc, shadows: Shadows, count: Callable[[], None] | None) -> wc.Linker:
    linker = wc.Linker(engine)
    if shadows:
        linker.allow_shadowing = True
    linker.add_wasip2()
    with linker.root() as root:
        with root.add_instance(HOST_INSTANCE) as host:
            _crossing.add_string_func(host, "dispatch", dispatch)   # one-step glue
            host.add_func("sleep", sleep)
        for interface, funcs in shadows.items():
            name = _versioned(component, engine, interface)
            if name is None:
                continue
            with root.add_instance(name) as instance:
                for func_name, func in funcs.items():
                    instance.add_func(func_name, _counted(func, count))
    return linker


def _counted(func: HostFunc, count: Callable[[], None] | None) -> HostFunc:
    if count is None:
        return func

    def counted(*args: object) -> object:
        count()
        return func(*args)
    return counted


def runtime_for(config: EngineConfig, dispatch: HostFunc, sleep: HostFunc,
                shadows: Shadows) -> Runtime:
    """The shared Runtime for `config`, created on first use; `dispatch` and `sleep` are
    the host functions linked into every instance, `shadows` the WASI functions of the
    recording linker (they all find their run themselves)."""
    with _runtimes_lock:
        runtime = _runtimes.get(config)
        if runtime is None:
            engine = config.build()
            component = load_component(engine, config)
            linker = _linker(engine, component, dispatch, sleep, {}, None)
            runtime = Runtime(config, engine, component, linker, RunExport(component),
                              (dispatch, sleep, shadows))
            _runtimes[config] = runtime
        return runtime


def engines() -> list[wasmtime.Engine]:
    """Every Engine made so far. Lock-free on purpose: the ticker must not wait while
    another configuration's component compiles under `_runtimes_lock`."""
    return [r.engine for r in list(_runtimes.values())]
