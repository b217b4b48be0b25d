"""`run_code`'s description under its budget (docs/codemode.md "A description with a
budget"): the full listing while it fits, an index and how to discover the rest past it,
never longer than the budget; set through `CodeMode` and the policy."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from codemode import CodeMode, Policy, PolicyError, Session, ToolDefinition
from codemode._run.budget import DEFAULT_DESCRIPTION_BUDGET, MIN_DESCRIPTION_BUDGET
from codemode._run.description import run_code_description
from codemode._run.stubs import ToolStub
from codemode.sandbox import RestrictedSandbox, SandboxLimits, WasmSandbox


def definitions(count: int, prefix: str = "svc") -> list[ToolDefinition]:
    """`count` tools of a realistic size (a nested input, an output object)."""
    parameters = {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "string", "description": "The record's id."},
        "filter": {"type": "object", "properties": {
            "status": {"type": "string", "enum": ["open", "closed"]},
            "labels": {"type": "array", "items": {"type": "string"}}}}}}
    output = {"type": "object", "required": ["items"], "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "title": {"type": "string"}}}}}}
    return [ToolDefinition(name=f"{prefix}{k % 7}_op_{k}",
                           description=f"Do operation {k} on records. More words follow.",
                           parameters=parameters, output_schema=output,
                           execute=lambda args: {"items": []})
            for k in range(count)]


def test_a_listing_that_fits_is_the_full_one(tmp_path: Path) -> None:
    session = Session(tools=definitions(5), log=tmp_path / "s.jsonl")
    mode = CodeMode(session)
    assert mode.description_budget == DEFAULT_DESCRIPTION_BUDGET == 50_000
    text = mode.description()
    mode.description_budget = None
    assert text == mode.description()
    assert "class Svc0Op0Filter(TypedDict):" in text and "search_tools" not in text


def test_past_the_budget_the_description_indexes_every_tool(tmp_path: Path) -> None:
    session = Session(tools=definitions(200), log=tmp_path / "s.jsonl")
    mode = CodeMode(session, description_budget=20_000)
    text = mode.description()
    assert len(text) <= 20_000
    full = CodeMode(Session(tools=definitions(200)), description_budget=None).description()
    assert len(full) > 20_000
    assert "search_tools(query, limit=10)" in text and "describe(name)" in text
    assert "TypedDict" not in text
    assert "Tool index (200 tools" in text and "[svc3]" in text
    assert all(f"svc{k % 7}_op_{k}" in text for k in range(200))


@pytest.mark.slow
def test_with_thousands_of_tools_the_index_is_shortened_with_a_count() -> None:
    session = Session(tools=definitions(3000, prefix="service_number_"))
    text = CodeMode(session, description_budget=8_000).description()
    assert len(text) <= 8_000
    assert "more tools (search_tools finds them)" in text


def test_the_budget_is_checked() -> None:
    session = Session(tools=definitions(1))
    for bad in (MIN_DESCRIPTION_BUDGET - 1, 0, -5, 1.5e5, "big"):
        with pytest.raises(ValueError, match="description_budget must be an int of at least"):
            CodeMode(session, description_budget=bad)  # type: ignore[arg-type]


def test_the_policy_sets_the_budget(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text("description_budget = 12000\n")
    policy = Policy.load(policy_file)
    mode = policy.apply(Session(tools=definitions(100)))
    assert mode.description_budget == 12_000
    assert len(mode.description()) <= 12_000
    with pytest.raises(PolicyError, match=r"description_budget.*below 4000"):
        Policy.from_data({"description_budget": 100})
    assert Policy().description_budget == DEFAULT_DESCRIPTION_BUDGET


def _stub(name: str, doc: str) -> ToolStub:
    return ToolStub(name=name, alias=name, params=(), accepts_extra=False,
                    signature=f"def {name}() -> Any:", typed_dicts="", docstring=doc)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(count=st.integers(0, 3000), name_length=st.integers(1, 200),
       groups=st.integers(1, 400), doc_length=st.integers(0, 400),
       budget=st.integers(MIN_DESCRIPTION_BUDGET, 200_000),
       restricted=st.booleans())
@example(count=3000, name_length=200, groups=400, doc_length=400, budget=4_000,
         restricted=False)
@example(count=3000, name_length=1, groups=1, doc_length=0, budget=4_000, restricted=True)
def test_the_description_never_exceeds_its_budget(count: int, name_length: int, groups: int,
                                                  doc_length: int, budget: int,
                                                  restricted: bool) -> None:
    stubs = [_stub((f"g{k % groups}_t{k}_" + "x" * name_length)[:max(name_length, 1)]
                   + f"_{k}", ("Word " * doc_length)[:doc_length]) for k in range(count)]
    modules = (RestrictedSandbox if restricted else WasmSandbox).allowed_modules
    kwargs = {"modules": modules, "limits": SandboxLimits(), "code_mode": restricted}
    full = run_code_description(stubs, **kwargs)
    text = run_code_description(stubs, budget=budget, **kwargs)
    assert len(text) <= budget
    if len(full) <= budget:
        assert text == full
    else:
        assert "search_tools" in text
