"""codemode.ray and `codemode eval --ray`, on a local Ray cluster (2 CPUs) started by a
driver process of its own: `ray.init` puts crash handlers over wasmtime's in the process
that calls it (see `codemode.ray.connect`), and the test process runs sandboxes. Skipped
when the `ray` extra is not installed."""

import concurrent.futures
import multiprocessing
from pathlib import Path

import msgspec
import pytest

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'codemode[ray]'")

from codemode._eval import evaluate, load_corpus  # noqa: E402
from codemode._policy.policy import Policy  # noqa: E402
from codemode.fixtures.toolset import builtin_tools  # noqa: E402
from codemode.ray import SandboxActor, connect  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fixtures" / "attacks"
DEFAULT = ROOT / "fixtures" / "policies" / "default.toml"
# A benign case (checked against the native reference run), one the sandbox blocks, one that
# ends on a limit.
CASES = ["benign/benign-json-report-roundtrip.py", "fsr-open-family.py",
         "out-print-flood-bypasses.py"]


@pytest.fixture(scope="module")
def driver():
    """A process that joins the cluster and makes the Ray calls of each test."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as process:
        yield lambda fn: process.submit(fn).result(timeout=600)


def fast_policy() -> Policy:
    data = msgspec.to_builtins(Policy.load(DEFAULT))
    data["limits"]["wall_clock_s"] = 2.0
    return Policy.from_data(data)


def _join() -> None:
    connect("local", num_cpus=2, include_dashboard=False)


def _connect_twice() -> bool:
    _join()
    connect("ray://nowhere.invalid:10001")        # not contacted: already joined
    return bool(ray.is_initialized())


@pytest.mark.slow
def test_connect_keeps_a_cluster_this_process_already_joined(driver):
    assert driver(_connect_twice)


def _two_agents() -> tuple[list, object]:
    _join()
    agents = [SandboxActor.remote(builtin_tools) for _ in range(2)]
    try:
        results = ray.get([agent.run.remote(f"x = {i}\nadd(a=x, b=1)")
                           for i, agent in enumerate(agents)])
        # a fresh instance per run: the earlier run's x is gone (looked up at run time,
        # which the type check cannot refuse)
        state = ray.get(agents[0].run.remote("globals().get('x', 'fresh')"))
        ray.get([agent.close.remote() for agent in agents])
    finally:
        for agent in agents:
            ray.kill(agent)
    return results, state


def test_sandbox_actors_run_programs_through_the_pipeline(driver):
    results, state = driver(_two_agents)
    assert [r.value["result"] for r in results] == [1, 2]
    assert not state.is_error and state.value["result"] == "fresh"


def _denied() -> object:
    _join()
    policy = Policy.from_data({"rules": [{"tool": "add", "action": "deny"}]})
    agent = SandboxActor.remote(builtin_tools, policy=policy)
    try:
        return ray.get(agent.run.remote("add(a=1, b=2)"))
    finally:
        ray.kill(agent)


def test_a_policy_actor_applies_its_rules(driver):
    result = driver(_denied)
    assert result.is_error
    assert result.text.endswith('ToolDenied: add: policy denies tool "add"')


def _seen_on_ray() -> tuple[list, list]:
    _join()
    seen = []
    results = evaluate(load_corpus([CORPUS / name for name in CASES]), fast_policy(), jobs=2,
                       ray_address="local", on_result=seen.append)
    return results, seen


@pytest.mark.slow
def test_eval_on_ray_classifies_cases_as_the_process_pool_does(driver):
    on_ray, seen = driver(_seen_on_ray)
    local = evaluate(load_corpus([CORPUS / name for name in CASES]), fast_policy(), jobs=2)

    def summary(results):
        return [(r.id, r.outcome, r.reason, [f.oracle for f in r.fired]) for r in results]

    assert summary(on_ray) == summary(local)
    assert [r.outcome for r in on_ray] == ["ran-ok", "blocked", "limit"]
    assert sorted(r.id for r in seen) == sorted(r.id for r in on_ray)


def _trap_after_joining() -> str:
    from codemode.sandbox import GuestCrashed, RunRequest, SandboxLimits, SubCallReply, WasmSandbox

    _join()
    # Comparing two self-containing lists recurses in C past a 2 MiB wasm stack: a trap.
    cyclic = "a = []; a.append(a); b = []; b.append(b)\na == b"
    limits = SandboxLimits(stack_bytes=2 << 20, wall_clock_s=60.0)
    outcome = WasmSandbox().run(RunRequest(code=cyclic, limits=limits),
                                lambda batch: SubCallReply())
    return type(outcome.error).__name__ if isinstance(outcome.error, GuestCrashed) else "?"


@pytest.mark.slow
def test_a_trap_in_a_process_that_joined_ends_only_the_run(driver):
    # wasmtime's first handlers are installed here, after connect(): a wasm stack
    # overflow ends the run, not the driver.
    assert driver(_trap_after_joining) == "GuestCrashed"
