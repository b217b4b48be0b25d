import asyncio
async def producer(q):
    for i in range(5):
        await q.put(i)
    await q.put(None)
async def consumer(q, out):
    while (item := await q.get()) is not None:
        out.append(item * 2)
async def main():
    q = asyncio.Queue(maxsize=2); out = []
    await asyncio.gather(producer(q), consumer(q, out))
    print(out)
asyncio.run(main())
