import asyncio
async def ok(): return "ok"
async def bad(): raise ValueError("bad")
async def main():
    print(await asyncio.gather(ok(), bad(), return_exceptions=True))
    try: await asyncio.gather(ok(), bad())
    except ValueError as e: print("raised", e)
asyncio.run(main())
