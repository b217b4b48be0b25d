"""What a tool's body raised keeps its traceback for the developer: in the log's result
event and a record on the `codemode.pipeline.tools` logger, never in what the model reads
(pipeline/_normalize.py `body_failure`, docs/pipeline.md "Tracebacks")."""

from __future__ import annotations

import logging

from codemode.pipeline import Session, events, tool
from codemode.pipeline.log import load


def _parse(line: str) -> dict:
    key, _, value = line.partition("=")        # a bug two calls down
    return {key: int(value)}


@tool
def read_config(line: str) -> dict:
    """Parse one line of configuration."""
    return _parse(line)


async def test_a_tool_s_bug_keeps_its_traceback_in_the_log_and_logging_only(tmp_path, caplog):
    log = tmp_path / "s.jsonl"
    session = Session(tools=[read_config], log=str(log))
    with caplog.at_level(logging.INFO, logger="codemode.pipeline.tools"):
        result = await session.call("read_config", {"line": "port=eighty"})
    session.close()
    assert result.error.message == "invalid literal for int() with base 10: 'eighty'"
    assert "Traceback" not in result.text and "_parse" not in result.text  # the model's view
    [logged] = [e for e in load(log) if isinstance(e, events.ToolResult)]
    assert logged.traceback.startswith("Traceback (most recent call last):")
    assert "in _parse" in logged.traceback and "ValueError" in logged.traceback
    [record] = [r for r in caplog.records if r.name == "codemode.pipeline.tools"]
    assert record.levelno == logging.INFO and record.tool == "read_config"
    assert isinstance(record.exc_info[1], ValueError)


async def test_a_typed_failure_or_a_success_carries_no_traceback(tmp_path):
    log = tmp_path / "s.jsonl"
    session = Session(tools=[read_config], log=str(log))
    assert (await session.call("read_config", {"line": "port=80"})).value == {"port": 80}
    bad = await session.call("read_config", {})
    session.close()
    assert bad.error.code == "INVALID_ARGS" and bad.error.traceback is None
    assert [e.traceback for e in load(log) if isinstance(e, events.ToolResult)] == [
        __import__("msgspec").UNSET] * 2


@tool(show_traceback=True)
def read_config_shown(line: str) -> dict:
    """Parse one line of configuration; a failure shows where."""
    return _parse(line)


async def test_a_tool_declared_show_traceback_shows_it_with_the_failure():
    session = Session(tools=[read_config_shown])
    result = await session.call("read_config_shown", {"line": "port=eighty"})
    assert result.error.message.startswith("invalid literal for int() with base 10: 'eighty'\n")
    assert "in _parse" in result.error.message and "in _parse" in result.text
    assert result.text == f"Error: {result.error.message}"
