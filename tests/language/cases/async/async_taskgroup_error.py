# restricted: refused (except* statement)
import asyncio
async def fail(n):
    await asyncio.sleep(0)
    raise ValueError(f"fail {n}")
async def slow():
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        print("slow cancelled"); raise
async def main():
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(slow()); tg.create_task(fail(1)); tg.create_task(fail(2))
    except* ValueError as eg:
        print(eg.message, sorted(str(e) for e in eg.exceptions))
asyncio.run(main())
