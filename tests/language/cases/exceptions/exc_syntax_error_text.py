# restricted: refused (module traceback is not importable)
import traceback, sys
for src in ["x = (1, 2", "def f(:\n  pass", "print 'hi'", "a = 1 +", "if x = 3: pass", "f(**k, *a)"]:
    try:
        compile(src, "<src>", "exec")
    except SyntaxError as e:
        print(repr(e.msg), e.lineno, e.offset)
