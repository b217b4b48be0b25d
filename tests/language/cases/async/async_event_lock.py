import asyncio
async def main():
    ev = asyncio.Event(); lock = asyncio.Lock(); log = []
    async def waiter(i):
        await ev.wait()
        async with lock:
            log.append(i); await asyncio.sleep(0); log.append(-i)
    ts = [asyncio.create_task(waiter(i)) for i in (1, 2, 3)]
    await asyncio.sleep(0); ev.set(); await asyncio.gather(*ts)
    print(log)
asyncio.run(main())
