# xfail: wasm32-wasi errno values: OSError(2, ...) is ENOENT (FileNotFoundError) on Linux, EACCES (PermissionError) under WASI
# restricted: refused (module errno is not importable)
import errno
e = OSError(2, "No such file or directory", "x.txt")
print(type(e).__name__, e)
print(errno.ENOENT, errno.EACCES, errno.ERANGE)
