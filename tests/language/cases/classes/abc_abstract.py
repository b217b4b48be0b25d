# restricted: skip before 3.12 (the host's CPython before 3.12 prints differently from 3.14)
from abc import ABC, abstractmethod
class Shape(ABC):
    @abstractmethod
    def area(self): ...
    @abstractmethod
    def name(self): ...
try: Shape()
except TypeError as e: print(e)
class Sq(Shape):
    def area(self): return 4
    def name(self): return "sq"
print(Sq().area(), isinstance(Sq(), Shape))
