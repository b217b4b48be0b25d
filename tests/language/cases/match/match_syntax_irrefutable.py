# restricted: refused (builtin compile() is not provided)
src = """
match x:
    case y: pass
    case 1: pass
"""
try:
    compile(src, "<s>", "exec")
except SyntaxError as e:
    print(e.msg, e.lineno)
