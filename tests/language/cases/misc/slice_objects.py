# restricted: refused (underscore name __getitem__)
class S:
    def __getitem__(self, k): return k
s = S()
print(s[1], s[1:2], s[::3], s[1:2, 3], s[...], s[:, None])
