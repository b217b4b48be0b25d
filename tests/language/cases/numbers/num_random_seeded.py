import random
r = random.Random(12345)
print(r.random(), r.randint(1, 100), r.choice("abcdef"), r.sample(range(100), 5), r.uniform(1, 2))
xs = list(range(10)); r.shuffle(xs); print(xs, r.getrandbits(64), r.gauss(0, 1), r.choices("abc", k=5, weights=[1, 2, 3]))
