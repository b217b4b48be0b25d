# restricted: refused (builtin compile() is not provided)
try:
    compile("def f():\n    nonlocal q\n", "<s>", "exec")
except SyntaxError as e:
    print(e.msg)
