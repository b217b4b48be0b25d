# restricted: refused (module codecs is not importable)
import codecs
print(codecs.encode("hello", "rot13"), codecs.decode(b"68656c6c6f", "hex"), "ab".encode("utf-32-be"))
print("日本".encode("shift_jis"), "日本".encode("euc-jp"), "Привет".encode("cp1251"), "x".encode("idna"), "bücher.de".encode("idna"))
print("naïve".encode("punycode"), codecs.lookup("UTF8").name, codecs.lookup("latin1").name)
