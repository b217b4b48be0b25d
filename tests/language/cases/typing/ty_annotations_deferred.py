# restricted: skip (annotations are evaluated eagerly before 3.14, PEP 649)
def f(x: Undefined) -> AlsoUndefined:
    return x
print(f(1))
import annotationlib
print(annotationlib.get_annotations(f, format=annotationlib.Format.STRING))
