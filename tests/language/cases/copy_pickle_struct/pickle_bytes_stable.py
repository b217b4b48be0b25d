# restricted: refused (module pickle is not importable)
import pickle, pickletools
b = pickle.dumps({"a": [1, 2]}, protocol=2)
print(b)
print(pickle.dumps((1, "x", None), protocol=4))
pickletools.dis(pickle.dumps([1, "x"], protocol=0))
