class C:
    @property
    @staticmethod
    def odd(): return 1
try:
    print(C().odd)
except TypeError as e:
    print("TypeError", e)
