def fact_maker():
    def fact(n): return 1 if n < 2 else n * fact(n - 1)
    return fact
print(fact_maker()(20))
