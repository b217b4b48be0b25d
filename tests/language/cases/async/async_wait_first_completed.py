import asyncio
async def main():
    a = asyncio.create_task(asyncio.sleep(0.01, "a"))
    b = asyncio.create_task(asyncio.sleep(1, "b"))
    done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)
    print([t.result() for t in done], len(pending))
    for t in pending: t.cancel()
asyncio.run(main())
