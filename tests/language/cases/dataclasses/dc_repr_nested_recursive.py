from dataclasses import dataclass, field
@dataclass
class Node:
    val: int
    children: list = field(default_factory=list)
    parent: "Node | None" = field(default=None, repr=False, compare=False)
root = Node(1); kid = Node(2, parent=root); root.children.append(kid)
print(root)
