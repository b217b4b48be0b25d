# restricted: refused (module traceback is not importable)
import asyncio, traceback, sys
async def inner(): raise KeyError("k")
async def main():
    try: await inner()
    except KeyError: traceback.print_exc(file=sys.stdout)
asyncio.run(main())
