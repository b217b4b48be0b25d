import asyncio
async def forever():
    try:
        await asyncio.sleep(100)
    except asyncio.CancelledError:
        print("got cancel"); raise
async def main():
    t = asyncio.create_task(forever())
    await asyncio.sleep(0)
    t.cancel()
    try: await t
    except asyncio.CancelledError: print("cancelled:", t.cancelled())
asyncio.run(main())
