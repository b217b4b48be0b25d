"""A tool call left unawaited in async code cannot pass for a wrong value: identity tests,
membership and `type()` see the value, every other use gives the value, and a call never awaited nor
used is named in the run's stderr. Through `run_code` on every tier."""

import pytest

from codemode import CodeMode, Session, events, tool
from codemode.sandbox import RestrictedProcessSandbox, RestrictedSandbox, WasmSandbox


@tool
def find(id: int) -> dict | None:
    """The record with this id, or None when there is none (odd ids)."""
    return None if id % 2 else {"id": id, "name": f"n{id}"}


@pytest.fixture(params=["wasm", "restricted", "process"])
def session(request, tmp_path):
    tier = {"wasm": WasmSandbox, "restricted": RestrictedSandbox,
            "process": RestrictedProcessSandbox}[request.param]()
    s = Session(tools=[find], log=str(tmp_path / "session.jsonl"))
    CodeMode(s, sandbox=tier)
    yield s
    s.log.close()


async def run(session, code):
    result = await session.call("run_code", {"code": code})
    assert not result.is_error, result.text
    return result


# Each coroutine returns its call unawaited; gather hands back the pending calls themselves.
_GATHERED = ("import asyncio\n"
             "async def get(i):\n"
             "    record = find(id=i)\n"
             "    return record\n"
             "records = await asyncio.gather(get(1), get(2))\n")


@pytest.mark.slow
async def test_identity_membership_and_type_see_the_value_of_an_unawaited_call(session):
    code = _GATHERED + (
        "[[r is None for r in records], [r is not None for r in records],\n"
        " [type(r).__name__ for r in records], type(records[1]) is dict,\n"
        " records[0] is None is not False,\n"
        " [records[0] in {None}, records[0] not in {None: 1}, records[1] in [None],\n"
        "  records[0] in {records[0]}]]")
    result = await run(session, code)
    assert result.value["result"] == [[True, False], [False, True], ["NoneType", "dict"],
                                      True, True, [True, False, False, True]]
    assert "never awaited" not in result.value.get("stderr", "")


@pytest.mark.slow
async def test_other_uses_of_an_unawaited_call_give_its_value(session):
    code = _GATHERED + (
        "none, rec = records\n"
        "[none == None, bool(none), rec == {'id': 2, 'name': 'n2'}, len(rec), sorted(rec),\n"
        " f'{none}|{rec[\"name\"]}', rec.get('id'), isinstance(rec, dict), 'id' in rec]")
    result = await run(session, code)
    assert result.value["result"] == [True, False, True, 2, ["id", "name"], "None|n2", 2,
                                      True, True]


@pytest.mark.slow
async def test_a_call_never_awaited_nor_used_is_named_in_stderr(session):
    code = ("import asyncio\n"
            "kept = []\n"
            "def remember(x):\n"
            "    kept.append(x)\n"
            "async def main():\n"
            "    remember(find(id=3))\n"
            "    await asyncio.sleep(0)\n"
            "    return len(kept)\n"
            "await main()")
    result = await run(session, code)
    assert result.value["result"] == 1
    assert ("warning: 1 tool call was never awaited and its value never used: find(...) on "
            "line 6.") in result.value["stderr"]
    assert "never awaited" in result.text          # what the model reads
    # The call itself ran, and the log holds its call and its result.
    calls = [e for e in session.log.read() if isinstance(e, events.CodeDispatch)]
    assert len(calls) == 1


def test_the_description_says_to_await_a_call_in_async_code():
    text = CodeMode(Session(tools=[find])).description()
    assert "An unawaited call in async code is a pending call, not its value: `await` it" \
        in text
