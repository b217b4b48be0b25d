import os
import subprocess
import sys


def test_run_help_lists_the_exit_status_of_a_stop_by_signal():
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "codemode", "run", "--help"], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    flat = " ".join(out.replace("│", " ").split())
    assert "128+N stopped by signal N" in flat
    assert "143 SIGTERM" in flat
