# restricted: refused (exec())
ns = {}
exec("x = 1\ny = x + 1", ns)
print(ns["y"], eval("x * 10", ns), eval("[a for a in range(3)]"), compile("1+1", "<e>", "eval").co_filename)
import ast
print(ast.literal_eval("{'a': (1, 2.5, None, True), 'b': [-1, 1e3]}"), ast.dump(ast.parse("x = 1 + 2")))
try: ast.literal_eval("__import__('os')")
except ValueError as e: print(e)
print(ast.unparse(ast.parse("if a:\n  b = (1,2)\nelse:\n  pass")))
