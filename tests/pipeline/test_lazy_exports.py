"""`pipeline._lazy.lazy_exports`: a package's names loaded on first use (PEP 562)."""

import sys

import pytest

from codemode.pipeline._lazy import lazy_exports


def test_a_lazy_name_is_imported_at_its_first_use_and_kept_and_others_are_missing():
    sys.modules.pop("json.tool", None)
    namespace = {"already": 1}
    getattr_, dir_ = lazy_exports("json", namespace, {"main": ".tool"}, ["already", "main"])
    assert "json.tool" not in sys.modules and dir_() == ["already", "main"]
    main = getattr_("main")
    assert main is sys.modules["json.tool"].main and namespace["main"] is main
    with pytest.raises(AttributeError, match=r"^module 'json' has no attribute 'nope'$"):
        getattr_("nope")
