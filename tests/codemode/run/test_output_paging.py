"""`CodeMode(output_paging=True)` (a policy's `output_paging = true`): the model reads the
handle of a run whose output was cut, and a later program of the same session pages through
the whole with `read_output`. Off by default."""

import hashlib

import pytest

from codemode import CodeMode, Policy, Session, tool
from codemode.sandbox import RestrictedProcessSandbox, RestrictedSandbox, SandboxLimits, WasmSandbox

TIERS = {"wasm": WasmSandbox, "restricted": RestrictedSandbox,
         "process": RestrictedProcessSandbox}

# 3 MB of varied text (lines of different lengths), printed by the program
BIG = ("import random\nrandom.seed(7)\n"
       "print(''.join(random.choice('ab c\\n\u00e9') for _ in range(3_000_000)))")

# pages through stdout, then returns its length and digest
READ_ALL = """
parts, offset = [], 0
while True:
    page = read_output({handle!r}, part={part!r}, offset=offset)
    if not page:
        break
    parts.append(page)
    offset += len(page)
text = ''.join(parts)
import hashlib
[len(text), hashlib.sha256(text.encode()).hexdigest()]
"""


@tool
def add(a: int, b: int) -> int:
    """Returns a + b."""
    return a + b


@pytest.fixture(params=list(TIERS))
def tier(request):
    return TIERS[request.param]()


@pytest.fixture
def session(tmp_path):
    s = Session(tools=[add], log=str(tmp_path / "session.jsonl"))
    yield s
    s.log.close()


def _expected_stdout() -> str:
    import random
    random.seed(7)
    return "".join(random.choice("ab c\n\u00e9") for _ in range(3_000_000)) + "\n"


@pytest.mark.slow
async def test_a_later_program_pages_through_the_whole_output(session, tier):
    # the restricted tiers take seconds to print 3 MB: a loaded machine must not time it out
    CodeMode(session, sandbox=tier, output_paging=True, limits=SandboxLimits(wall_clock_s=120))
    first = await session.call("run_code", {"code": BIG}, call_id="r1")
    assert not first.is_error and first.value["cut"][0]["part"] == "stdout"
    assert first.value["output_handle"] == "r1"
    assert "read_output('r1'" in first.text
    second = await session.call(
        "run_code", {"code": READ_ALL.format(handle="r1", part="stdout")}, call_id="r2")
    assert not second.is_error, second.text
    whole = _expected_stdout().encode()
    assert second.value["result"] == [len(_expected_stdout()), hashlib.sha256(whole).hexdigest()]
    # each read is in the run's record, bounded to 20,000 characters a call
    reads = second.value["output_reads"]
    assert len(reads) == -(-len(_expected_stdout()) // 20_000) + 1
    assert reads[1] == {"handle": "r1", "part": "stdout", "offset": 20_000, "size": 20_000}


@pytest.mark.slow
async def test_the_value_pages_as_json_text_and_reads_go_with_other_calls(session):
    CodeMode(session, sandbox=RestrictedSandbox(), output_paging=True,
             limits=SandboxLimits(output_bytes=1000))
    first = await session.call("run_code", {"code": "[{'n': i} for i in range(500)]"},
                               call_id="v1")
    assert [c["part"] for c in first.value["cut"]] == ["value"]
    assert "read_output('v1', part='value'" in first.text
    code = READ_ALL.format(handle="v1", part="value").replace("[len(text), ", """
import asyncio, json
both = await asyncio.gather(add(a=1, b=2), read_output('v1', part='value', size=5))
[json.loads(text) == [{'n': i} for i in range(500)], both,
 len(read_output('v1', part='value', offset=1, size=10**9)) == len(text) - 1]
#""")
    second = await session.call("run_code", {"code": code})
    assert not second.is_error, second.text
    assert second.value["result"] == [True, [3, '[{"n"'], True]


async def test_off_by_default_no_function_and_no_handle(session):
    mode = CodeMode(session, sandbox=RestrictedSandbox(), limits=SandboxLimits(output_bytes=100))
    first = await session.call("run_code", {"code": "print('x' * 500)"}, call_id="r1")
    assert first.value["cut"] and "output_handle" not in first.value
    assert "handle" not in first.text and "read_output" not in first.text
    assert len(mode.full_output("r1").stdout) == 501        # the caller still has it
    second = await session.call("run_code", {"code": "read_output('r1')"})
    assert second.is_error and "NameError" in second.text


async def test_unknown_expired_and_other_sessions_handles_raise_in_the_program(tmp_path):
    limits = SandboxLimits(output_bytes=100)
    other = Session(tools=[])
    CodeMode(other, sandbox=RestrictedSandbox(), limits=limits, output_paging=True)
    assert (await other.call("run_code", {"code": "print('s' * 500)"}, call_id="o1")).value["cut"]
    session = Session(tools=[])
    CodeMode(session, sandbox=RestrictedSandbox(), limits=limits, output_paging=True)
    for i in range(9):                      # the latest 8 are kept: c0 expires
        await session.call("run_code", {"code": "print('x' * 500)"}, call_id=f"c{i}")
    code = """
found = []
for args in [('nope',), ('o1',), ('c0',), ('c8', 'stderr'), ('c8', 'bogus')]:
    try:
        read_output(*args)
    except ToolCallError as exc:
        found.append(exc.code)
        found.append(('nope' in str(exc)) if args == ('nope',) else 'not cut' in str(exc))
found.append(len(read_output('c1')))
found
"""
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    assert result.value["result"] == ["NOT_FOUND", True, "NOT_FOUND", False, "NOT_FOUND", False,
                                      "NOT_FOUND", True, "INVALID_ARGS", False, 501]


async def test_a_policy_turns_paging_on(session):
    Policy.from_data({"tier": "restricted-in-process", "output_paging": True,
                      "limits": {"output_bytes": 100}}).apply(session)
    first = await session.call("run_code", {"code": "print('x' * 500)"}, call_id="p1")
    assert first.value["output_handle"] == "p1"
    second = await session.call("run_code", {"code": "read_output('p1', offset=495)"})
    assert second.value["result"] == "xxxxx\n"


@tool
def read_output(key: str) -> str:
    """The user's own tool of the same name as the paging function."""
    return f"own:{key}"


@pytest.mark.parametrize("tier_name", ["wasm", "restricted"])
async def test_a_tool_named_read_output_is_called_by_its_alias_not_answered_by_paging(
        tmp_path, tier_name):
    session = Session(tools=[add, read_output], log=str(tmp_path / "session.jsonl"))
    mode = CodeMode(session, sandbox=TIERS[tier_name](), output_paging=True)
    assert "def read_output_(key: str) -> str:" in mode.description()
    result = await session.call("run_code", {"code": "read_output_(key='k')"})
    session.log.close()
    assert not result.is_error, result.text
    assert result.value["result"] == "own:k"
    assert result.value["subcalls"]["by_tool"] == {"read_output": 1}
    assert "output_reads" not in result.value
