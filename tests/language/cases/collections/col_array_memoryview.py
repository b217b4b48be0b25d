# restricted: refused (memoryview objects are read-only)
import array
a = array.array("i", [1, 2, 3]); a.append(4)
print(a, a.itemsize, a.tolist(), a[1:3], array.array("d", [1.5]) * 2, array.array("u", "hi") if False else "")
m = memoryview(b"abcdef"); print(m[1:3].tobytes(), m.nbytes, m[0], m.readonly, bytes(m[::2]))
ba = bytearray(b"xyz"); mv = memoryview(ba); mv[0] = 65; print(ba)
