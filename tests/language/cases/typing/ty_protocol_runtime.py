from typing import Protocol, runtime_checkable
@runtime_checkable
class Closer(Protocol):
    def close(self) -> None: ...
class F:
    def close(self): pass
print(isinstance(F(), Closer), isinstance(1, Closer))
