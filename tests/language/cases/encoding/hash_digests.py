import hashlib
for name in ["md5", "sha1", "sha256", "sha512", "sha3_256", "blake2b", "blake2s"]:
    print(name, hashlib.new(name, b"abc").hexdigest())
h = hashlib.sha256(); h.update(b"a"); h.update(b"bc"); print(h.hexdigest(), h.digest_size, h.block_size, h.name)
print(hashlib.blake2b(b"x", digest_size=8, key=b"k").hexdigest(), hashlib.shake_128(b"abc").hexdigest(8))
