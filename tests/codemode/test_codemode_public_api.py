import codemode
from tests._exports import check_exports


def test_public_names_are_exactly_all_sorted():
    # dir(codemode) lists the lazily loaded names too; check_exports loads them. Strict: no
    # name the package imports for its own work (typing's, importlib, annotations) shows.
    check_exports(codemode, strict=True)


def test_the_namespace_holds_no_implementation_name():
    import codemode.adapters.openai  # a submodule becomes an attribute

    for name in ("annotations", "importlib", "Any", "TYPE_CHECKING"):
        assert name not in dir(codemode)
        assert not hasattr(codemode, name), name
    assert "adapters" in dir(codemode)
    assert not [name for name in dir(codemode)
                if name.startswith("_") and not name.startswith("__")]


LOW_LEVEL = {"eager", "launch", "message_of", "POINTS"}


def test_the_pipeline_api_is_part_of_ours_but_its_low_level_names():
    assert set(codemode.pipeline.__all__) - LOW_LEVEL <= set(codemode.__all__)
    for name in LOW_LEVEL:
        assert name in codemode.pipeline.__all__
        assert hasattr(codemode.pipeline, name)
        assert name not in codemode.__all__
        assert name not in dir(codemode)
        assert not hasattr(codemode, name), name
