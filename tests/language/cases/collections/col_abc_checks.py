from collections.abc import Iterable, Mapping, Sequence, MutableMapping, Hashable, Callable, Generator
print(isinstance([], Sequence), isinstance({}, Mapping), isinstance("", Iterable), isinstance([], Hashable))
print(isinstance(len, Callable), isinstance((x for x in []), Generator), issubclass(dict, MutableMapping))
