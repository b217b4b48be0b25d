"""Every example of docs/integrations.md and of the README's Integrations section runs:
```python blocks are executed (```python no-run blocks are the ones that need a model
and the network), ```sh blocks must exit 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start:end if end != -1 else None]


def _blocks() -> list[tuple[str, str, str]]:
    docs = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    readme = _section((ROOT / "README.md").read_text(encoding="utf-8"), "## Integrations")
    found = []
    for source, text in (("docs/integrations.md", docs), ("README.md", readme)):
        for number, match in enumerate(FENCE.finditer(text), start=1):
            found.append((f"{source} block {number}", match.group(1).strip(), match.group(2)))
    return found


BLOCKS = _blocks()
PYTHON = [(where, body) for where, info, body in BLOCKS if info == "python"]
SHELL = [(where, body) for where, info, body in BLOCKS if info == "sh"]


def test_the_docs_have_examples_of_each_kind():
    kinds = {info for _, info, _ in BLOCKS}
    assert kinds <= {"python", "python no-run", "sh", "json"}, kinds
    assert len(PYTHON) >= 5 and len(SHELL) >= 2


@pytest.mark.parametrize("where, body", PYTHON, ids=[w for w, _ in PYTHON])
def test_python_example_runs(where: str, body: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(ROOT)
    exec(compile(body, where, "exec"), {"__name__": "__doc_example__"})


@pytest.mark.parametrize("where, body", SHELL, ids=[w for w, _ in SHELL])
def test_shell_example_exits_0(where: str, body: str):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-e", "-c", body], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{where}:\n{done.stdout}\n{done.stderr}"
