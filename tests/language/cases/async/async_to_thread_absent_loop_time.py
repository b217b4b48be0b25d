import asyncio
async def main():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.call_soon(fut.set_result, 42)
    print(await fut)
    fut2 = loop.create_future()
    loop.call_later(0.01, fut2.set_result, "later")
    print(await fut2)
asyncio.run(main())
