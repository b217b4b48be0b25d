# restricted: refused (underscore name __required_keys__)
from typing import TypedDict, NotRequired, Required
class Movie(TypedDict):
    title: str
    year: NotRequired[int]
m: Movie = {"title": "x"}
print(m, Movie.__required_keys__, Movie.__optional_keys__, type(m).__name__)
