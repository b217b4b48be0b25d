import asyncio
async def f(): return 1
c = f()
print(type(c).__name__, asyncio.iscoroutine(c))
c.close()
print(asyncio.run(asyncio.sleep(0, result="x")))
