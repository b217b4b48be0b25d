import random
random.seed(42)
print(random.random(), random.randrange(100), random.sample("abcdefg", 3))
random.seed("seed-string", version=2)
print(random.randint(1, 1000))
