import operator as op
print(op.itemgetter(1, 0)("ab"), op.attrgetter("real", "imag")(3 + 4j), op.methodcaller("split", ",")("a,b"))
print(op.add(1, 2), op.neg(3), op.contains([1], 1), op.index(5), op.call(len, "abc") if hasattr(op, "call") else None)
