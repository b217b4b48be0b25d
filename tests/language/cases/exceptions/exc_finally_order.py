def f():
    try:
        print("try"); return "ret"
    finally:
        print("finally")
print(f())
def g():
    for i in range(3):
        try:
            if i == 1: continue
            print("body", i)
        finally:
            print("fin", i)
g()
