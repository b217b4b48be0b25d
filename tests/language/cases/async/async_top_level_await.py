import asyncio
async def f(): return 7
print(await f())
