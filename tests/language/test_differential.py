"""Differential language suite: each program under cases/ runs in the sandbox and its stdout
must equal the `.out` next to it, CPython 3.14's output (docs/sandbox.md, "Language
fidelity"). Known wasm-tier differences are strict xfails naming the bug; the restricted tier
runs every case its header does not leave out, and must refuse the ones marked refused."""

from __future__ import annotations

import sys

import pytest

from codemode.sandbox import ProgramError

from ._cases import Case, all_cases, run_restricted, run_wasm, show

CASES = all_cases()


def _wasm_param(case: Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


def _restricted_param(case: Case) -> object:
    marks = []
    since = case.restricted_skip_before
    if case.restricted and case.restricted[0] == "skip" and (
            since is None or sys.version_info < since):
        marks.append(pytest.mark.skip(reason=case.restricted[1]))
    if case.restricted and case.restricted[0] == "xfail":
        marks.append(pytest.mark.xfail(strict=True, reason=case.restricted[1]))
    return pytest.param(case, id=case.id, marks=marks)


def test_enough_cases() -> None:
    assert len(CASES) >= 300
    for case in CASES:
        assert case.expected_path.exists(), f"{case.id} has no .out"
        if case.restricted:
            assert case.restricted[0] in ("refused", "xfail", "skip"), case.id
            assert case.restricted[1], f"{case.id}: a restricted header needs a reason"


@pytest.mark.parametrize("case", [_wasm_param(c) for c in CASES])
def test_wasm(case: Case) -> None:
    outcome = run_wasm(case)
    assert show(outcome) == case.expected_path.read_text("utf-8")


@pytest.mark.parametrize("case", [_restricted_param(c) for c in CASES])
def test_restricted(case: Case) -> None:
    outcome = run_restricted(case)
    if case.restricted and case.restricted[0] == "refused":
        assert outcome.status == "error", show(outcome)
        assert isinstance(outcome.error, ProgramError), outcome.error
        return
    assert show(outcome) == case.expected_path.read_text("utf-8")
