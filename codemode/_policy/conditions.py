"""A policy rule's conditions: a test on one argument of the call, or on the labels the
call's run holds (`run_has`), as written in a policy file's `when = {...}`."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

_MISSING = object()


class Condition(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One test on one argument (exactly one of the tests is given), or on the labels the
    run holds (`run_has` alone).

    Attributes:
        arg: a top-level argument name; dots walk into nested objects (`"options.mode"`).
        run_has: a label or a list of labels: the call's run received a result carrying
            any of them (never for a direct call).
        equals: the argument equals this JSON value.
        matches: a regular expression found in the (string) argument (`re.search`).
        contains: a substring of a string argument, or an item of a list argument.
        gt, lt: the (numeric, not bool) argument is greater / less than this number.
        optional: with `run_has`: its labels may be given by nothing the policy can see
            when it is applied (a tool added later, labels given at run time). Without it,
            `Policy.apply` refuses a label that no tool definition and no `[[labels]]` entry
            gives (a typo, a case difference: the rule would never fire).
    """

    arg: str | None = None
    run_has: str | tuple[str, ...] | None = None
    optional: bool = False
    equals: Any | UnsetType = UNSET
    matches: str | None = None
    contains: Any | UnsetType = UNSET
    gt: float | None = None
    lt: float | None = None

    def __post_init__(self) -> None:
        given = [name for name in ("equals", "matches", "contains", "gt", "lt")
                 if getattr(self, name) is not None and getattr(self, name) is not UNSET]
        if self.run_has is not None:
            if self.arg is not None or given:
                raise ValueError("`run_has`: a label condition takes no `arg` and no test")
            if not self.labels or not all(self.labels):
                raise ValueError("`run_has`: a label is a non-empty string (or a list of them)")
            return
        if self.optional:
            raise ValueError("`optional`: only a `run_has` condition can be optional")
        if self.arg is None:
            raise ValueError("a condition needs `arg` (an argument to test) or `run_has`")
        if len(given) != 1:
            raise ValueError("a condition needs exactly one of equals, matches, contains, "
                             f"gt, lt (got {', '.join(given) or 'none'})")
        if self.matches is not None:
            try:
                re.compile(self.matches)
            except re.error as exc:
                raise ValueError(f"`matches`: not a valid regular expression: {exc}") from None

    @property
    def labels(self) -> frozenset[str]:
        """The labels of `run_has` (empty for an argument test)."""
        if self.run_has is None:
            return frozenset()
        return frozenset((self.run_has,) if isinstance(self.run_has, str) else self.run_has)

    def holds(self, arguments: Any, held: frozenset[str] = frozenset()) -> bool:
        """True when the test passes on `arguments` (the call's argument object), or, for
        `run_has`, when `held` (the run's labels) holds any of its labels."""
        if self.run_has is not None:
            return not self.labels.isdisjoint(held)
        assert self.arg is not None
        value = _lookup(arguments, self.arg)
        if value is _MISSING:
            return False
        if self.equals is not UNSET:       # same JSON type (1 is not True), or both numbers
            same_kind = type(value) is type(self.equals) or _both_numbers(value, self.equals)
            return same_kind and bool(value == self.equals)
        if self.matches is not None:
            return isinstance(value, str) and re.search(self.matches, value) is not None
        if self.contains is not UNSET:
            if isinstance(value, str):
                return isinstance(self.contains, str) and self.contains in value
            return isinstance(value, list) and self.contains in value
        if not _is_number(value):
            return False
        if self.gt is not None:
            return bool(value > self.gt)
        return self.lt is not None and bool(value < self.lt)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _both_numbers(a: Any, b: Any) -> bool:
    return _is_number(a) and _is_number(b)


def _lookup(arguments: Any, path: str) -> Any:
    value = arguments
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value
