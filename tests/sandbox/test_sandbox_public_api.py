import codemode.sandbox
from tests._exports import check_exports


def test_public_names_are_exactly_all_sorted():
    check_exports(codemode.sandbox)
