# restricted: refused (underscore name __len__)
class R:
    def __len__(self): return 3
    def __getitem__(self, i):
        if i >= 3: raise IndexError
        return i * 10
print(list(reversed(R())), list(R()))
