t = str.maketrans("abc", "xyz", "d")
print("aabbccdd".translate(t), "hello".translate({ord("l"): None, ord("h"): "J"}))
