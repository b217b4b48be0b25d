# restricted: refused (builtin globals() is not provided)
ñ = 1
変数 = 2
print(ñ + 変数, "ℌ".isidentifier(), "1a".isidentifier(), "a-b".isidentifier())
ﬁx = 3
print(ﬁx, fix, "fix" in globals())
