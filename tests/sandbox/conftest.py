import threading
import time

import pytest

from codemode.sandbox import (
    ParamSpec,
    SandboxLimits,
    SubCallErr,
    SubCallOk,
    SubCallReply,
    ToolSpec,
    WasmSandbox,
)


def as_json(batch):
    """A `SubCallBatch` as plain data, for doubles that read it and tests that inspect it:
    `{"calls": [{"id", "name", "args" (decoded), "invalid"?}], "cancel", "wait_s", "until",
    "indefinite"}`."""
    calls = [{"id": c.id, "name": c.name, "args": c.arguments,
              **({} if c.invalid is None else {"invalid": c.invalid})} for c in batch.calls]
    return {"calls": calls, "cancel": list(batch.cancel), "wait_s": batch.wait_s,
            "until": None if batch.until is None else list(batch.until),
            "indefinite": batch.indefinite}


def reply(results):
    """A `SubCallReply` from `{"id", "ok": True, "value"} | {"id", "ok": False, "code",
    "message"}` dicts."""
    return SubCallReply(results=tuple(
        SubCallOk(id=r["id"], value=r.get("value")) if r["ok"]
        else SubCallErr(id=r["id"], code=r["code"], message=r["message"]) for r in results))


def echo(batch):
    """A dispatch that answers every call with its arguments."""
    return SubCallReply(results=tuple(SubCallOk(id=c.id, value=c.arguments)
                                      for c in batch.calls))


def noop(batch):
    """A dispatch that answers nothing."""
    return SubCallReply()


class EchoHost:
    """A dispatch double: each call returns its arguments; `fail` names fail; `slow` sleeps.

    Implements the batch wire format with real waiting semantics, so sandbox behaviour can be
    tested without the pipeline (the pipeline-backed dispatcher has its own tests).
    """

    def __init__(self, *, fail=(), slow_s=0.0):
        self.fail = set(fail)
        self.slow_s = slow_s
        self.batches = []
        self.calls = []
        self._lock = threading.Lock()

    def __call__(self, batch):
        request = as_json(batch)
        self.batches.append(request)
        results = []
        for call in request["calls"]:
            self.calls.append(call)
            if self.slow_s:
                time.sleep(self.slow_s)
            if call.get("invalid") is not None:     # did not fit the signature: recorded, refused
                results.append({"id": call["id"], "ok": False, "code": "INVALID_ARGS",
                                "message": f"invalid arguments: {call['invalid']}"})
            elif call["name"] in self.fail:
                results.append({"id": call["id"], "ok": False, "code": "DENIED",
                                "message": f"{call['name']} is not allowed"})
            else:
                results.append({"id": call["id"], "ok": True, "value": call["args"]})
        return reply(results)


def echo_tool(name="echo", alias=None, params=(("value", False),), extra=True):
    return ToolSpec(name=name, alias=alias or name, accepts_extra=extra,
                    params=tuple(ParamSpec(name=n, required=r) for n, r in params))


class StepHost:
    """The batch wire with deterministic settling.

    `echo` returns its arguments, `ident` its `value` argument, `fail` a TOOL_ERROR; `hang`
    never settles (until cancelled). A batch that may wait (`wait_s` null or > 0) settles the
    lowest-numbered waited-for call that can settle; one that cannot settle any sleeps
    briefly (bounded by `wait_s`) and answers with nothing.
    """

    def __init__(self):
        self.batches = []
        self.calls = []
        self.cancelled = []
        self.in_flight = {}
        self.max_in_flight = 0

    def __call__(self, batch):
        request = as_json(batch)
        self.batches.append(request)
        for call in request["calls"]:
            self.calls.append(call)
            self.in_flight[call["id"]] = call
        self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
        results = []
        for call_id in request["cancel"]:
            self.cancelled.append(call_id)
            if self.in_flight.pop(call_id, None) is not None:
                results.append({"id": call_id, "ok": False, "code": "ABORTED",
                                "message": "cancelled by the program"})
        wait_s = request["wait_s"]
        until = request["until"] if request["until"] is not None else list(self.in_flight)
        ready = sorted(i for i in until
                       if i in self.in_flight and self.in_flight[i]["name"] != "hang")
        if wait_s is None or wait_s > 0:
            if ready:
                results.append(self._settle(self.in_flight.pop(ready[0])))
            elif until:
                time.sleep(min(wait_s or 0.05, 0.05))
        return reply(results)

    @staticmethod
    def _settle(call):
        args = call["args"]
        if call["name"] == "fail":
            return {"id": call["id"], "ok": False, "code": "TOOL_ERROR",
                    "message": args.get("message", "failed")}
        value = args.get("value") if call["name"] == "ident" else args
        return {"id": call["id"], "ok": True, "value": value}


STEP_TOOLS = (echo_tool(), echo_tool("ident"), echo_tool("fail", params=(("message", False),)),
              echo_tool("hang"))                  # the tools StepHost knows


@pytest.fixture(scope="session")
def sandbox():
    return WasmSandbox()


@pytest.fixture
def host():
    return EchoHost()


@pytest.fixture
def limits():
    return SandboxLimits(wall_clock_s=3.0)
