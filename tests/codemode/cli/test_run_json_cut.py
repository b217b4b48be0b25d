import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_run_json_says_what_was_cut(tmp_path):
    program = tmp_path / "loud.py"
    program.write_text('print("x" * 2_000_000)\n')
    proc = subprocess.run([sys.executable, "-m", "codemode", "run", str(program), "--builtin",
                           "--json"], capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    [cut] = report["cut"]
    assert cut["part"] == "stdout"
    assert cut["total_bytes"] > cut["kept_bytes"]
