import types

from codemode import pipeline


def test_public_names_are_exactly_all():
    # submodules become package attributes once imported anywhere; only names count here
    names = {
        n
        for n, v in vars(pipeline).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert names == set(pipeline.__all__) - {"events", "log"}
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
