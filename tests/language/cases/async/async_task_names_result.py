import asyncio
async def main():
    t = asyncio.create_task(asyncio.sleep(0, 5), name="sleeper")
    print(t.get_name(), t.done()); r = await t
    print(r, t.done(), t.result())
asyncio.run(main())
