# restricted: refused (underscore name __class__)
print([] == [], [] is [], (1, 2) == (1, 2), None is None, 0 == False, "" == False)
print(type(...), ... is Ellipsis, NotImplemented.__class__.__name__)
