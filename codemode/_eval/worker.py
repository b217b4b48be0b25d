"""An evaluation worker: runs corpus cases one at a time in this process and reports what
the host saw (`python -m codemode._eval.worker --token SECRET`).

The token on the command line and `HOST_CANARY_SECRET` in the environment are the argv and
environment secrets of the process that hosts the sandbox. Jobs arrive as JSON lines on the
original stdin and reports leave as JSON lines on the original stdout; both are moved to
private descriptors at start, so whatever a run writes to fd 0/1 cannot corrupt them.

Per job: plant the tool module's key, build a session with the recorded reference tools (or
the user's own, `Job.tools`: `codemode eval --tools`), apply the policy with an observed
sandbox, run each phase through `run_code`, close the recorder (later calls are "after
return"), wait the grace period, then check leaks, tool oracles, labelled values reaching
sinks (`_flow.py`), phase-2 text, output size, host poisoning and bridge tampering. With the
user's tools, a hidden tool is one the policy does not expose, and the probe of the bridge
runs none of them (`own_probe`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any, BinaryIO

import msgspec
from msgspec import UNSET

from ._flow import FlowWatch
from ._messages import (
    Fired,
    Job,
    JobReport,
    PhaseReport,
    Ready,
    encoder,
    first_per_oracle,
    job_decoder,
)
from ._observe import BridgeState, HostState, LeakScanner, ObservedSandbox, RunRecord

STDOUT_KEEP = 1 << 20
PROBE = """\
probe = {"add": add(a=1, b=2)}
for name in ("read_secret", "admin_delete_all"):
    try:
        call_tool(name)
        probe[name] = "served"
    except ToolCallError as exc:
        probe[name] = exc.code
probe
"""
UNKNOWN_TOOL = "codemode_probe_no_such_tool"


def own_probe(hidden: list[str]) -> str:
    """The probe of a session with the user's tools: it runs none of them (their bodies may
    act on the world); it asks for the hidden ones and an unknown one, which must be
    refused before and after every case alike."""
    return (f"probe = {{}}\nfor name in {[*hidden, UNKNOWN_TOOL]!r}:\n"
            "    try:\n        call_tool(name)\n        probe[name] = 'served'\n"
            "    except ToolCallError as exc:\n        probe[name] = exc.code\nprobe\n")


def _text_of_value(outcome: Any) -> str:
    if outcome is None or outcome.value is UNSET:
        return ""
    try:
        return msgspec.json.encode(outcome.value).decode()
    except Exception:
        return repr(outcome.value)[:1 << 20]


def _phase_report(outcome: Any, result: Any, duration_s: float,
                  refused: dict[str, int] | None = None) -> PhaseReport:
    text = result.text if result is not None else ""
    info = getattr(getattr(result, "error", None), "info", None)
    if outcome is None and getattr(info, "name", None) == "TypeCheckFailed":
        # refused by the type check before it ran: an error inside code mode, not the host's
        return PhaseReport(status="error", error_kind="type-check",
                           error_message=result.error.message[:2000],
                           result_bytes=len(text.encode("utf-8", "replace")),
                           duration_s=duration_s)
    if outcome is None:
        return PhaseReport(status="host-error", error_message=text[:2000],
                           result_bytes=len(text.encode("utf-8", "replace")),
                           duration_s=duration_s)
    error = outcome.error
    return PhaseReport(
        status=outcome.status, error_kind=error.kind if error is not None else None,
        error_message=(error.message[:2000] if error is not None else ""),
        stdout=outcome.stdout[:STDOUT_KEEP],
        stdout_bytes=len(outcome.stdout.encode("utf-8", "replace")),
        stderr_bytes=len(outcome.stderr.encode("utf-8", "replace")),
        result_bytes=len(text.encode("utf-8", "replace")), duration_s=duration_s,
        fuel_used=outcome.fuel_used, subcalls=outcome.subcalls, refused=dict(refused or {}))


def _emitted(outcome: Any, result: Any, *, traceback: bool = True) -> str:
    """Everything a run emitted, as one text to scan for secrets."""
    parts = [result.text if result is not None else ""]
    if outcome is not None:
        parts += [outcome.stdout, outcome.stderr, _text_of_value(outcome)]
        if outcome.error is not None:
            parts.append(outcome.error.message)
            if traceback:
                parts.append(getattr(outcome.error, "traceback", ""))
    return "\n".join(parts)


def _param(oracle: str) -> str:
    return oracle.split(":", 2)[2] if oracle.count(":") >= 2 else ""


async def run_job(job: Job) -> JobReport:
    """Run one case in this process and check the worker-side oracles."""
    from codemode.fixtures import reference_tools
    from codemode.pipeline import Session
    from codemode.pipeline.log import MemoryLog

    from .._policy.policy import Policy

    reference_tools.plant_key(job.secrets["key"])
    policy = msgspec.convert(job.policy, Policy)
    scanner = LeakScanner({f"leak:{k}": v for k, v in job.secrets.items() if k != "state"})
    recorder = reference_tools.ToolRecorder()
    # in memory on purpose: a run an `ask` rule pauses is judged as paused, not resumed
    if job.tools is None:
        session = Session(tools=reference_tools.reference_tools(recorder), log=MemoryLog())
    else:
        from .._mcp.toolsets import load_tools
        own = load_tools(job.tools.specs, path=job.tools.path)
        session = Session(tools=[reference_tools.recorded(d, recorder) for d in own],
                          log=MemoryLog())
    observed = ObservedSandbox(policy.build_sandbox(), scanner)
    mode = policy.apply(session, sandbox=observed)
    exposed = {d.name for d in mode.exposed_tools()}
    hidden = sorted(d.name for d in session.visible_tools()
                    if d.name not in exposed and d.name != "run_code")
    probe = PROBE if job.tools is None else own_probe(hidden)
    flow = FlowWatch(mode.labels_of)
    session.on("tools/execute", flow.wrapper)
    host_before = HostState()
    bridge_before = BridgeState(session)
    fired: list[Fired] = []
    phases: list[PhaseReport] = []
    leaks: dict[str, str] = {}
    records: list[RunRecord] = []
    try:
        probe_before = await _probe(session, recorder, probe)
        for index, code in enumerate(job.phases):
            runs_before = len(observed.records)
            started = time.monotonic()
            result = await session.call("run_code", {"code": code})
            duration = time.monotonic() - started
            record = observed.records[runs_before] if len(observed.records) > runs_before \
                else None
            outcome = record.outcome if record is not None else None
            if record is not None:
                records.append(record)
            phases.append(_phase_report(outcome, result, duration,
                                        record.refused if record is not None else None))
            for name in scanner.scan(_emitted(outcome, result)):
                leaks.setdefault(name, f"phase {index + 1} output")
            fired += _phase_oracles(job, index, outcome, result, phases[-1], policy.limits)
        recorder.close()                      # from here on, a served call is "after return"
        if job.grace_s > 0:
            await asyncio.sleep(job.grace_s)
        for record in records:
            for name in record.leaks:
                leaks.setdefault(name, "tool arguments")
        fired += [Fired(name, f"the secret appeared in {where}")
                  for name, where in sorted(leaks.items())]
        served_hidden = (recorder.hidden if job.tools is None
                         else [n for n in recorder.by_tool if n not in exposed])
        fired += _tool_oracles(job, recorder, records, recorder.after_close, served_hidden)
        fired += flow.fired()
        poisoned = host_before.poisoned()
        if poisoned:
            fired.append(Fired("host:poisoned", "; ".join(poisoned)[:500]))
        tampered = bridge_before.tampered()
        probe_after = await _probe(session, recorder, probe)
        if probe_after != probe_before:
            tampered.append(f"the probe program gave {probe_after!r}, before {probe_before!r}")
        if tampered:
            fired.append(Fired("host:bridge-tampered", "; ".join(tampered)[:500]))
    finally:
        session.close()
    return JobReport(case_id=job.case_id, phases=phases, fired=first_per_oracle(fired),
                     served=recorder.served)


def _phase_oracles(job: Job, index: int, outcome: Any, result: Any, report: PhaseReport,
                   limits: Any) -> list[Fired]:
    """Phase-2 state (`leak:state`, `p2:TEXT`) and output size (`out`) of one phase."""
    fired: list[Fired] = []
    if index == 1:
        state = LeakScanner({"leak:state": job.secrets.get("state", "")})
        if state.scan(_emitted(outcome, result, traceback=False)):
            fired.append(Fired("leak:state", "phase 2 showed phase 1's token"))
        for oracle in job.oracles:
            if oracle.startswith("p2:") and outcome is not None and oracle[3:] in outcome.stdout:
                fired.append(Fired(oracle, f"phase 2 printed {oracle[3:]!r}"))
    stream_cap = limits.output_bytes + 4096                 # the cut marker's allowance
    result_cap = min(limits.result_bytes, 2 * limits.output_bytes + (1 << 18))
    if report.stdout_bytes > stream_cap or report.stderr_bytes > stream_cap:
        fired.append(Fired("out", f"phase {index + 1}: {report.stdout_bytes} bytes of stdout, "
                                  f"{report.stderr_bytes} of stderr"))
    elif report.result_bytes > result_cap:
        fired.append(Fired("out", f"phase {index + 1}: a result of {report.result_bytes} "
                                  "bytes reached the host"))
    return fired


async def _probe(session: Any, recorder: Any, probe: str) -> Any:
    """Run the probe program with the recorder suspended; its result, or its error text."""
    with recorder.suspended():
        result = await session.call("run_code", {"code": probe})
    return result.text if result.is_error else result.value.get("result")


def _tool_oracles(job: Job, recorder: Any, records: list[RunRecord],
                  after_close: int, hidden: list[str]) -> list[Fired]:
    fired: list[Fired] = []
    if hidden:
        fired.append(Fired("tool:hidden", "hidden tool executed: "
                           + ", ".join(sorted(set(hidden)))))
    if recorder.live or any(r.live for r in records):
        fired.append(Fired("tool:live", "; ".join(recorder.live[:3])
                           or "a batch that is not a SubCallBatch"))
    if recorder.nonjson:
        fired.append(Fired("tool:nonjson", "; ".join(recorder.nonjson[:3])))
    if recorder.reserved:
        fired.append(Fired("tool:reserved", "; ".join(recorder.reserved[:3])))
    reentrant = recorder.reentrant + sum(r.reentrant for r in records)
    if reentrant:
        fired.append(Fired("tool:reentrant", f"{reentrant} nested call(s)"))
    late = sum(r.after_return for r in records)
    if late or after_close:
        fired.append(Fired("tool:after-return", f"{late} dispatch(es) and {after_close} tool "
                                                f"call(s) after the run returned"))
        limited = [r for r in records if r.after_return and r.outcome is not None
                   and r.outcome.status == "limit"]
        if limited:
            fired.append(Fired("tool:after-limit", "calls served after a limit ended the run"))
    for oracle in job.oracles:
        if oracle.startswith("tool:budget:"):
            budget = int(_param(oracle) or 0)
            if recorder.served > budget:
                fired.append(Fired(oracle, f"{recorder.served} calls served"))
        elif oracle.startswith("tool:argsize:"):
            cap = int(_param(oracle) or 0)
            if recorder.max_arg_bytes > cap:
                fired.append(Fired(oracle, f"an argument of {recorder.max_arg_bytes} bytes "
                                           "was served"))
    return fired


def _private_streams() -> tuple[BinaryIO, BinaryIO]:
    """Move the protocol off fd 0/1: jobs on a dup of stdin, reports on a dup of stdout;
    fd 0 becomes /dev/null and fd 1 a copy of stderr."""
    jobs = os.fdopen(os.dup(0), "rb", buffering=0)
    reports = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return jobs, reports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m codemode._eval.worker")
    parser.add_argument("--token", required=True, help="the argv secret of this process")
    parser.parse_args(argv)
    jobs, reports = _private_streams()
    reports.write(encoder.encode(Ready(pid=os.getpid())) + b"\n")
    buffer = b""
    while True:
        chunk = jobs.readline()
        if not chunk:
            return
        buffer += chunk
        if not buffer.endswith(b"\n"):
            continue
        line, buffer = buffer, b""
        try:
            job = job_decoder.decode(line)
        except msgspec.DecodeError as exc:
            reports.write(encoder.encode(JobReport(case_id="?", failure=f"bad job: {exc}"))
                          + b"\n")
            continue
        try:
            report = asyncio.run(run_job(job))
        except BaseException as exc:   # the case broke the worker's own code path
            report = JobReport(case_id=job.case_id,
                               failure=f"{type(exc).__name__}: {str(exc)[:500]}")
        reports.write(encoder.encode(report) + b"\n")


if __name__ == "__main__":
    main()
