import pipeline


def test_public_names_are_exactly_all():
    assert {n for n in vars(pipeline) if not n.startswith("_")} == set(pipeline.__all__)


def test_pipeline_imports_neither_sandbox_nor_codemode():
    import pathlib

    root = pathlib.Path(pipeline.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "import sandbox" not in text and "from sandbox" not in text, path
        assert "import codemode" not in text and "from codemode" not in text, path
