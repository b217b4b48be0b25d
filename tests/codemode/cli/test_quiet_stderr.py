"""`--json` keeps stderr empty: what a dependency prints there becomes one line in the report's
`warnings` (issue 17, item 6). A real MCP server process that sends notifications the SDK
cannot validate (a progress token nobody asked for, a log level MCP does not define)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

NOISY = textwrap.dedent('''
    import json, sys

    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n")
        sys.stdout.flush()

    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "noisy", "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": "work", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            for _ in range(3):
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": "nobody-asked", "progress": 1}})
                send({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "verbose", "data": "hi"}})
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "content": [{"type": "text", "text": "done"}], "isError": False}})
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
''')


def run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    server = tmp_path / "noisy_server.py"
    server.write_text(NOISY)
    program = tmp_path / "p.py"
    program.write_text("work()\n")
    command = shlex.join([sys.executable, str(server)])
    return subprocess.run([sys.executable, "-m", "codemode", "run", str(program), "--mcp",
                           command, *options], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "COLUMNS": "250"})


@pytest.mark.mcp
def test_json_keeps_stderr_empty_and_reports_the_warning_once(tmp_path):
    done = run(tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    report = json.loads(done.stdout)
    assert report["value"] == "done"
    assert report["warnings"] == [
        "client: Failed to validate notification: notifications/message (ValidationError)"]


@pytest.mark.mcp
def test_without_json_the_warning_is_one_line_not_a_traceback(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("codemode: warning: client: Failed to validate notification: "
                           "notifications/message (ValidationError)\n")
