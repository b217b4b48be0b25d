# restricted: refused (module cmath is not importable)
z = 3 + 4j
print(z, abs(z), z.conjugate(), z * 1j, complex("1-2j"), complex(1, -0.0), (1j) ** 2, repr(-0j))
import cmath
print(cmath.sqrt(-1), cmath.phase(-1), cmath.polar(1j))
