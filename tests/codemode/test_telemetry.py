"""`codemode.telemetry.instrument`: spans per call and sub-call, checked with the
OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk",
                    reason="the OpenTelemetry SDK is not installed: pip install -e '.[test]'")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from codemode import CodeMode, Policy, Session
from codemode.fixtures.toolset import builtin_tools
from codemode.sandbox import SandboxLimits
from codemode.telemetry import instrument

PROGRAM = '''
ids = list_orders(customer="ada@example.com")
try:
    echo(value="secret")
except ToolDenied:
    pass
len(ids)
'''


@pytest.fixture
def exporter_and_provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    provider.shutdown()


async def test_sub_call_spans_are_children_of_their_run_code_span(exporter_and_provider):
    exporter, provider = exporter_and_provider
    session = Session(tools=builtin_tools())
    instrument(session, tracer_provider=provider)
    Policy.from_data({"rules": [{"tool": "echo", "action": "deny", "reason": "no echo"}],
                      "limits": {"wall_clock_s": 7}}).apply(session)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent turn") as turn:
        result = await session.call("run_code", {"code": PROGRAM}, call_id="call_1")
    assert result.value["result"] == 3

    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"agent turn", "execute_tool run_code", "execute_tool list_orders",
                          "execute_tool echo"}
    run, listing, echo = (spans[f"execute_tool {n}"] for n in ("run_code", "list_orders", "echo"))
    assert run.parent.span_id == turn.get_span_context().span_id
    for child in (listing, echo):
        assert child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
        assert run.start_time <= child.start_time <= child.end_time <= run.end_time

    assert {k: run.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.tool.name",
                                           "gen_ai.tool.call.id", "codemode.outcome")} == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "run_code",
        "gen_ai.tool.call.id": "call_1", "codemode.outcome": "ok"}
    assert run.attributes["codemode.code"] == PROGRAM
    assert run.attributes["codemode.limits.wall_clock_s"] == 7
    assert run.status.status_code == StatusCode.UNSET
    assert listing.attributes["gen_ai.tool.call.id"] == "call_1:code:1"
    assert listing.attributes["codemode.root_call_id"] == "call_1"

    assert echo.attributes["codemode.outcome"] == "denied"
    assert echo.attributes["codemode.error.code"] == "DENIED"
    assert (echo.status.status_code, echo.status.description) == (StatusCode.ERROR, "no echo")


@pytest.mark.slow
async def test_a_limit_is_the_run_code_spans_status(exporter_and_provider):
    exporter, provider = exporter_and_provider
    session = Session(tools=builtin_tools())
    instrument(session, tracer_provider=provider)
    CodeMode(session, limits=SandboxLimits(wall_clock_s=1))
    result = await session.call("run_code", {"code": "while True:\n    pass"})
    assert result.is_error
    [span] = exporter.get_finished_spans()
    assert span.attributes["codemode.outcome"] == "limit"
    assert span.attributes["codemode.limit"] == "timeout"
    assert span.attributes["error.type"] == "CODE_RUN_FAILED"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description.startswith("code run failed (timeout)")


async def test_failures_and_direct_calls_get_spans_and_dispose_stops(exporter_and_provider):
    exporter, provider = exporter_and_provider
    session = Session(tools=builtin_tools(), mode="both")    # direct calls too
    dispose = instrument(session, tracer_provider=provider)
    CodeMode(session)
    await session.call("get_order", {"order_id": "nope"})
    await session.call("no_such_tool", {})
    dispose()
    await session.call("add", {"a": 1, "b": 2})
    spans = exporter.get_finished_spans()
    assert [(s.name, s.attributes["codemode.outcome"], s.attributes["error.type"])
            for s in spans] == [("execute_tool get_order", "error", "TOOL_ERROR"),
                                ("execute_tool no_such_tool", "error", "UNKNOWN_TOOL")]
    assert all(s.parent is None for s in spans)


async def test_a_run_code_span_carries_the_labels_its_run_holds(exporter_and_provider):
    from codemode.fixtures.mailbox import mailbox_tools

    exporter, provider = exporter_and_provider
    session = Session(tools=mailbox_tools([]))
    instrument(session, tracer_provider=provider)
    Policy.from_data({"labels": [{"tool": "read_email", "label": ["private", "mail"]}]}
                     ).apply(session)
    await session.call("run_code", {"code": 'read_email(id="m1")["subject"]'})
    await session.call("run_code", {"code": 'len(list_inbox())'})
    runs = [s for s in exporter.get_finished_spans() if s.name == "execute_tool run_code"]
    assert [s.attributes.get("codemode.labels") for s in runs] == [("mail", "private"), None]


async def test_a_failed_run_s_span_carries_its_labels_too(exporter_and_provider):
    from codemode.fixtures.mailbox import mailbox_tools

    exporter, provider = exporter_and_provider
    session = Session(tools=mailbox_tools([]))
    instrument(session, tracer_provider=provider)
    Policy.from_data({"labels": [{"tool": "read_email", "label": "private"}]}).apply(session)
    failed = await session.call("run_code", {
        "code": 'm = read_email(id="m1")\nraise ValueError(m["body"])'})
    assert failed.is_error and "[labels: private from " in failed.text, failed.text
    [run] = [s for s in exporter.get_finished_spans() if s.name == "execute_tool run_code"]
    assert run.attributes.get("codemode.labels") == ("private",)
    assert run.attributes.get("codemode.outcome") == "error"
