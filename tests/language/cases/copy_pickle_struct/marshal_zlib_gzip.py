# restricted: refused (module gzip is not importable)
import zlib, gzip, marshal
data = b"hello " * 50
c = zlib.compress(data, 9); print(len(c), zlib.decompress(c) == data, zlib.crc32(b"abc"), zlib.adler32(b"abc"))
g = gzip.compress(b"x", mtime=0); print(g, gzip.decompress(g))
print(marshal.loads(marshal.dumps([1, "a", (2.5, None)])))
