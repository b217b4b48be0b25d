import math

import pytest

from codemode.pipeline import FrozenDict, FrozenList, NotLosslessError, snapshot, thaw


def test_snapshot_copies_and_freezes_nested_values():
    source = {"a": [1, 2.5, {"b": None, "c": True}], "s": "x"}
    frozen = snapshot(source)
    assert frozen == source
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    source["a"].append(3)
    assert frozen["a"] == [1, 2.5, {"b": None, "c": True}]
    with pytest.raises(TypeError):
        frozen["a"].append(1)
    with pytest.raises(TypeError):
        frozen["s"] = "y"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.nan, "value must be losslessly JSON-serializable: non-finite number at $"),
        ({"x": math.inf}, "value must be losslessly JSON-serializable: non-finite number at $.x"),
        ([-0.0], "value must be losslessly JSON-serializable: negative zero at $[0]"),
        (
            2**63,
            ("value must be losslessly JSON-serializable: integer outside the 64-bit range "
             "[-2**63, 2**63) at $"),
        ),
        (
            {"t": (1, 2)},
            "value must be losslessly JSON-serializable: unsupported type tuple at $.t",
        ),
        ({"s": {1}}, "value must be losslessly JSON-serializable: unsupported type set at $.s"),
        (b"x", "value must be losslessly JSON-serializable: unsupported type bytes at $"),
        ({1: "a"}, "value must be losslessly JSON-serializable: non-string key of type int at $.1"),
        (object(), "value must be losslessly JSON-serializable: unsupported type object at $"),
    ],
)
def test_snapshot_rejects_values_a_json_round_trip_would_change(value, message):
    with pytest.raises(NotLosslessError) as info:
        snapshot(value)
    assert str(info.value) == message


def test_big_int_boundaries_are_explicit():
    assert snapshot(-(2**63)) == -(2**63)
    assert snapshot(2**63 - 1) == 2**63 - 1
    with pytest.raises(NotLosslessError):
        snapshot(-(2**63) - 1)


def test_cycles_are_rejected_but_shared_references_are_fine():
    shared = [1]
    assert snapshot({"a": shared, "b": shared}) == {"a": [1], "b": [1]}
    cyclic: dict = {}
    cyclic["self"] = [cyclic]
    with pytest.raises(NotLosslessError) as info:
        snapshot(cyclic, what="arguments")
    assert str(info.value) == "arguments must be losslessly JSON-serializable: cycle at $.self[0]"


def test_snapshot_is_iterative_for_deep_values():
    deep: list = []
    cur = deep
    for _ in range(50_000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    frozen = snapshot(deep)
    depth = 0
    while frozen:
        frozen = frozen[0]
        depth += 1
    assert depth == 50_000


def test_subclasses_of_builtins_are_rejected():
    class MyDict(dict):
        pass

    with pytest.raises(NotLosslessError):
        snapshot(MyDict(a=1))


def test_frozen_values_snapshot_again_and_thaw_to_plain_builtins():
    frozen = snapshot({"a": [1]})
    assert snapshot(frozen) == {"a": [1]}
    plain = thaw(frozen)
    assert type(plain) is dict and type(plain["a"]) is list
    plain["a"].append(2)
    assert frozen == {"a": [1]}


def test_unpaired_surrogates_are_not_lossless_in_values_or_keys():
    assert snapshot("héllo ✓") == "héllo ✓"
    with pytest.raises(NotLosslessError) as info:
        snapshot({"a": "bad \ud800"})
    assert (
        str(info.value)
        == "value must be losslessly JSON-serializable: string with an unpaired surrogate at $.a"
    )
    with pytest.raises(NotLosslessError) as info:
        snapshot({"k\udfff": 1})
    assert (
        str(info.value)
        == ("value must be losslessly JSON-serializable: key with an unpaired surrogate at "
            "$.k\\udfff")
    )
