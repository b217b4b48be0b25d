"""The guest's call shapes (`guest/cm_guest/signature.py`) under this Python: a tool's function
is a template renamed, so binding a fresh instance's tools compiles nothing, and the
functions made from one template keep CPython's own rules and messages apart."""

import pytest

from codemode.sandbox.guest.cm_guest import signature

OMITTED = signature.OMITTED


def test_binding_a_common_shape_compiles_nothing(monkeypatch):
    def compile_refused(*shape):
        raise AssertionError(f"compiled a template for {shape}")
    monkeypatch.setattr(signature, "_compile", compile_refused)
    params = [("a", True, False, False), ("b", False, False, True), ("from", False, True, False)]
    add = signature.binder("add", params, False)
    assert add(1, b=None, **{"from": 3}) == {"a": 1, "from": 3}


def test_a_larger_shape_is_compiled_once_then_shared():
    params = [(f"p{i}", True, False, False) for i in range(signature._PREMADE_POSITIONAL + 3)]
    wide = signature.binder("wide", params, False)
    other = signature.binder("other", [(f"q{i}", *rest) for i, (_, *rest) in enumerate(params)],
                             False)
    assert wide.__code__.co_code == other.__code__.co_code
    assert wide(*range(len(params))) == {f"p{i}": i for i in range(len(params))}
    assert other(*range(len(params))) == {f"q{i}": i for i in range(len(params))}


def test_functions_of_one_template_keep_their_own_names_keys_and_defaults():
    first = signature.binder("first", [("a", True, False, False), ("b", False, False, True)],
                             False)
    second = signature.binder("second", [("x", True, False, False), ("y", False, False, False)],
                              True)
    assert first(1) == {"a": 1} and first(1, None) == {"a": 1} and first(1, 2) == {"a": 1, "b": 2}
    assert second(1, None, z=3) == {"x": 1, "y": None, "z": 3}
    assert (first.__defaults__, second.__defaults__) == ((OMITTED,), (OMITTED,))
    with pytest.raises(TypeError) as raised:
        first(1, c=2)
    assert str(raised.value) == "first() got an unexpected keyword argument 'c'"
    with pytest.raises(TypeError) as raised:
        second()
    assert str(raised.value) == "second() missing 1 required positional argument: 'x'"


def test_from_an_optional_parameter_followed_by_a_required_one_all_are_keyword_only():
    fn = signature.binder("t", [("a", False, False, False), ("b", True, False, False)], False)
    assert fn(b=2) == {"b": 2} and fn(a=1, b=2) == {"a": 1, "b": 2}
    with pytest.raises(TypeError) as raised:
        fn(a=1)
    assert str(raised.value) == "t() missing 1 required keyword-only argument: 'b'"
    with pytest.raises(TypeError) as raised:
        fn(1, b=2)
    assert str(raised.value) == "t() takes 0 positional arguments but 1 positional argument" \
        " (and 1 keyword-only argument) were given"


def test_a_tool_binding_makes_its_call_shape_at_its_first_call_only(monkeypatch):
    from codemode.sandbox.guest.cm_guest import tools

    made = []
    binder = signature.binder

    def counted(alias, *rest):
        made.append(alias)
        return binder(alias, *rest)
    monkeypatch.setattr(signature, "binder", counted)

    class Bridge:
        def call(self, name, alias, args, invalid=None, name_json=None):
            return (name_json, args, invalid)

    specs = [{"name": f"t{i}", "alias": f"t{i}", "accepts_extra": False,
              "params": [{"name": "a", "required": True}]} for i in range(3)]
    bound = [tools.Binding(Bridge(), spec, lambda: None) for spec in specs]
    assert made == []                   # binding every exposed tool made no call shape
    assert bound[1](1) == ('"t1"', {"a": 1}, None)
    assert bound[1](a=2) == ('"t1"', {"a": 2}, None)
    # A call of the wrong shape is still recorded with CPython's own message.
    assert bound[2](1, 2) == (None, {"a": 1}, "t2() takes 1 positional argument but 2 were given")
    assert made == ["t1", "t2"]
