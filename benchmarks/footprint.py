"""What the guest component costs: its size on disk, instantiation time, memory per instance.

    python -m benchmarks.footprint [--instances 40] [--runs 60] [--compare OTHER.cwasm ...]

For the component the current guest sources build (built first if needed), and for each
`--compare` file (a compiled component from the cache, `~/.cache/codemode/guest-*.cwasm`,
for the same wasmtime and Engine settings), measured in the same process, interleaved:
- the `.wasm` and the compiled `.cwasm` file sizes in bytes;
- instantiation alone (a fresh Store and `linker.instantiate`) p50;
- the first call of the guest's `run` in a fresh instance (a trivial program) p50: the
  part of a run's latency that grows with the snapshot;
- memory per live instance: `--instances` instances each run the trivial program and are
  kept alive; the growth of the process's resident set size (Linux `/proc/self/statm`)
  and of its private dirty pages (`/proc/self/smaps_rollup`: pages this process wrote,
  what an instance really costs) divided by their number;
- memory per ready instance of the sandbox's pool (`sandbox._pool`: instantiated and
  prepared, not yet run): PSS and private dirty growth per instance.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

TRIVIAL = '{"code": "x = sum(range(10))\\nx", "tools": [], "limits": {}}'


def _rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _private_dirty_bytes() -> int:
    """Pages written by this process alone (Linux `/proc/self/smaps_rollup`): what each
    instance really adds, unlike RSS, which counts the shared snapshot image once per
    mapping."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) * 1024
    return 0


def _pss_bytes() -> int:
    """This process's proportional set size (Linux `/proc/self/smaps_rollup`), in bytes."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def pooled_instance_bytes(count: int = 10) -> tuple[float, float]:
    """(PSS, private dirty) bytes one ready instance of the sandbox's pool adds, each the
    growth over `count` instances made and prepared as the pool does (`sandbox._pool`),
    held alive at once, divided by `count`. Linux only (`/proc/self/smaps_rollup`)."""
    from codemode.sandbox import (
        RunRequest,
        SandboxLimits,
        SubCallReply,
        WasmSandbox,
        _component,
        _pool,
        _wasm,
    )

    WasmSandbox().run(RunRequest(code="0"), lambda b: SubCallReply())      # build, load
    limits = SandboxLimits()
    config = _component.EngineConfig(fuel=False, stack_bytes=limits.stack_bytes)
    runtime = _component._runtimes[config]
    kept: list[Any] = []

    def hold() -> None:
        for _ in range(count):
            fresh = _pool._made(runtime, limits.memory_bytes)
            assert fresh is not None and _pool._prepare(fresh), "could not make an instance"
            kept.append(fresh)

    before, dirty_before = _pss_bytes(), _private_dirty_bytes()
    _wasm._on_runner_thread(hold)
    pss, dirty = (_pss_bytes() - before) / count, (_private_dirty_bytes() - dirty_before) / count
    for fresh in kept:
        fresh.close()
    return pss, dirty


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--compare", nargs="*", default=[], type=Path)
    args = parser.parse_args()

    import wasmtime
    from wasmtime import component as wc

    from codemode.sandbox import RunRequest, SubCallReply, WasmSandbox, _component, _wasm

    WasmSandbox().run(RunRequest(code="0"), lambda b: SubCallReply())      # build, load
    config = _component.EngineConfig(fuel=False, stack_bytes=RunRequest(code="").limits.stack_bytes)
    runtime = _component._runtimes[config]
    current = next(_component.cache_dir().glob(
        f"guest-{_component.source_hash()}-*-{config.key()}.cwasm"))
    components: dict[Path, Any] = {current: runtime.component}
    for path in args.compare:
        components[path] = wc.Component.deserialize_file(runtime.engine, str(path))

    def instantiate(component: Any) -> tuple[wasmtime.Store, Any]:
        store = wasmtime.Store(runtime.engine)
        store.set_wasi(wasmtime.WasiConfig())
        store.set_epoch_deadline(1 << 40)
        return store, runtime.linker.instantiate(store, component)

    def first_call(store: wasmtime.Store, instance: Any) -> None:
        _wasm._local.run = _wasm._Run(RunRequest(code="0").limits,
                                      lambda b: SubCallReply(), None)
        instance.get_func(store, "run")(store, TRIVIAL)

    samples: dict[Path, tuple[list[float], list[float]]] = {p: ([], []) for p in components}

    def timings() -> None:
        for _ in range(args.runs):
            for path, component in components.items():
                started = time.perf_counter()
                store, instance = instantiate(component)
                instantiated = time.perf_counter()
                first_call(store, instance)
                samples[path][0].append(instantiated - started)
                samples[path][1].append(time.perf_counter() - instantiated)
                store.close()

    _wasm._on_runner_thread(timings)
    for path, component in components.items():
        kept: list[Any] = []

        def hold(component: Any = component, kept: list[Any] = kept) -> None:
            # wasm runs on a thread with the large native stack
            for _ in range(args.instances):
                store, instance = instantiate(component)
                first_call(store, instance)
                kept.append((store, instance))

        before, dirty_before = _rss_bytes(), _private_dirty_bytes()
        _wasm._on_runner_thread(hold)
        per_instance = (_rss_bytes() - before) / args.instances
        dirty = (_private_dirty_bytes() - dirty_before) / args.instances
        for store, _instance in kept:
            store.close()
        wasm = path.parent / (path.name.split("-wasmtime")[0] + ".wasm")
        size = f"{wasm.stat().st_size} bytes" if wasm.exists() else "(not in the cache)"
        label = "current" if path == current else "compared"
        print(f"{label}: {path.name}")
        print(f"  .wasm {size}, .cwasm {path.stat().st_size} bytes")
        print(f"  instantiation p50 {statistics.median(samples[path][0]) * 1e3:.2f} ms, "
              f"first run p50 {statistics.median(samples[path][1]) * 1e3:.2f} ms")
        print(f"  per live instance: resident {per_instance / 2**20:.2f} MiB, private dirty "
              f"{dirty / 2**20:.2f} MiB ({args.instances} instances)")
    pss, dirty = pooled_instance_bytes(args.instances)
    print(f"per ready instance of the pool (made and prepared ahead): PSS {pss / 2**20:.2f} "
          f"MiB, private dirty {dirty / 2**20:.2f} MiB ({args.instances} instances)")


if __name__ == "__main__":
    main()
