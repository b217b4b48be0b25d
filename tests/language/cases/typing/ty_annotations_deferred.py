# restricted: skip (host CPython 3.11 evaluates annotations eagerly (no PEP 649))
def f(x: Undefined) -> AlsoUndefined:
    return x
print(f(1))
import annotationlib
print(annotationlib.get_annotations(f, format=annotationlib.Format.STRING))
