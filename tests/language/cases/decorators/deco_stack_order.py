def tag(t):
    def d(fn):
        print("applying", t)
        return lambda: f"<{t}>{fn()}</{t}>"
    return d
@tag("b")
@tag("i")
def text(): return "x"
print(text())
