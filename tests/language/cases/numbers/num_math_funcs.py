# restricted: skip (math.sumprod is new in 3.12 and exact only from 3.14)
import math
print(math.pi, math.e, math.tau, math.inf, math.floor(-2.5), math.ceil(-2.5), math.trunc(-2.7))
print(math.log(8, 2), math.log10(1000), math.log2(1024), math.exp(1), math.hypot(3, 4), math.dist((0, 0), (1, 1)))
print(math.fsum([0.1] * 10), sum([0.1] * 10), math.prod([1, 2, 3, 4]), math.sumprod([1, 2], [3, 4]))
print(math.nextafter(1.0, 2.0), math.ulp(1.0), math.fmod(-7, 3), math.remainder(7, 3), math.cbrt(27) if hasattr(math, "cbrt") else None)
