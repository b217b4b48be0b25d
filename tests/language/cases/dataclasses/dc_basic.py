from dataclasses import dataclass, field
@dataclass
class Item:
    name: str
    price: float = 0.0
    tags: list = field(default_factory=list)
a = Item("pen", 1.5); b = Item("pen", 1.5)
print(a, a == b, a is b)
a.tags.append("x"); print(a.tags, b.tags)
