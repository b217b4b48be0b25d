"""A tool's traceback stays with the developer when a program calls it: the sub-call's
`tool/code-dispatch` event keeps it; the program and the model get only the message
(docs/pipeline.md "Tracebacks")."""

from __future__ import annotations

from codemode import CodeMode, Session, tool
from codemode.pipeline import events
from codemode.pipeline.log import load


def _lookup(table: dict, key: str) -> str:
    return table[key]                       # a bug two calls down


@tool
def find_user(name: str) -> str:
    """Find a user by name."""
    return _lookup({}, name)


async def test_a_program_gets_the_message_and_the_log_keeps_the_traceback(tmp_path):
    log = tmp_path / "s.jsonl"
    session = Session(tools=[find_user], log=str(log))
    CodeMode(session)
    code = "try:\n    find_user(name='ada')\nexcept Exception as e:\n    r = str(e)\nr"
    result = await session.call("run_code", {"code": code})
    session.close()
    assert not result.is_error, result.text
    assert result.value["result"] == "find_user: KeyError: 'ada'"
    assert "_lookup" not in result.text and "Traceback" not in result.text
    [dispatch] = [e for e in load(log) if isinstance(e, events.CodeDispatch)]
    assert "in _lookup" in dispatch.traceback and "KeyError" in dispatch.traceback
    assert "_lookup" not in str(dispatch.content)
