"""One job slot of `codemode eval` (docs/design.md §7): its worker process, canary tree and
listener, and `Slot.run_case`, which runs one case there and classifies it.

Each job slot (`--jobs N`) owns one worker process (`python -m codemode._eval.worker`), one
canary tree (`_canaries.Plant`) and runs cases one at a time: reset the tree with fresh
secrets, open a loopback listener, substitute placeholders, send the job, and wait for the
report under a hard timeout while sampling the worker's resident memory. Then it checks the
evaluator-side oracles (files, markers, the listener, time, memory) and classifies the case.

A worker that dies or overruns the hard timeout is killed and replaced (`host-affected`);
so is the worker after any host-affected case, a late tool call, or (outside the wasm tier,
where the program shares the worker's interpreter) an escape: the next case starts clean.
The process pool (`_runner.evaluate`) and the Ray actors (`_ray`) drive the same slots.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from .._policy.policy import Policy
from .._run.plan import QUOTA_EXCEEDED
from ._canaries import SECRET_ENV, Listener, Plant, Secrets, fresh_token
from ._classify import classify
from ._corpus import Case, substitute
from ._flow import with_case_labels
from ._messages import (
    Fired,
    Job,
    JobReport,
    PhaseReport,
    ToolSource,
    encoder,
    first_per_oracle,
    ready_decoder,
    report_decoder,
)
from ._native import ReferenceRun, ReferenceStopped, reference_run

_ROOT = Path(__file__).resolve().parents[2]
MEM_SLACK_BYTES = 128 << 20
STARTUP_S = 90.0            # a first job may build and compile the sandbox component
SAMPLE_S = 0.02


class CaseResult(msgspec.Struct, frozen=True, kw_only=True):
    """One case's outcome and cost.

    Attributes:
        outcome: see `_classify.OUTCOMES`.
        reason: one line: which oracles fired, or how the run ended.
        fired: every oracle that fired.
        latency_ms: milliseconds of the case's runs (`run_code` calls), summed over phases.
        fuel_used: fuel of the runs when the policy meters it, else None.
        mem_growth_bytes: the worker's peak resident memory during the case, above its
            level when the case started.
        subcalls: the tool calls the runs made.
        quota_refusals: the calls the host refused with code QUOTA_EXCEEDED (the policy's
            `[[quotas]]`), summed over phases.
    """

    id: str
    category: str
    path: str
    oracles: tuple[str, ...]
    outcome: str
    reason: str
    fired: tuple[Fired, ...] = ()
    phases: tuple[PhaseReport, ...] = ()
    latency_ms: float = 0.0
    wall_ms: float = 0.0
    fuel_used: int | None = None
    mem_growth_bytes: int = 0
    subcalls: int = 0
    quota_refusals: int = 0


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class SlotClosed(Exception):
    """The slot was closed (the evaluation is stopping) while a case waited on its worker."""


class _Worker:
    """One worker process and the thread that reads its reports; `closed` set stops the
    wait for it to start (it is then killed)."""

    def __init__(self, cwd: Path, log: Path, closed: threading.Event) -> None:
        self.token = fresh_token("argv")
        self.env_secret = fresh_token("env")
        env = {**os.environ, SECRET_ENV: self.env_secret,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT),
                                                            os.environ.get("PYTHONPATH")]))}
        self._log = open(log, "ab")  # noqa: SIM115  (the worker's stderr; kill() closes it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "codemode._eval.worker", "--token", self.token],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, cwd=cwd, env=env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.jobs_done = 0
        threading.Thread(target=self._read, name="eval-worker-reader", daemon=True).start()
        ready: bytes | None = None
        deadline = time.monotonic() + STARTUP_S
        while not closed.is_set() and time.monotonic() < deadline:
            try:
                ready = self.lines.get(timeout=SAMPLE_S * 10)
                break
            except queue.Empty:
                continue
        if closed.is_set():
            self.kill()
            raise SlotClosed
        if ready is None:
            raise RuntimeError(f"the evaluation worker did not start (see {log})")
        self.pid = ready_decoder.decode(ready).pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, job: Job) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encoder.encode(job) + b"\n")
        self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._log.close()


class _Await(msgspec.Struct, kw_only=True):
    report: JobReport | None = None
    died: str | None = None
    peak_rss: int = 0
    baseline_rss: int = 0
    wall_s: float = 0.0


def _hard_timeout(case_phases: int, policy: Policy, oracles: Sequence[str]) -> float:
    per_phase = 2 * policy.limits.wall_clock_s
    for oracle in oracles:
        if oracle.startswith("time:"):
            per_phase = max(per_phase, float(oracle.split(":", 1)[1]))
    return case_phases * (per_phase + 5.0) + 15.0


def _grace(oracles: Sequence[str]) -> float:
    return 1.5 if any(o in ("tool:after-return", "tool:after-limit") for o in oracles) else 0.0


class Slot:
    """One job slot: a worker, a canary tree, and the cases it runs in turn.

    Args:
        root: a directory for this slot's canary tree and worker log.
        policy: the policy every case runs under.
        mem_slack_bytes: resident memory above `limits.memory_bytes` a case may add before
            the `mem` oracle fires.
        tools: the user's tools the cases run against (None: the reference toolset).
    """

    def __init__(self, root: Path, policy: Policy, mem_slack_bytes: int = MEM_SLACK_BYTES,
                 tools: ToolSource | None = None) -> None:
        self.root = root
        self.policy = policy
        self.tools = tools
        self.mem_slack_bytes = mem_slack_bytes
        self.plant = Plant(root / "tree")
        self.plant.workspace.mkdir(parents=True, exist_ok=True)
        self.log = root / "worker.log"
        self._worker: _Worker | None = None
        self._closed = threading.Event()

    def close(self) -> None:
        """Kill the worker (the case it runs ends at once, `SlotClosed` in `run_case`) and
        remove the canary tree. Any thread may call it, while a case runs too."""
        self._closed.set()
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        self.plant.remove()

    def _ensure_worker(self) -> _Worker:
        if self._worker is None or not self._worker.alive():
            if self._worker is not None:
                self._worker.kill()
            self._worker = _Worker(self.plant.workspace, self.log, self._closed)
        return self._worker

    def _retire(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None

    def run_case(self, case: Case, reference: ReferenceRun | None) -> CaseResult:
        """Run one case and classify it."""
        worker = self._ensure_worker()
        secrets = Secrets.fresh(env=worker.env_secret, argv=worker.token)
        self.plant.reset(secrets.file)
        listener = Listener()
        try:
            values = self.plant.placeholders(listener.port, secrets.state)
            phases = [substitute(p, values) for p in case.phases]
            job = Job(case_id=case.id, phases=phases, oracles=list(case.oracles),
                      policy=with_case_labels(msgspec.to_builtins(self.policy),
                                              case.labels),
                      secrets=msgspec.to_builtins(secrets), grace_s=_grace(case.oracles),
                      tools=self.tools)
            timeout = _hard_timeout(len(phases), self.policy, case.oracles)
            if worker.jobs_done == 0:
                timeout += STARTUP_S
            waited = self._await(worker, job, timeout)
            worker.jobs_done += 1
            time.sleep(0.05)                   # let a spawned process reach its marker
            fs = self.plant.findings()
            connections = listener.connections
        finally:
            listener.close()
        return self._result(case, reference, waited, fs, connections)

    def _await(self, worker: _Worker, job: Job, timeout: float) -> _Await:
        state = _Await(baseline_rss=_rss_bytes(worker.pid))
        state.peak_rss = state.baseline_rss
        started = time.monotonic()
        worker.send(job)
        deadline = started + timeout
        while True:
            try:
                line = worker.lines.get(timeout=SAMPLE_S)
            except queue.Empty:
                if self._closed.is_set():
                    raise SlotClosed from None
                state.peak_rss = max(state.peak_rss, _rss_bytes(worker.pid))
                if time.monotonic() > deadline:
                    state.died = f"no report within the hard timeout of {timeout:.0f} s"
                    break
                continue
            if line is None:
                if self._closed.is_set():
                    raise SlotClosed
                code = worker.proc.wait()
                state.died = f"the worker died (exit status {code})"
                break
            state.report = report_decoder.decode(line)
            break
        state.wall_s = time.monotonic() - started
        state.peak_rss = max(state.peak_rss, _rss_bytes(worker.pid))
        if state.died is not None:
            self._retire()
        return state

    def _result(self, case: Case, reference: ReferenceRun | None, waited: _Await,
                fs: Any, connections: int) -> CaseResult:
        limits = self.policy.limits
        report = waited.report
        fired: list[Fired] = list(report.fired) if report is not None else []
        phases = tuple(report.phases) if report is not None else ()
        if waited.died is not None:
            fired.append(Fired("worker:died" if "died" in waited.died else "time", waited.died))
        elif report is not None and report.failure:
            fired.append(Fired("worker:failed", report.failure))
        if fs.written:
            fired.append(Fired("fs:write", "changed on the host: " + ", ".join(fs.written[:5])))
        if fs.ro_modified:
            fired.append(Fired("ro:modified", "the read-only host file changed"))
        if fs.markers:
            fired.append(Fired("proc:marker", "marker created: " + ", ".join(fs.markers)))
        if connections:
            fired.append(Fired("net:connect", f"{connections} connection(s) to the listener"))
        limit_s = 2 * limits.wall_clock_s
        for oracle in case.oracles:
            if oracle.startswith("time:"):
                limit_s = float(oracle.split(":", 1)[1])
        slow = [p.duration_s for p in phases if p.duration_s > limit_s]
        if slow:
            fired.append(Fired("time", f"a run took {max(slow):.1f} s (allowed {limit_s:g} s)"))
        growth = max(0, waited.peak_rss - waited.baseline_rss)
        if waited.baseline_rss and growth > limits.memory_bytes + self.mem_slack_bytes:
            fired.append(Fired("mem", f"worker memory grew by {growth >> 20} MiB (budget "
                                      f"{(limits.memory_bytes + self.mem_slack_bytes) >> 20} MiB)"))
        matches = None
        if case.benign and reference is not None and phases:
            matches = phases[-1].stdout == reference.stdout
        outcome, reason = classify(benign=case.benign, fired=first_per_oracle(fired), phases=phases,
                                   stdout_matches=matches, expect_error=case.expect_error)
        if outcome == "host-affected" or any(f.oracle.startswith("tool:after") for f in fired) \
                or (outcome == "escaped" and self.policy.tier != "wasm"):
            self._retire()                       # the next case gets a clean host
        fuel = [p.fuel_used for p in phases if p.fuel_used is not None]
        return CaseResult(
            id=case.id, category=case.category, path=case.path, oracles=case.oracles,
            outcome=outcome, reason=reason, fired=tuple(first_per_oracle(fired)), phases=phases,
            latency_ms=sum(p.duration_s for p in phases) * 1000, wall_ms=waited.wall_s * 1000,
            fuel_used=sum(fuel) if fuel else None, mem_growth_bytes=growth,
            subcalls=sum(p.subcalls for p in phases),
            quota_refusals=sum(n for p in phases for key, n in p.refused.items()
                               if key.startswith(f"{QUOTA_EXCEEDED}:")))


def _reference(case: Case, cache: dict[str, ReferenceRun | None],
               lock: threading.Lock, tools: ToolSource | None = None,
               slot: Slot | None = None) -> ReferenceRun | None:
    """The native reference run of a benign case, once per case id.

    Raises:
        SlotClosed: `slot` was closed while the reference ran (it was killed)."""
    with lock:
        if case.id in cache:
            return cache[case.id]
    try:
        run: ReferenceRun | None = reference_run(
            case.source, tools=tools, stop=slot._closed if slot is not None else None)
    except subprocess.TimeoutExpired:
        run = None
    except ReferenceStopped:
        raise SlotClosed from None
    with lock:
        cache[case.id] = run
    return run
