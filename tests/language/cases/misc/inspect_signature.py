# restricted: refused (inspect offers signature, getdoc, cleandoc and Parameter only: no isfunction)
import inspect
def f(a, b: int = 2, /, c=3, *args, d, e: str = "x", **kw) -> None: pass
sig = inspect.signature(f)
print(sig, list(sig.parameters), sig.parameters["b"].kind, sig.return_annotation)
print(sig.bind(1, d=4).arguments, inspect.isfunction(f), inspect.getdoc(str.upper))
