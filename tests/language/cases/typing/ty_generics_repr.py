# restricted: skip (the host's CPython (3.11 to 3.13) prints differently from 3.14)
from typing import Optional, Union, List, Dict, Callable, Any, Literal, Tuple
print(Optional[int], Union[int, str], List[int], Dict[str, list[int]], Callable[[int], str], Literal["a", 1], Tuple[int, ...])
print(list[int], dict[str, int] | None, type(list[int]).__name__, Union[int, int], Optional[int] == (int | None))
