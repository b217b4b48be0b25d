"""The differential language cases: discovery, headers, and running one on a tier."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from codemode.sandbox import (
    RestrictedSandbox,
    RunOutcome,
    RunRequest,
    SandboxLimits,
    WasmSandbox,
)

CASES = Path(__file__).parent / "cases"
LIMITS = SandboxLimits(wall_clock_s=30.0)


@dataclass(frozen=True)
class Case:
    """One program and its expected stdout (`name.py` + `name.out`).

    Header lines (comments at the top of the program) mark how the tiers differ:
    `# xfail: <bug>` is a known wasm-tier failure (the `.out` is CPython 3.14's text);
    `# restricted: refused (<reason>)` means the restricted tier must refuse the program;
    `# restricted: xfail (<bug>)` is a known restricted-tier failure;
    `# restricted: skip (<reason>)` leaves it out of the restricted tier (which runs the
    host's own CPython, so output that differs between versions cannot match there), and
    `# restricted: skip before 3.N (<reason>)` only on a host older than 3.N.
    """

    path: Path

    @property
    def id(self) -> str:
        return self.path.relative_to(CASES).with_suffix("").as_posix()

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def expected_path(self) -> Path:
        return self.path.with_suffix(".out")

    def header(self, key: str) -> str | None:
        for line in self.source.splitlines():
            if not line.startswith("#"):
                break
            prefix = f"# {key}:"
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        return None

    @property
    def xfail(self) -> str | None:
        return self.header("xfail")

    @property
    def restricted(self) -> tuple[str, str] | None:
        """("refused" | "xfail" | "skip", reason) or None when the restricted tier must match."""
        value = self.header("restricted")
        if value is None:
            return None
        mode, _, reason = value.partition(" ")
        if mode == "skip" and reason.startswith("before "):
            reason = reason.partition("(")[2]
        return mode, reason.strip("() ")

    @property
    def restricted_skip_before(self) -> tuple[int, int] | None:
        """The host version from which a `skip before 3.N` case runs on the restricted tier."""
        match = re.match(r"skip before 3\.(\d+) \(", self.header("restricted") or "")
        return (3, int(match.group(1))) if match else None


def all_cases() -> list[Case]:
    return [Case(p) for p in sorted(CASES.rglob("*.py"))]


def _refuse(batch: str) -> str:
    raise AssertionError("the language cases call no tools")


_wasm: WasmSandbox | None = None
_restricted: RestrictedSandbox | None = None


def run_wasm(case: Case) -> RunOutcome:
    global _wasm
    if _wasm is None:
        _wasm = WasmSandbox()
    return _wasm.run(RunRequest(code=case.source, limits=LIMITS), _refuse)


def run_restricted(case: Case) -> RunOutcome:
    global _restricted
    if _restricted is None:
        _restricted = RestrictedSandbox()
    return _restricted.run(RunRequest(code=case.source, limits=LIMITS), _refuse)


def show(outcome: RunOutcome) -> str:
    """stdout, plus the error when the program failed (a case is expected to finish)."""
    text = outcome.stdout
    if outcome.error is not None:
        text += f"[run ended: {outcome.error.kind}] {outcome.error.message}\n"
        traceback = getattr(outcome.error, "traceback", "")
        if traceback:
            text += traceback
    return text
