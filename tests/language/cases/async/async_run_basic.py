import asyncio
async def add(a, b):
    await asyncio.sleep(0)
    return a + b
print(asyncio.run(add(1, 2)))
