from enum import Enum, auto
class Color(Enum):
    RED = auto()
    GREEN = auto()
    BLUE = 10
print(Color.RED, repr(Color.GREEN), Color(10), Color["RED"], list(Color))
print(Color.RED.name, Color.RED.value, len(Color))
