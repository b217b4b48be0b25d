# restricted: refused (module weakref is not importable)
import weakref, gc
class O: pass
o = O(); r = weakref.ref(o); print(r() is o); del o; gc.collect(); print(r())
d = weakref.WeakValueDictionary(); k = O(); d["k"] = k; print(len(d)); del k; gc.collect(); print(len(d))
