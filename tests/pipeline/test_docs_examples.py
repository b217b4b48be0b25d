"""Every Python example in docs/pipeline.md runs."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_doc_has_examples():
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_doc_example_runs(index):
    exec(
        compile(EXAMPLES[index], f"docs/pipeline.md example {index + 1}", "exec"),
        {"__name__": "__doc_example__"},
    )
