"""The host's half of the final value's lossless encoding (docs/sandbox.md, "The value").

The guest encodes (`guest/cm_guest/values.py`, where the tags are listed); `decode_value`
turns the tagged objects back into the Python objects they stand for.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
from typing import Any

__all__ = ["decode_value"]


def _float(text: str) -> float:
    return float(text)


def _int(text: str) -> int:
    return int(text, 16) if text.lstrip("-").startswith("0x") else int(text)


_SCALAR_TAGS: dict[str, Any] = {
    "$float": _float,
    "$int": _int,
    "$bytes": base64.b64decode,
    "$bytearray": lambda text: bytearray(base64.b64decode(text)),
    "$datetime": datetime.datetime.fromisoformat,
    "$date": datetime.date.fromisoformat,
    "$time": datetime.time.fromisoformat,
    "$timedelta": lambda parts: datetime.timedelta(*parts),
    "$decimal": decimal.Decimal,
    "$repr": str,
    "$cut": str,
}


@functools.cache
def _tags() -> frozenset[str]:
    """The guest's tags, read on the first dict: the guest's module imports asyncio (for
    its pending calls), which a run whose value holds no dict does not need."""
    from .guest.cm_guest.values import TAGS

    return TAGS


def decode_value(value: Any) -> Any:
    """The Python object a run's `outcome.value` stands for: tuples, sets, bytes, dicts
    with any keys, datetimes, big ints, NaN and -0.0 restored; `$repr` and `$cut` become
    their text. Plain JSON comes back as it is.

    Raises:
        ValueError: `value` holds a malformed tagged object.
    """
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        [(tag, body)] = value.items()
        if tag in _tags():
            try:
                return _decode_tag(tag, body)
            except (TypeError, ValueError, KeyError) as exc:
                raise ValueError(f"malformed {tag} value: {exc}") from None
    return {key: decode_value(item) for key, item in value.items()}


def _decode_tag(tag: str, body: Any) -> Any:
    if tag == "$tuple":
        return tuple(decode_value(item) for item in body)
    if tag == "$set":
        return {decode_value(item) for item in body}
    if tag == "$frozenset":
        return frozenset(decode_value(item) for item in body)
    if tag == "$dict":
        return {decode_value(k): decode_value(v) for k, v in body}
    if tag == "$complex":
        real, imag = (decode_value(part) for part in body)
        return complex(real, imag)
    return _SCALAR_TAGS[tag](body)
