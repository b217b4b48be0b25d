"""codemode.ray and `codemode eval --ray`, on a local Ray cluster this module starts
(2 CPUs). Skipped when the `ray` extra is not installed."""

from pathlib import Path

import msgspec
import pytest

ray = pytest.importorskip("ray", reason="needs the ray extra: pip install 'codemode[ray]'")

from codemode._eval import evaluate, load_corpus  # noqa: E402
from codemode._policy import Policy  # noqa: E402
from codemode.fixtures.toolset import builtin_tools  # noqa: E402
from codemode.ray import SandboxActor, connect  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fixtures" / "attacks"
DEFAULT = ROOT / "fixtures" / "policies" / "default.toml"
# A benign case (checked against the native reference run), one the sandbox blocks, one that
# ends on a limit.
CASES = ["benign/benign-json-report-roundtrip.py", "fsr-open-family.py",
         "out-tampered-guest-caps.py"]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def fast_policy() -> Policy:
    data = msgspec.to_builtins(Policy.load(DEFAULT))
    data["limits"]["wall_clock_s"] = 2.0
    return Policy.from_data(data)


def test_connect_keeps_a_cluster_this_process_already_joined(cluster):
    connect("ray://nowhere.invalid:10001")        # not contacted: already initialized
    assert ray.is_initialized()


def test_sandbox_actors_run_programs_through_the_pipeline(cluster):
    agents = [SandboxActor.remote(builtin_tools) for _ in range(2)]
    try:
        results = ray.get([agent.run.remote(f"x = {i}\nadd(a=x, b=1)")
                           for i, agent in enumerate(agents)])
        assert [r.value["result"] for r in results] == [1, 2]
        state = ray.get(agents[0].run.remote("x"))         # a fresh instance per run
        assert state.is_error and "NameError" in state.text
        ray.get([agent.close.remote() for agent in agents])
    finally:
        for agent in agents:
            ray.kill(agent)


def test_a_policy_actor_applies_its_rules(cluster):
    policy = Policy.from_data({"rules": [{"tool": "add", "action": "deny"}]})
    agent = SandboxActor.remote(builtin_tools, policy=policy)
    try:
        result = ray.get(agent.run.remote("add(a=1, b=2)"))
        assert result.is_error
        assert result.text.endswith('ToolDenied: add: policy denies tool "add"')
    finally:
        ray.kill(agent)


def test_eval_on_ray_classifies_cases_as_the_process_pool_does(cluster):
    cases = load_corpus([CORPUS / name for name in CASES])
    seen = []
    on_ray = evaluate(cases, fast_policy(), jobs=2, ray_address="local", on_result=seen.append)
    local = evaluate(cases, fast_policy(), jobs=2)

    def summary(results):
        return [(r.id, r.outcome, r.reason, [f.oracle for f in r.fired]) for r in results]

    assert summary(on_ray) == summary(local)
    assert [r.outcome for r in on_ray] == ["ran-ok", "blocked", "limit"]
    assert sorted(r.id for r in seen) == sorted(r.id for r in on_ray)
