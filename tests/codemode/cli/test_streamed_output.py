"""`codemode run` prints the program's output as it is written, where the sandbox hands it
over (`on_output`): a line printed before a tool call that waits is on stdout while the
call still waits. Without `on_output` (an older sandbox) the output comes at the end, and
these tests are skipped."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from codemode.sandbox import WasmSandbox

LIMIT_S = 120

pytestmark = pytest.mark.skipif(
    "on_output" not in inspect.signature(WasmSandbox.run).parameters,
    reason="this sandbox hands over no output as it is written (no on_output)")

MODULE = '''
import time
from pathlib import Path

from codemode import tool

@tool
def wait_for(path: str) -> bool:
    """Wait until the file `path` exists (up to 200 s); whether it does."""
    deadline = time.monotonic() + 200
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return Path(path).exists()
'''


@pytest.mark.slow
def test_output_is_printed_while_the_program_runs(tmp_path: Path) -> None:
    (tmp_path / "waiting.py").write_text(MODULE)
    go = tmp_path / "go"
    (tmp_path / "prog.py").write_text(
        'import sys\nprint("first", flush=True)\nprint("to stderr", file=sys.stderr)\n'
        f'print("waited:", wait_for(path={str(go)!r}))\n')
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "codemode", "run", "prog.py", "--timeout",
                             "300", "--tools", "waiting:wait_for", "--no-table"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()),
                              daemon=True)
    reader.start()
    reader.join(timeout=LIMIT_S)           # the tool waits on `go`: only a stream gets here
    try:
        assert first == ["first\n"], "no output while the program ran"
        assert proc.poll() is None
    finally:
        go.touch()
    out, err = proc.communicate(timeout=LIMIT_S)
    assert proc.returncode == 0, err
    assert out == "waited: True\n"
    assert err == "to stderr\n"
