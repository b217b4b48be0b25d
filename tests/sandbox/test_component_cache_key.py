"""The compiled component's cache key (`sandbox/_cache.py`): a digest of the guest's
sources in a fixed order, and the versions read from `sys.path`'s dist-info names."""

import sys

from codemode.sandbox import _cache


def test_the_source_digest_follows_every_source_file_and_its_place(tmp_path, monkeypatch):
    guest, wit = tmp_path / "guest", tmp_path / "wit"
    (guest / "pkg").mkdir(parents=True)
    wit.mkdir()
    (guest / "main.py").write_text("x = 1\n")
    (guest / "pkg" / "mod.py").write_text("y = 2\n")
    (guest / "modules.txt").write_text("json\n")
    (guest / "notes.md").write_text("not a source\n")
    (wit / "world.wit").write_text("package a:b;\n")
    monkeypatch.setattr(_cache, "GUEST_DIR", guest)
    monkeypatch.setattr(_cache, "WIT_DIR", wit)
    monkeypatch.setattr(_cache, "PACKAGE_DIR", tmp_path)
    assert _cache._source_files(str(guest)) == [
        str(guest / "main.py"), str(guest / "modules.txt"), str(guest / "pkg" / "mod.py")]
    first = _cache.source_hash()
    assert _cache.source_hash() == first
    (guest / "notes.md").write_text("changed, and still not a source\n")
    assert _cache.source_hash() == first
    for path, text in ((guest / "pkg" / "mod.py", "y = 3\n"), (wit / "world.wit", "package c:d;\n"),
                       (guest / "modules.txt", "json\nre\n")):
        before = _cache.source_hash()
        path.write_text(text)
        assert _cache.source_hash() != before, path
    (guest / "pkg" / "mod.py").rename(guest / "pkg" / "other.py")     # same text, moved
    assert _cache.source_hash() != before


def test_a_version_is_read_from_the_first_dist_info_directory_on_sys_path(
        tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "Some_Tool-1.2.3.dist-info").mkdir(parents=True)
    (second / "some.tool-9.9.dist-info").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(first), str(second), str(tmp_path / "missing")])
    _cache._dist_infos.cache_clear()
    try:
        assert _cache.dist_version("some-tool") == "1.2.3"
        assert _cache.dist_version("SOME_TOOL") == "1.2.3"
        assert _cache.dist_version("not-installed-anywhere") is None
    finally:
        _cache._dist_infos.cache_clear()
