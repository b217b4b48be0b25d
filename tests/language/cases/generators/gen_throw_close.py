def g():
    try:
        yield 1
        yield 2
    except ValueError as e:
        yield f"caught {e}"
    finally:
        print("cleanup")
it = g(); print(next(it)); print(it.throw(ValueError("boom"))); it.close(); print("closed")
