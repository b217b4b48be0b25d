# restricted: refused (module contextvars is not importable)
import asyncio, contextvars
cv = contextvars.ContextVar("cv", default="none")
async def task(v):
    cv.set(v); await asyncio.sleep(0); return cv.get()
async def main():
    print(await asyncio.gather(task("a"), task("b")), cv.get())
asyncio.run(main())
