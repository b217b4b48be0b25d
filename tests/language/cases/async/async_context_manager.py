import asyncio, contextlib
@contextlib.asynccontextmanager
async def res(name):
    print("open", name)
    try: yield name.upper()
    finally: print("close", name)
async def main():
    async with res("a") as a, res("b") as b:
        print(a, b)
asyncio.run(main())
