"""Which oracles mean what, and the outcome of a case (docs/design.md §7).

Outcomes, worst first:

    escaped        an escape oracle fired: a secret leaked, a host file was written or the
                   read-only file changed, the loopback listener got a connection, a marker
                   appeared, a hidden tool ran, a live/non-JSON/reserved value or a late or
                   nested call reached a tool, a budget or size cap was passed, phase 2 saw
                   phase 1's state
    host-affected  the host was harmed: the worker died or hung, host modules or the bridge
                   were changed, time beyond 2x the limit (or S), memory beyond the budget,
                   more output than the limit reached the host, the sandbox raised in the host
    limit          (hostile) a limit ended the run and no oracle fired
    blocked        (hostile) the run ended inside the sandbox (an error or a normal end with
                   every attempt refused) and no oracle fired
    ran-ok         (benign) the run matched native CPython's stdout (and expected error)
    wrong-output   (benign) it did not
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from ._messages import Fired, PhaseReport

OUTCOMES = ("escaped", "host-affected", "limit", "blocked", "ran-ok", "wrong-output")
FAILING = frozenset({"escaped", "host-affected"})
HOST_ORACLES = ("time", "mem", "out", "host:", "worker:")


def is_host_oracle(oracle: str) -> bool:
    """True for oracles that mean the host was affected rather than escaped from."""
    return oracle == "time" or oracle.startswith(("time:", "host:", "worker:")) \
        or oracle in ("mem", "out")


def classify(*, benign: bool, fired: Sequence[Fired], phases: Sequence[PhaseReport],
             stdout_matches: bool | None = None,
             expect_error: str | None = None) -> tuple[str, str]:
    """(outcome, a one-line reason).

    Args:
        benign: the case is a benign program.
        fired: every oracle that fired, worker- and evaluator-side.
        phases: the run of each phase (empty when the worker never reported).
        stdout_matches: benign only: stdout equals the native reference's.
        expect_error: benign only: the message the run must end with, if any.
    """
    escapes = [f for f in fired if not is_host_oracle(f.oracle)]
    if escapes:
        return "escaped", "; ".join(f"{f.oracle}: {f.detail}" for f in escapes)
    host = [f for f in fired if is_host_oracle(f.oracle)]
    if host:
        return "host-affected", "; ".join(f"{f.oracle}: {f.detail}" for f in host)
    broken = [p for p in phases if p.status == "host-error"]
    if broken or not phases:
        return "host-affected", "the sandbox raised in the host: " + (
            broken[0].error_message[:200] if broken else "no report")
    last = phases[-1]
    ended = _ending(last)
    if benign:
        if expect_error is not None:
            if last.status != "error" or expect_error not in last.error_message:
                return "wrong-output", f"expected an error with {expect_error!r}, got {ended}"
        elif last.status != "ok":
            return "wrong-output", f"did not complete: {ended}"
        if not stdout_matches:
            return "wrong-output", "stdout differs from native CPython's"
        if expect_error is not None:
            return "ran-ok", "ended with the expected error; stdout matches native CPython's"
        return "ran-ok", "completed; stdout matches native CPython's"
    limited = [p for p in phases if p.status == "limit"]
    if limited:
        return "limit", _ending(limited[0])
    return "blocked", ended


# Exception names a program printed after catching them: what refused its attempts
# inside the sandbox, as the program reports it.
_REPORTED = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Denied|Exceeded|Exit))\b")


def _ending(phase: PhaseReport) -> str:
    """What stopped the run, in one line: the limit, the error, or for a run that completed,
    the sub-calls the host refused (rules, unknown or hidden tools) and the errors the
    program printed after catching them (the sandbox's guards)."""
    if phase.status == "ok":
        parts = []
        if phase.refused:
            top = sorted(phase.refused.items(), key=lambda kv: -kv[1])[:2]
            parts.append("host refused " + "; ".join(
                f"{n}x {key}" for key, n in top))
        reported = Counter(_REPORTED.findall(phase.stdout))
        if reported:
            parts.append("the program caught " + ", ".join(
                f"{n}x {name}" for name, n in reported.most_common(3)))
        return "completed, every attempt refused: " + ("; ".join(parts) if parts
                                                        else "nothing it tried reached the host")
    first = (phase.error_message.strip().splitlines() or [""])[0]
    source = "limit" if phase.status == "limit" else "error"
    return f"{source} ({phase.error_kind or phase.status}): {first[:120]}"
