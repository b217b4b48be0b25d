a = 2 ** 200
print(a, a.bit_length(), (a - 1).bit_count(), a % 97, pow(3, 1000, 10 ** 9 + 7), pow(3, -1, 7))
print(int("1" * 50) * int("9" * 50))
import math
print(math.factorial(30), math.comb(50, 25), math.perm(10, 3), math.isqrt(10 ** 40 + 1), math.gcd(2 ** 64, 6 ** 20), math.lcm(4, 6, 10))
