# restricted: refused (module tomllib is not importable)
import tomllib, configparser
print(tomllib.loads('title = "x"\n[owner]\nname = "ann"\ndob = 1979-05-27T07:32:00-08:00\n[[pts]]\nx = 1\n[[pts]]\nx = 2.5\narr = [1, [2, "b"]]\n'))
try: tomllib.loads("a = ")
except tomllib.TOMLDecodeError as e: print(e)
cp = configparser.ConfigParser(); cp.read_string("[s]\na = 1\nb = %(a)s2\n[DEFAULT]\nd = x\n")
print(cp.sections(), cp["s"]["b"], cp.getint("s", "a"), dict(cp["s"]))
