from functools import lru_cache, cache
@lru_cache(maxsize=2)
def sq(x): return x * x
for x in [1, 2, 1, 3, 2]: sq(x)
print(sq.cache_info()); sq.cache_clear(); print(sq.cache_info())
@cache
def f(x): return x
f(1); f(1); print(f.cache_info())
