import pprint
pprint.pprint(["word" * 3] * 8, compact=True, width=50)
pprint.pprint("a long string " * 8, width=40)
