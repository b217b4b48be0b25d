# restricted: refused (nonlocal statement)
import asyncio
async def main():
    sem = asyncio.Semaphore(2); active = 0; peak = 0
    async def w(steps):
        nonlocal active, peak
        async with sem:
            active += 1; peak = max(peak, active)
            for _ in range(steps): await asyncio.sleep(0)
            active -= 1
            return steps
    tasks = [asyncio.create_task(w(n)) for n in (30, 10, 5)]
    res = [await f for f in asyncio.as_completed(tasks)]
    print(res, peak)
asyncio.run(main())
