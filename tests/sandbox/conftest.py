import json
import threading
import time

import pytest

from codemode.sandbox import ParamSpec, SandboxLimits, ToolSpec, WasmSandbox


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
        request = json.loads(batch)
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
        return json.dumps({"results": results})


def echo_tool(name="echo", alias=None, params=(("value", False),), extra=True):
    return ToolSpec(name=name, alias=alias or name, accepts_extra=extra,
                    params=tuple(ParamSpec(name=n, required=r) for n, r in params))


@pytest.fixture(scope="session")
def sandbox():
    return WasmSandbox()


@pytest.fixture
def host():
    return EchoHost()


@pytest.fixture
def limits():
    return SandboxLimits(wall_clock_s=3.0)
