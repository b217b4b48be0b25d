# restricted: refused (Planet objects are read-only)
from enum import Enum
class Planet(Enum):
    MERCURY = (3.303e23, 2.4397e6)
    EARTH = (5.976e24, 6.37814e6)
    def __init__(self, mass, radius):
        self.mass = mass; self.radius = radius
    @property
    def gravity(self): return 6.673e-11 * self.mass / self.radius ** 2
print(round(Planet.EARTH.gravity, 3), Planet.MERCURY.value)
