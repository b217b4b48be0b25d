import asyncio
async def main():
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(5)
    except TimeoutError as e:
        print("timeout", type(e).__name__)
    try:
        await asyncio.wait_for(asyncio.sleep(5), 0.01)
    except TimeoutError:
        print("wait_for timeout")
    print(await asyncio.wait_for(asyncio.sleep(0, "fast"), 1))
asyncio.run(main())
