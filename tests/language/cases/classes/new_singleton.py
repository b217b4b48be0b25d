# restricted: refused (underscore name _inst)
class One:
    _inst = None
    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst
print(One() is One())
