import codemode
from tests._exports import check_exports


def test_public_names_are_exactly_all_sorted():
    # dir(codemode) lists the lazily loaded names too; check_exports loads them
    check_exports(codemode)


def test_the_pipeline_api_is_part_of_ours():
    assert set(codemode.pipeline.__all__) <= set(codemode.__all__)
