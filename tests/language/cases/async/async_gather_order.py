import asyncio
async def work(n, d):
    await asyncio.sleep(d)
    print("done", n)
    return n * 10
async def main():
    r = await asyncio.gather(work(1, 0.4), work(2, 0.0), work(3, 0.2))
    print(r)
asyncio.run(main())
