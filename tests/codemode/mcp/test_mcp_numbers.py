"""Numbers JSON cannot carry exactly, from a real MCP server process (`fixtures/
mcp_raw_server.py`, tool `numbers`): integers beyond 64 bits, NaN, the infinities and -0.0
reach the program as Python `int` and `float` on every tier and every way of calling (a
direct call, `call_tool`, `asyncio.gather`), at any depth; the server's own one-key dicts
whose key is a tag (`{"$int": "5"}`) stay dicts, and so do a native tool's."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio

from codemode import Policy, Session, tool
from codemode._mcp.client import McpServer
from codemode._mcp.values import lossless

pytestmark = [pytest.mark.mcp, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

RAW = (sys.executable, str(Path(__file__).resolve().parents[3] / "fixtures" /
                           "mcp_raw_server.py"))

CHECKS = textwrap.dedent("""\
    import asyncio, math

    def check(v):
        return {
            "big": type(v["big"]) is int and v["big"] == 2**70,
            "neg": type(v["neg"]) is int and v["neg"] == -2**70,
            "nan": type(v["nan"]) is float and math.isnan(v["nan"]),
            "inf": v["inf"] == math.inf,
            "ninf": v["ninf"] == -math.inf,
            "nz": v["nz"] == 0.0 and math.copysign(1.0, v["nz"]) == -1.0,
            "nested": v["nested"] == [{"v": [2**70, math.inf]}],
            "own": v["own"] == {"$int": "5"},
            "own_float": v["own_float"] == {"$float": "nan"},
            "small": v["small"] == 7,
        }

    async def gathered():
        a, b = await asyncio.gather(numbers(), call_tool("numbers"))
        return [check(a), check(b)]

    results = [check(numbers()), check(call_tool("numbers")), *asyncio.run(gathered())]
    [name for r in results for name, ok in r.items() if not ok]
    """)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def raw():
    async with await McpServer.connect(RAW, name="raw", call_timeout_s=60) as server:
        yield server


@pytest.mark.parametrize("tier", ["wasm", "restricted", "restricted-in-process"])
async def test_big_ints_and_non_finite_floats_arrive_as_python_numbers(raw, tier) -> None:
    session = Session(tools=raw.definitions)
    Policy.from_data({"tier": tier, "limits": {"wall_clock_s": 120.0}}).apply(session)
    result = await session.call("run_code", {"code": CHECKS})
    await session.aclose()
    assert not result.is_error, result.text
    assert result.value["result"] == []          # no check failed, on any route


@pytest.mark.parametrize("tier", ["wasm", "restricted"])
async def test_a_native_tools_dict_whose_only_key_is_a_tag_stays_a_dict(tier) -> None:
    @tool
    def tagged_looking() -> dict:
        """Dicts that look like the wire's tags."""
        return {"a": {"$int": "5"}, "b": [{"$float": "nan"}], "c": {"$dict": [["k", 1]]},
                "d": {"$tuple": [1]}}

    session = Session(tools=[tagged_looking])
    Policy.from_data({"tier": tier, "limits": {"wall_clock_s": 120.0}}).apply(session)
    code = ('v = tagged_looking()\n'
            'v == {"a": {"$int": "5"}, "b": [{"$float": "nan"}], "c": {"$dict": [["k", 1]]},'
            ' "d": {"$tuple": [1]}}\n')
    result = await session.call("run_code", {"code": code})
    await session.aclose()
    assert not result.is_error, result.text
    assert result.value["result"] is True


async def test_lossless_escapes_the_servers_own_one_key_tag_dicts() -> None:
    assert lossless({"$int": "5"}) == {"$dict": [["$int", "5"]]}
    assert lossless([{"$float": {"x": 2**70}}]) == [
        {"$dict": [["$float", {"x": {"$int": str(2**70)}}]]}]
    assert lossless({"$int": "5", "other": 1}) == {"$int": "5", "other": 1}


async def test_a_resumed_run_replays_the_numbers_as_python_numbers(raw, tmp_path) -> None:
    sent: list[int] = []

    @tool
    def send(x: int) -> int:
        """Send x."""
        sent.append(x)
        return x

    rules = {"rules": [{"tool": "send", "action": "ask"}],
             "limits": {"wall_clock_s": 120.0}}
    code = CHECKS.replace("results = [",                # numbers, then the paused send
                          "first = check(numbers())\nsend(x=1)\nresults = [first, ")
    log = str(tmp_path / "s.jsonl")
    session = Session(tools=[*raw.definitions, send], log=log)
    Policy.from_data(rules).apply(session)
    pending = await session.call("run_code", {"code": code}, call_id="r")
    await session.aclose()
    assert pending.value["status"] == "pending", pending.text

    session = Session(tools=[*raw.definitions, send], log=log)
    Policy.from_data(rules).apply(session)
    done = await session.resume("r", {"r:2": True})
    await session.aclose()
    assert not done.is_error, done.text
    assert done.value["result"] == [] and sent == [1]
