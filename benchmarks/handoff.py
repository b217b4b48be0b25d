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

Then the cost of coming back from idle (`--pause`, default 20 ms, as the paced rows of
`benchmarks.run` wait between runs): each of a few steps timed back to back and again
right after its thread slept that long, medians of `--paced` cycles. After a sleep the
caches, the TLB and the branch predictors hold other work, and on a virtual machine the
vCPU may have been descheduled: on the 2-vCPU VM of docs/benchmarks.md a system call went
from ~0.3 to ~6 us and starting and stopping an event loop for a no-op from ~16 to
~170 us. A paced run pays this on every syscall, loop turn and code path it touches.
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


def after_idle(step: Callable[[], object], cycles: int, pause_s: float) -> tuple[float, float]:
    """Median wall (us) of `step()` back to back, then right after `pause_s` of sleep."""
    hot: list[float] = []
    paced: list[float] = []
    for _ in range(min(cycles, 50)):          # warm up
        step()
    for samples, pause in ((hot, 0.0), (paced, pause_s)):
        for _ in range(cycles):
            if pause:
                time.sleep(pause)
            started = time.perf_counter()
            step()
            samples.append(time.perf_counter() - started)
    return _median_us(hot), _median_us(paced)


def _idle_steps() -> dict[str, Callable[[], object]]:
    """The steps `after_idle` times, each returning at once."""
    import os
    import select

    poller = select.epoll()
    loop = asyncio.new_event_loop()

    def python_loop() -> None:
        total = 0
        for i in range(200):
            total += i

    def thread_trip() -> None:
        done = threading.Lock()
        done.acquire()
        threading.Thread(target=done.release).start()
        done.acquire()

    return {
        "a system call (getppid)": os.getppid,
        "epoll_wait with no wait": lambda: poller.poll(0),
        "200 iterations of a Python loop": python_loop,
        "an event loop started and stopped for a no-op": (
            lambda: loop.run_until_complete(_returns())),
        "a thread started and joined through a Lock": thread_trip,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.handoff",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20000)
    parser.add_argument("--paced", type=int, default=200,
                        help="cycles of each step after idle (0: skip that table)")
    parser.add_argument("--pause", type=float, default=0.02,
                        help="seconds of idle before each paced cycle")
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
    if args.paced > 0:
        print(f"\n{'step':<58}{'us':>8}{'idle us':>9}")
        for label, step in _idle_steps().items():
            hot, paced = after_idle(step, args.paced, args.pause)
            print(f"{label:<58}{hot:>8.3g}{paced:>9.3g}")
        print(f"\nmedian of {args.paced} cycles each; 'idle': right after "
              f"{args.pause * 1e3:g} ms of sleep")


if __name__ == "__main__":
    main()
