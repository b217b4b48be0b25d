# restricted: refused (module 'warnings' has no attribute 'catch_warnings' (not exposed))
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    warnings.warn("old api", DeprecationWarning)
    warnings.warn("careful")
print([(x.category.__name__, str(x.message)) for x in w])
