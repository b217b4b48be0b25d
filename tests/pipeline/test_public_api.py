import importlib

import pytest

from codemode import pipeline
from tests._exports import check_exports


@pytest.mark.parametrize("name", ["codemode.pipeline", "codemode.pipeline.events",
                                  "codemode.pipeline.fs", "codemode.pipeline.hooks",
                                  "codemode.pipeline.log"])
def test_public_names_are_exactly_all_sorted(name):
    check_exports(importlib.import_module(name))


def test_the_pipeline_lists_its_event_and_log_modules():
    assert {"events", "log"} <= set(pipeline.__all__)


def test_the_architecture_api_is_importable():
    from codemode.pipeline import (  # noqa: F401
        CallResult,
        ExecutionInput,
        RunContext,
        Session,
        Signal,
        ToolDefinition,
        events,
        tool,
    )

    assert hasattr(events, "CodeDispatchStart") and hasattr(events, "CodeDispatch")


def test_pipeline_imports_neither_sandbox_nor_codemode():
    import pathlib

    root = pathlib.Path(pipeline.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "import sandbox" not in text and "from sandbox" not in text, path
        assert "import codemode" not in text and "from codemode" not in text, path
