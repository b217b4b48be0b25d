import copy
a = [[1, 2], {"k": [3]}]
s = copy.copy(a); d = copy.deepcopy(a)
a[0].append(9); a[1]["k"].append(8)
print(s, d, s[0] is a[0], d[0] is a[0])
r = [1]; r.append(r); rc = copy.deepcopy(r); print(rc[1] is rc, rc)
