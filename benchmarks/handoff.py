"""The floors under one sub-call's trip to the event loop: the primitives alone.

    python -m benchmarks.handoff [--cycles 20000]

A sub-call batch leaves the sandbox's thread (a runner thread, blocked in wasm's host
call) for the session's event loop, which owns the pipeline's state, and comes back. What
that costs at the least, on this machine, now, each the median of `--cycles` cycles, in
microseconds (and the CPU both threads spent per cycle):

- thread -> loop -> thread: the thread calls `loop.call_soon_threadsafe(cb)` and waits on
  a `threading.Lock` that `cb` releases (what `SubCallDispatcher.dispatch` does);
- the same with `asyncio.run_coroutine_threadsafe` and `Future.result()` (the library's
  ready-made way: a task, its first turn, a Condition-based future);
- one loop turn: a callback that schedules the next with `call_soon` (`asyncio.sleep(0)`
  costs one such turn plus the task's step);
- a task's round trip: `loop.create_task(coro)` awaited from another task, the coroutine
  returning at once;
- a future created, resolved and awaited.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Callable


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def cross_thread(cycles: int, *, coroutine: bool) -> tuple[float, float]:
    """Median wall (us) of one round trip thread -> loop -> thread, and CPU per cycle
    (us, the whole process) over all cycles."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    loop_thread = threading.Thread(target=lambda: (ready.set(), loop.run_forever()),
                                   daemon=True)
    loop_thread.start()
    ready.wait()
    samples: list[float] = []

    async def nothing() -> None:
        return None

    def trip() -> None:
        if coroutine:
            asyncio.run_coroutine_threadsafe(nothing(), loop).result()
            return
        done = threading.Lock()
        done.acquire()
        loop.call_soon_threadsafe(done.release)
        done.acquire()

    for _ in range(min(cycles // 10, 1000)):      # warm both threads up
        trip()
    cpu = time.process_time()
    for _ in range(cycles):
        started = time.perf_counter()
        trip()
        samples.append(time.perf_counter() - started)
    cpu = time.process_time() - cpu
    loop.call_soon_threadsafe(loop.stop)
    loop_thread.join()
    loop.close()
    return _median_us(samples), cpu / cycles * 1e6


def in_loop(cycles: int, step: Callable[[asyncio.AbstractEventLoop], asyncio.Future[None]]
            ) -> float:
    """Median wall (us) of `await step(loop)`, inside a running loop."""
    async def main() -> float:
        loop = asyncio.get_running_loop()
        samples: list[float] = []
        for _ in range(cycles):
            started = time.perf_counter()
            await step(loop)
            samples.append(time.perf_counter() - started)
        return _median_us(samples)
    return asyncio.run(main())


def _one_turn(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    done = loop.create_future()
    loop.call_soon(done.set_result, None)
    return done


async def _returns() -> None:
    return None


def _task(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    return loop.create_task(_returns())


def _future(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    done = loop.create_future()
    done.set_result(None)
    return done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.handoff",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20000)
    args = parser.parse_args(argv)
    n = args.cycles
    lock_wall, lock_cpu = cross_thread(n, coroutine=False)
    coro_wall, coro_cpu = cross_thread(n, coroutine=True)
    print(f"{'primitive':<58}{'us':>8}{'CPU us':>8}")
    print(f"{'thread -> loop -> thread (call_soon_threadsafe + Lock)':<58}"
          f"{lock_wall:>8.3g}{lock_cpu:>8.3g}")
    print(f"{'thread -> loop -> thread (run_coroutine_threadsafe)':<58}"
          f"{coro_wall:>8.3g}{coro_cpu:>8.3g}")
    print(f"{'one loop turn (call_soon, a future awaited)':<58}{in_loop(n, _one_turn):>8.3g}")
    print(f"{'a task made and awaited (returns at once)':<58}{in_loop(n, _task):>8.3g}")
    print(f"{'a future made, resolved, awaited':<58}{in_loop(n, _future):>8.3g}")
    print(f"\nmedian of {n} cycles")


if __name__ == "__main__":
    main()
