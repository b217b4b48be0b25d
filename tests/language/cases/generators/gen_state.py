# restricted: refused (inspect offers signature, getdoc, cleandoc and Parameter only: no getgeneratorstate)
import inspect
def g(): yield 1
it = g()
print(inspect.getgeneratorstate(it)); next(it)
print(inspect.getgeneratorstate(it)); list(it)
print(inspect.getgeneratorstate(it))
