# restricted: refused (underscore name __setitem__)
from collections import UserDict, UserList, UserString
class Lower(UserDict):
    def __setitem__(self, k, v): super().__setitem__(k.lower(), v)
d = Lower(); d["AbC"] = 1; d.update({"X": 2}); print(d, "abc" in d)
print(UserList([3, 1]) + [2], UserString("ab").upper())
