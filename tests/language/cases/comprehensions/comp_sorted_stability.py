people = [("bob", 30), ("ann", 25), ("cid", 30), ("dee", 25), ("eve", 35)]
print(sorted(people, key=lambda p: p[1]))
print(sorted(people, key=lambda p: p[1], reverse=True))
print(sorted(sorted(people), key=lambda p: -p[1]))
import operator
print(sorted(people, key=operator.itemgetter(1, 0)), min(people, key=lambda p: p[1]))
