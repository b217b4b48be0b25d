# restricted: xfail (an async comprehension fails: the iteration guard raises TypeError "async_generator object is not iterable")
import asyncio
async def ticker(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i
async def main():
    print([i async for i in ticker(4)])
    agen = ticker(3)
    print(await anext(agen), await anext(agen))
    await agen.aclose()
    print(await anext(ticker(0), "default"))
asyncio.run(main())
