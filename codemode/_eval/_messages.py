"""What the evaluator and its workers say to each other: one JSON line per message.

evaluator -> worker: `Job`; worker -> evaluator: `Ready` once at start, then one
`JobReport` per job, in order.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ToolSource(msgspec.Struct, frozen=True, kw_only=True):
    """The user's own tools a corpus runs against, instead of the reference toolset
    (`codemode eval --tools MODULE:ATTR`).

    Attributes:
        specs: the `MODULE:ATTR` texts (`codemode._mcp.toolsets.load_tools`).
        path: the directory their modules are imported from first (the evaluator's
            working directory: workers run elsewhere).
        exposed: the names the policy exposes to programs (the native reference run of a
            benign case offers the same); the others are hidden (`tool:hidden`).
    """

    specs: tuple[str, ...]
    path: str
    exposed: tuple[str, ...] = ()


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """Run one case.

    Attributes:
        case_id: the case's id (echoed back).
        phases: the program of each phase, placeholders substituted (1 or 2 entries).
        oracles: the case's declared oracle checks.
        policy: the policy as plain data (`msgspec.to_builtins(policy)`).
        secrets: `{"file", "env", "key", "argv", "state"}` values for this run.
        grace_s: seconds to wait after the last phase before checking for late tool calls.
        tools: the user's tools to run against; None: the reference toolset.
    """

    case_id: str
    phases: list[str]
    oracles: list[str]
    policy: dict[str, Any]
    secrets: dict[str, str]
    grace_s: float = 0.0
    tools: ToolSource | None = None


class Fired(msgspec.Struct, frozen=True):
    """One oracle that fired: its name (`leak:file`, `tool:budget:1000`, ...) and why."""

    oracle: str
    detail: str = ""


def first_per_oracle(fired: list[Fired]) -> list[Fired]:
    """`fired` keeping the first report of each oracle, in order."""
    seen: set[str] = set()
    out = []
    for item in fired:
        if item.oracle not in seen:
            seen.add(item.oracle)
            out.append(item)
    return out


class PhaseReport(msgspec.Struct, frozen=True, kw_only=True):
    """How one phase's run ended, as seen by the host.

    Attributes:
        status: "ok" | "error" | "limit" (the sandbox's outcome), or "host-error" when
            the run did not produce an outcome (the sandbox raised); "error" with
            `error_kind` "type-check" when the type check refused the program before it
            ran (docs/codemode.md "Type check before the run").
        error_kind: the outcome's error kind ("exception", "timeout", "memory", ...).
        error_message: the error's message (cut to 2,000 characters).
        stdout: captured stdout (cut to 1 MiB; `stdout_bytes` has the real size).
        duration_s: seconds of the `run_code` call, start to result.
        fuel_used: fuel consumed, when the policy meters fuel.
        subcalls: sub-calls the program sent.
        refused: "CODE: message" -> how many of its sub-calls the host refused (a policy
            rule, a guard, an unknown or hidden tool, an approval).
    """

    status: str
    error_kind: str | None = None
    error_message: str = ""
    stdout: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    result_bytes: int = 0
    duration_s: float = 0.0
    fuel_used: int | None = None
    subcalls: int = 0
    refused: dict[str, int] = {}


class JobReport(msgspec.Struct, frozen=True, kw_only=True):
    """A worker's account of one case: the phases and the oracles it checked (leaks, tool
    oracles, host state, output size, phase-2 text)."""

    case_id: str
    phases: list[PhaseReport] = []
    fired: list[Fired] = []
    served: int = 0
    failure: str | None = None        # the worker could not run the case at all


class Ready(msgspec.Struct, frozen=True):
    pid: int


encoder = msgspec.json.Encoder()
job_decoder = msgspec.json.Decoder(Job)
report_decoder = msgspec.json.Decoder(JobReport)
ready_decoder = msgspec.json.Decoder(Ready)
