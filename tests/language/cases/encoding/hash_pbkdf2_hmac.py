# xfail: the guest's hashlib has no OpenSSL, so hashlib.pbkdf2_hmac and hashlib.scrypt are missing (CPython 3.12+ has no pure-Python fallback)
# restricted: refused (module hmac is not importable)
import hashlib, hmac
print(hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 1000).hex())
m = hmac.new(b"key", b"The quick brown fox jumps over the lazy dog", "sha256"); print(m.hexdigest())
print(hmac.digest(b"k", b"m", "sha1").hex(), hmac.compare_digest(b"a", b"a"), hmac.compare_digest("a", "b"))
print(hashlib.scrypt(b"pw", salt=b"s", n=16, r=1, p=1, dklen=16).hex() if hasattr(hashlib, "scrypt") else "no scrypt")
