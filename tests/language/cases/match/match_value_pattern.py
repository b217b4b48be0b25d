# restricted: refused (match statement)
import enum
class Color(enum.Enum):
    RED = 1
    GREEN = 2
def f(c):
    match c:
        case Color.RED: return "stop"
        case Color.GREEN: return "go"
print(f(Color.RED), f(Color.GREEN), f(1))
