# restricted: refused (underscore name __annotations__)
from typing import get_origin, get_args, Annotated, get_type_hints, Optional
print(get_origin(list[int]), get_args(dict[str, int]), get_origin(int | str), get_args(Optional[int]), get_args(Annotated[int, "m"]))
def f(a: int, b: "str" = "x") -> list[int]: ...
print(get_type_hints(f), f.__annotations__)
