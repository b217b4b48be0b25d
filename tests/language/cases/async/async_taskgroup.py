import asyncio
async def job(n):
    await asyncio.sleep(0.001 * n)
    return n * n
async def main():
    async with asyncio.TaskGroup() as tg:
        ts = [tg.create_task(job(i)) for i in range(5)]
    print([t.result() for t in ts])
asyncio.run(main())
