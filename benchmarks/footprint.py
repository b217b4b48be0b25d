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
  prepared, not yet run): PSS and private dirty growth per instance;
- the pages of one instance's linear memory the process holds as its own (written:
  copy-on-write copies of the snapshot's image, or new pages), counted exactly
  (`/proc/self/pagemap`, no other process or allocator in the figure): made and prepared
  by the pool, after a fresh run of the trivial program, and what that run adds after the
  pool's preparation (`written_pages`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import time
from collections.abc import Sequence
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
    _wait_for_quiet_pool(_wasm.POOL)
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


def _wait_for_quiet_pool(pool: Any, timeout_s: float = 10.0) -> None:
    """Until the pool's background (refilling after the last run) has stopped: its
    instances made meanwhile would count as the measured ones' growth."""
    deadline = time.monotonic() + timeout_s
    while pool._working and time.monotonic() < deadline:
        time.sleep(0.01)


def _mappings() -> list[tuple[int, int, str, str]]:
    """(start, end, permissions, path) of this process's mappings (`/proc/self/maps`)."""
    found = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            found.append((start, end, fields[1], fields[5] if len(fields) > 5 else ""))
    return found


def _own_pages(start: int, end: int) -> int:
    """Pages of [start, end) present and mapped by this process alone, not a file's
    (`/proc/self/pagemap` bits 63, 56 and 61): pages it wrote."""
    page = os.sysconf("SC_PAGE_SIZE")
    count = (end - start) // page
    fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    try:
        data = os.pread(fd, 8 * count, start // page * 8)
    finally:
        os.close(fd)
    return sum(1 for entry in struct.unpack(f"{count}Q", data)
               if entry >> 63 & 1 and entry >> 56 & 1 and not entry >> 61 & 1)


def written_pages(steps: Sequence[str]) -> int | None:
    """Pages of one new instance's linear memory this process holds as its own after
    `steps` ran in it, in order: each either `_pool.PREPARE` (the pool's preparation) or a
    run request's text (a program that calls no tool). Its memory is the snapshot's image,
    mapped copy-on-write from the compiled component's cache file, and the anonymous
    memory around it; a page counts once written. None when the image is not mapped from
    the file (the component was compiled in this process: measure in another) or the
    instance's memory cannot be told apart from another's. Linux only."""
    from codemode.sandbox import SandboxLimits, _component, _pool, _wasm

    limits = SandboxLimits()
    config = _component.EngineConfig(fuel=False, stack_bytes=limits.stack_bytes)
    runtime = _component._runtimes[config]
    made: list[Any] = []

    def make() -> int | None:
        before = {m[:2] for m in _mappings()}
        fresh = _pool._made(runtime, limits.memory_bytes)
        assert fresh is not None, "could not make an instance"
        made.append(fresh)
        after = _mappings()
        images = [i for i, m in enumerate(after) if m[2] == "rw-p"
                  and m[3].endswith(".cwasm") and m[:2] not in before]
        if len(images) != 1:
            return None
        for step in steps:
            if step == _pool.PREPARE:
                assert _pool._prepare(fresh), "could not prepare the instance"
            else:
                fresh.call(step)
        index = images[0]
        parts = [after[index]]
        for neighbour in (index - 1, index + 1):       # the memory before and past the image
            start, end, permissions, path = after[neighbour]
            if permissions == "rw-p" and not path and (end == parts[0][0] or
                                                       start == parts[0][1]):
                parts.append(after[neighbour])
        return sum(_own_pages(start, end) for start, end, _, _ in parts)

    try:
        return _wasm._on_runner_thread(make)
    finally:
        for fresh in made:
            fresh.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--instances", type=int, default=40)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--compare", nargs="*", default=[], type=Path)
    args = parser.parse_args()

    import wasmtime
    from wasmtime import component as wc

    from codemode.sandbox import RunRequest, SubCallReply, WasmSandbox, _cache, _component, _wasm

    WasmSandbox().run(RunRequest(code="0"), lambda b: SubCallReply())      # build, load
    config = _component.EngineConfig(fuel=False, stack_bytes=RunRequest(code="").limits.stack_bytes)
    runtime = _component._runtimes[config]
    current = next(_cache.cache_dir().glob(
        f"guest-{_cache.source_hash()}-*-{config.key()}.cwasm"))
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
    from codemode.sandbox import _pool, _wasm

    trivial = '{"code": "x = 1\\nx", "tools": [], "limits": {}}'
    size, _wasm.POOL.size = _wasm.POOL.size, 0     # no instance of the pool's made meanwhile
    try:
        prepared = written_pages([_pool.PREPARE])
        fresh_run = written_pages([trivial])
        both = written_pages([_pool.PREPARE, trivial])
    finally:
        _wasm.POOL.size = size
    if prepared is None or fresh_run is None or both is None:
        print("linear memory pages written: not measurable in this process (the component "
              "was compiled in it, not mapped from the cache: run again)")
    else:
        print(f"linear memory pages written per instance: made and prepared by the pool "
              f"{prepared}, a fresh run of x = 1 {fresh_run}, that run after the pool's "
              f"preparation {both - prepared} more")


if __name__ == "__main__":
    main()
