"""Workspace filesystem tools and the read-before-edit gate (docs/pipeline-spec.md §9, §14.4)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec
import pytest

from codemode.pipeline import (
    CreateIfAbsent,
    FsGate,
    FsNotFoundError,
    FsNotObservedError,
    FsStaleVersionError,
    ReplaceIfVersion,
    Session,
    ToolDefinition,
    Unconditional,
    read_before_edit,
)
from codemode.pipeline.events import FsObserved
from codemode.pipeline.fs import (
    FsOutsideRootError,
    Version,
    WorkspaceStore,
    filesystem_tools,
    session_gate,
)

from conftest import error_text, inp


def fs_session(root: Path, **kwargs) -> Session:
    session = Session(**kwargs)
    for definition in filesystem_tools(root, session=session):
        session.register(definition)
    return session


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def session(root: Path):
    with fs_session(root) as session:
        yield session


async def call(session: Session, name: str, arguments: dict, *, agent: str | None = "main"):
    """One model call by ``agent`` (observations are per agent; docs/pipeline-spec.md §9)."""
    return await session.call(name, arguments, agent=agent)


def code(result) -> str | None:
    return result.error.info.code if result.error and result.error.info else None


def observed(session: Session) -> list[FsObserved]:
    return [e for e in session.log.read() if isinstance(e, FsObserved)]


def external_write(path: Path, text: str, *, keep_mtime: bool = False) -> None:
    """Change a file behind the session's back (optionally keeping its mtime)."""
    before = path.stat()
    path.write_text(text)
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


# -- the toolset --------------------------------------------------------------------------

def test_filesystem_tools_are_six_definitions_and_only_reads_are_concurrency_safe(root, session):
    definitions = filesystem_tools(root, session=session)
    assert all(isinstance(d, ToolDefinition) for d in definitions)
    assert [d.name for d in definitions] == ["read", "write", "edit", "list", "glob", "grep"]
    assert {
        name: session.classify(name, args)
        for name, args in [
            ("read", {"path": "a"}),
            ("list", {}),
            ("glob", {"pattern": "*"}),
            ("grep", {"pattern": "x"}),
            ("write", {"path": "a", "content": ""}),
            ("edit", {"path": "a", "old_string": "x", "new_string": "y"}),
        ]
    } == {
        "read": "parallel",
        "list": "parallel",
        "glob": "parallel",
        "grep": "parallel",
        "write": "exclusive",
        "edit": "exclusive",
    }


def test_a_root_that_is_not_a_directory_is_refused(tmp_path, session):
    with pytest.raises(NotADirectoryError):
        filesystem_tools(tmp_path / "missing", session=session)


def test_all_toolsets_of_a_session_share_its_one_gate(root, tmp_path, session):
    other_root = tmp_path / "other"
    other_root.mkdir()
    filesystem_tools(other_root, session=session)
    assert isinstance(session_gate(session), FsGate)
    assert session_gate(session) is session_gate(session)
    assert session_gate(session) is not session_gate(Session())


# -- read ---------------------------------------------------------------------------------

async def test_read_returns_the_text_and_a_window_of_lines(root, session):
    (root / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    assert (await call(session, "read", {"path": "a.txt"})).value == "one\ntwo\nthree\nfour\n"
    assert (
        await call(session, "read", {"path": "a.txt", "offset": 2, "limit": 2})
    ).value == "two\nthree\n"
    assert (await call(session, "read", {"path": "a.txt", "offset": 4})).value == "four\n"
    assert (await call(session, "read", {"path": "a.txt", "offset": 9})).value == ""


async def test_read_of_a_missing_file_fails_not_found_then_write_creates_it(root, session):
    result = await call(session, "read", {"path": "new.txt"})
    assert code(result) == "FS_NOT_FOUND"
    assert result.content == error_text('file not found: "new.txt"')

    result = await call(session, "write", {"path": "new.txt", "content": "hello\n"})
    assert result.is_error is False
    assert result.value == {"path": "new.txt", "bytes": 6, "created": True}
    assert result.text == 'wrote 6 bytes to "new.txt" (new file)'
    assert (root / "new.txt").read_text() == "hello\n"


async def test_read_of_a_directory_fails_not_a_file(root, session):
    (root / "sub").mkdir()
    result = await call(session, "read", {"path": "sub"})
    assert code(result) == "FS_NOT_A_FILE"
    assert result.error.message == '"sub" is not a regular file'


# -- edit ---------------------------------------------------------------------------------

async def test_edit_without_read_fails_not_observed_with_the_read_remedy(root, session):
    (root / "a.txt").write_text("hello\n")
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"}
    )
    assert code(result) == "FS_NOT_OBSERVED"
    assert result.error.message == 'edit requires reading "a.txt" first — read the file, then retry'
    assert result.content == error_text(
        'edit requires reading "a.txt" first — read the file, then retry'
    )
    assert (root / "a.txt").read_text() == "hello\n"


async def test_edit_after_read_replaces_the_text(root, session):
    (root / "a.txt").write_text("hello world\n")
    await call(session, "read", {"path": "a.txt"})
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "world", "new_string": "there"}
    )
    assert result.value == {"path": "a.txt", "replacements": 1}
    assert result.text == 'edited "a.txt" (1 replacement)'
    assert (root / "a.txt").read_text() == "hello there\n"


async def test_edit_after_an_external_change_fails_stale_with_the_re_read_remedy(root, session):
    (root / "a.txt").write_text("hello\n")
    await call(session, "read", {"path": "a.txt"})
    external_write(root / "a.txt", "HELLO\n")
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "HELLO", "new_string": "bye"}
    )
    assert code(result) == "FS_STALE_VERSION"
    assert (
        result.error.message
        == '"a.txt" changed since it was last read — re-read the file, then retry'
    )
    assert (root / "a.txt").read_text() == "HELLO\n"

    await call(session, "read", {"path": "a.txt"})
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "HELLO", "new_string": "bye"}
    )
    assert result.is_error is False
    assert (root / "a.txt").read_text() == "bye\n"


async def test_a_same_size_change_with_the_same_mtime_is_still_stale(root, session):
    (root / "a.txt").write_text("aaaa\n")
    await call(session, "read", {"path": "a.txt"})
    external_write(root / "a.txt", "bbbb\n", keep_mtime=True)
    result = await call(session, "edit", {"path": "a.txt", "old_string": "bbbb", "new_string": "c"})
    assert code(result) == "FS_STALE_VERSION"


async def test_successive_edits_need_no_re_read(root, session):
    (root / "a.txt").write_text("a b c\n")
    await call(session, "read", {"path": "a.txt"})
    for old, new in [("a", "x"), ("b", "y"), ("c", "z")]:
        assert (
            await call(session, "edit", {"path": "a.txt", "old_string": old, "new_string": new})
        ).is_error is False
    assert (root / "a.txt").read_text() == "x y z\n"


async def test_a_read_window_authorizes_an_edit_anywhere_in_the_file(root, session):
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    await call(session, "read", {"path": "a.txt", "offset": 1, "limit": 1})
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "three", "new_string": "3"}
    )
    assert result.is_error is False
    assert (root / "a.txt").read_text() == "one\ntwo\n3\n"


async def test_edit_of_a_file_read_as_missing_fails_not_found(root, session):
    await call(session, "read", {"path": "a.txt"})
    result = await call(session, "edit", {"path": "a.txt", "old_string": "x", "new_string": "y"})
    assert code(result) == "FS_NOT_FOUND"
    assert result.error.message == 'file not found: "a.txt"'


async def test_edit_of_a_file_deleted_after_the_read_is_stale(root, session):
    (root / "a.txt").write_text("x\n")
    await call(session, "read", {"path": "a.txt"})
    (root / "a.txt").unlink()
    result = await call(session, "edit", {"path": "a.txt", "old_string": "x", "new_string": "y"})
    assert code(result) == "FS_STALE_VERSION"
    assert (
        result.error.message
        == '"a.txt" was removed since it was last read — re-read the file, then retry'
    )
    assert not (root / "a.txt").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"old_string": "nope", "new_string": "x"}, 'old_string not found in "a.txt"'),
        (
            {"old_string": "ab", "new_string": "x"},
            ('old_string occurs 2 times in "a.txt"; include more context to make it unique, or '
             'set replace_all'),
        ),
        ({"old_string": "", "new_string": "x"}, "old_string must not be empty"),
        (
            {"old_string": "ab", "new_string": "ab"},
            "old_string and new_string are identical; nothing to change",
        ),
    ],
)
async def test_an_edit_that_cannot_apply_fails_and_leaves_the_file(
    root, session, arguments, message
):
    (root / "a.txt").write_text("ab ab\n")
    await call(session, "read", {"path": "a.txt"})
    result = await call(session, "edit", {"path": "a.txt", **arguments})
    assert code(result) == "FS_EDIT_FAILED"
    assert result.error.message == message
    assert (root / "a.txt").read_text() == "ab ab\n"


async def test_replace_all_replaces_every_occurrence(root, session):
    (root / "a.txt").write_text("ab ab ab\n")
    await call(session, "read", {"path": "a.txt"})
    result = await call(
        session,
        "edit",
        {"path": "a.txt", "old_string": "ab", "new_string": "c", "replace_all": True},
    )
    assert result.value == {"path": "a.txt", "replacements": 3}
    assert (root / "a.txt").read_text() == "c c c\n"


async def test_edit_of_bytes_that_are_not_utf8_fails_not_text(root, session):
    (root / "b.bin").write_bytes(b"\xff\xfeab")
    await call(session, "read", {"path": "b.bin"})
    result = await call(session, "edit", {"path": "b.bin", "old_string": "ab", "new_string": "c"})
    assert code(result) == "FS_NOT_TEXT"
    assert (root / "b.bin").read_bytes() == b"\xff\xfeab"


# -- write --------------------------------------------------------------------------------

async def test_write_over_an_unread_existing_file_fails_not_observed(root, session):
    (root / "a.txt").write_text("keep\n")
    result = await call(session, "write", {"path": "a.txt", "content": "lost\n"})
    assert code(result) == "FS_NOT_OBSERVED"
    assert (
        result.error.message
        == '"a.txt" already exists and was not read first — read the file, then retry'
    )
    assert (root / "a.txt").read_text() == "keep\n"


async def test_write_after_read_replaces_the_file(root, session):
    (root / "a.txt").write_text("old\n")
    await call(session, "read", {"path": "a.txt"})
    result = await call(session, "write", {"path": "a.txt", "content": "new\n"})
    assert result.value == {"path": "a.txt", "bytes": 4, "created": False}
    assert (root / "a.txt").read_text() == "new\n"


async def test_write_after_an_external_change_fails_stale(root, session):
    (root / "a.txt").write_text("old\n")
    await call(session, "read", {"path": "a.txt"})
    external_write(root / "a.txt", "theirs\n")
    result = await call(session, "write", {"path": "a.txt", "content": "mine\n"})
    assert code(result) == "FS_STALE_VERSION"
    assert (
        result.error.message
        == '"a.txt" changed since it was last read — re-read the file, then retry'
    )
    assert (root / "a.txt").read_text() == "theirs\n"


async def test_write_of_a_file_created_after_it_was_read_as_missing_fails_not_observed(
    root, session
):
    await call(session, "read", {"path": "a.txt"})
    (root / "a.txt").write_text("theirs\n")
    result = await call(session, "write", {"path": "a.txt", "content": "mine\n"})
    assert code(result) == "FS_NOT_OBSERVED"
    assert (root / "a.txt").read_text() == "theirs\n"


async def test_write_creates_missing_parent_directories(root, session):
    result = await call(session, "write", {"path": "deep/er/a.txt", "content": "x"})
    assert result.value == {"path": "deep/er/a.txt", "bytes": 1, "created": True}
    assert (root / "deep" / "er" / "a.txt").read_text() == "x"


async def test_write_is_atomic_and_keeps_the_permission_bits(root, session):
    target = root / "run.sh"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o750)
    await call(session, "read", {"path": "run.sh"})
    await call(session, "write", {"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})
    assert target.read_text() == "#!/bin/sh\necho hi\n"
    assert target.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]


async def test_a_file_the_session_wrote_can_be_edited_without_a_read(root, session):
    await call(session, "write", {"path": "a.txt", "content": "draft\n"})
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "draft", "new_string": "final"}
    )
    assert result.is_error is False
    assert (root / "a.txt").read_text() == "final\n"


async def test_a_file_the_session_wrote_can_be_written_again_without_a_read(root, session):
    assert (await call(session, "write", {"path": "a.txt", "content": "x"})).value[
        "created"
    ] is True
    result = await call(session, "write", {"path": "a.txt", "content": "y"})
    assert result.value == {"path": "a.txt", "bytes": 1, "created": False}
    assert (root / "a.txt").read_text() == "y"

# -- agents ---------------------------------------------------------------------------------

async def test_observations_belong_to_the_agent_that_made_them(root, session):
    (root / "a.txt").write_text("x\n")
    await call(session, "read", {"path": "a.txt"}, agent="alice")
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "x", "new_string": "y"}, agent="bob"
    )
    assert code(result) == "FS_NOT_OBSERVED"
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "x", "new_string": "y"}, agent="alice"
    )
    assert result.is_error is False
    assert session_gate(session).state("bob", str((root / "a.txt").resolve())) == ("unseen", None)


async def test_an_edit_without_an_agent_is_never_observed(root, session):
    (root / "a.txt").write_text("x\n")
    await call(session, "read", {"path": "a.txt"}, agent=None)
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "x", "new_string": "y"}, agent=None
    )
    assert code(result) == "FS_NOT_OBSERVED"
    assert result.error.message == 'edit requires reading "a.txt" first — read the file, then retry'


async def test_forgetting_observations_requires_a_new_read(root, session):
    (root / "a.txt").write_text("x\n")
    await call(session, "read", {"path": "a.txt"})
    session_gate(session).clear()
    result = await call(session, "edit", {"path": "a.txt", "old_string": "x", "new_string": "y"})
    assert code(result) == "FS_NOT_OBSERVED"


async def test_sub_calls_and_direct_calls_of_an_agent_share_observations(root, session):
    (root / "a.txt").write_text("one\n")
    (root / "b.txt").write_text("two\n")
    token = object()

    async def run(name, arguments, **kw):
        return await session.execute(inp(name, arguments, agent="main", **kw))

    await run("read", {"path": "a.txt"}, parent=token, call_id="outer:code:1")
    assert (
        await run("edit", {"path": "a.txt", "old_string": "one", "new_string": "1"})
    ).is_error is False
    await run("read", {"path": "b.txt"}, call_id="c2")
    sub = await run("edit", {"path": "b.txt", "old_string": "two", "new_string": "2"}, parent=token,
                    call_id="outer:code:2")
    assert sub.is_error is False
    assert (root / "a.txt").read_text() == "1\n" and (root / "b.txt").read_text() == "2\n"


async def test_a_gate_without_the_policy_makes_writes_and_edits_unconditional(root):
    (root / "a.txt").write_text("x\n")
    with Session() as session:
        gate = FsGate(session.log.append)
        dispose = read_before_edit(gate)
        for definition in filesystem_tools(root, session=session, gate=gate):
            session.register(definition)
        assert (
            code(await call(session, "write", {"path": "a.txt", "content": "y\n"}))
            == "FS_NOT_OBSERVED"
        )
        dispose()
        assert (await call(session, "write", {"path": "a.txt", "content": "y\n"})).is_error is False
        result = await call(
            session, "edit", {"path": "a.txt", "old_string": "y", "new_string": "z"}, agent=None
        )
        assert result.is_error is False
        assert [e.agent for e in observed(session)] == ["main", None]
    assert (root / "a.txt").read_text() == "z\n"

# -- confinement ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "OUTSIDE_ABSOLUTE"])
@pytest.mark.parametrize(
    "tool_call",
    [
        ("read", {}),
        ("write", {"content": "x"}),
        ("edit", {"old_string": "a", "new_string": "b"}),
        ("list", {}),
        ("grep", {"pattern": "a"}),
    ],
)
async def test_traversal_out_of_the_root_is_refused(root, session, path, tool_call):
    outside = root.parent / "outside.txt"
    outside.write_text("a secret\n")
    if path == "OUTSIDE_ABSOLUTE":
        path = str(outside)
    name, extra = tool_call
    result = await call(session, name, {"path": path, **extra})
    assert code(result) == "FS_OUTSIDE_ROOT"
    assert result.error.message == f'path "{path}" is outside the workspace root'
    assert outside.read_text() == "a secret\n"
    assert observed(session) == []


async def test_dot_dot_that_stays_inside_and_absolute_paths_inside_the_root_are_fine(root, session):
    (root / "sub").mkdir()
    (root / "a.txt").write_text("x\n")
    assert (await call(session, "read", {"path": "sub/../a.txt"})).value == "x\n"
    assert (await call(session, "read", {"path": str(root / "a.txt")})).value == "x\n"
    result = await call(session, "edit", {"path": "./a.txt", "old_string": "x", "new_string": "y"})
    assert result.value == {"path": "a.txt", "replacements": 1}


@pytest.fixture
def outside(root: Path) -> Path:
    directory = root.parent / "elsewhere"
    directory.mkdir()
    (directory / "secret.txt").write_text("secret\n")
    return directory


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read", {"path": "link/secret.txt"}),
        ("read", {"path": "leak.txt"}),
        ("write", {"path": "link/new.txt", "content": "x"}),
        ("write", {"path": "dangling.txt", "content": "x"}),
        ("edit", {"path": "link/secret.txt", "old_string": "secret", "new_string": "x"}),
        ("list", {"path": "link"}),
        ("grep", {"pattern": "secret", "path": "link"}),
    ],
)
async def test_a_symlink_leading_out_of_the_root_is_refused(
    root, session, outside, name, arguments
):
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "dangling.txt").symlink_to(outside / "created-through-link.txt")
    result = await call(session, name, arguments)
    assert code(result) == "FS_OUTSIDE_ROOT"
    assert (
        result.error.message
        == f'path "{arguments["path"]}" leads outside the workspace root through a symlink'
    )
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n"


async def test_searches_skip_symlinks_that_lead_out_of_the_root(root, session, outside):
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "own.txt").write_text("secret too\n")
    assert (await call(session, "glob", {"pattern": "**"})).value == ["own.txt"]
    grep = await call(session, "grep", {"pattern": "secret"})
    assert grep.value == {
        "matches": [{"path": "own.txt", "line": 1, "text": "secret too"}],
        "truncated": False,
    }
    assert (await call(session, "list", {})).value == ["leak.txt@", "link@", "own.txt"]


async def test_a_symlink_inside_the_root_shares_its_target_s_observation(root, session):
    (root / "real.txt").write_text("x\n")
    (root / "alias.txt").symlink_to(root / "real.txt")
    await call(session, "read", {"path": "alias.txt"})
    result = await call(session, "edit", {"path": "real.txt", "old_string": "x", "new_string": "y"})
    assert result.is_error is False
    assert (root / "alias.txt").is_symlink()
    assert (root / "real.txt").read_text() == "y\n"


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "a/../../*"])
async def test_glob_patterns_that_reach_out_are_refused(session, pattern):
    result = await call(session, "glob", {"pattern": pattern})
    assert code(result) == "FS_OUTSIDE_ROOT"
    assert result.error.message == f'glob pattern "{pattern}" reaches outside the workspace root'


# -- list, glob, grep ---------------------------------------------------------------------

@pytest.fixture
def tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "main.py").write_text("import os\nprint('hi')\n")
    (root / "src" / "pkg" / "util.py").write_text("def helper():\n    return 1\n")
    (root / "README.md").write_text("# project\nprint nothing\n")
    (root / "blob.bin").write_bytes(b"print\x00\x01")
    return root


async def test_list_marks_directories(tree, session):
    result = await call(session, "list", {})
    assert result.value == ["README.md", "blob.bin", "src/"]
    assert result.text == "README.md\nblob.bin\nsrc/"
    assert (await call(session, "list", {"path": "src"})).value == ["main.py", "pkg/"]
    assert code(await call(session, "list", {"path": "README.md"})) == "FS_NOT_A_DIRECTORY"
    assert code(await call(session, "list", {"path": "nope"})) == "FS_NOT_FOUND"


async def test_glob_matches_root_relative_paths(tree, session):
    assert (await call(session, "glob", {"pattern": "**/*.py"})).value == [
        "src/main.py",
        "src/pkg/util.py",
    ]
    assert (await call(session, "glob", {"pattern": "src/*.py"})).value == ["src/main.py"]
    assert (await call(session, "glob", {"pattern": "*.md"})).value == ["README.md"]
    assert (await call(session, "glob", {"pattern": "*.rs"})).text == "no files match"


async def test_grep_finds_lines_in_text_files(tree, session):
    result = await call(session, "grep", {"pattern": r"^print"})
    assert result.value == {
        "matches": [{"path": "README.md", "line": 2, "text": "print nothing"},
                    {"path": "src/main.py", "line": 2, "text": "print('hi')"}],
        "truncated": False,
    }
    assert result.text == "README.md:2:print nothing\nsrc/main.py:2:print('hi')"
    only_py = await call(session, "grep", {"pattern": "print|return", "glob": "*.py"})
    assert [m["path"] for m in only_py.value["matches"]] == ["src/main.py", "src/pkg/util.py"]
    in_dir = await call(session, "grep", {"pattern": "def", "path": "src/pkg"})
    assert in_dir.value["matches"] == [
        {"path": "src/pkg/util.py", "line": 1, "text": "def helper():"}
    ]


async def test_grep_stops_at_the_match_cap(root):
    (root / "many.txt").write_text("hit\n" * 5)
    session = Session()
    for definition in filesystem_tools(root, session=session, max_grep_matches=3):
        session.register(definition)
    result = await call(session, "grep", {"pattern": "hit"})
    assert result.value["truncated"] is True
    assert len(result.value["matches"]) == 3
    assert result.text.endswith("\n[stopped after 3 matches]")


async def test_grep_with_a_bad_regex_fails_invalid_args(session):
    result = await call(session, "grep", {"pattern": "("})
    assert code(result) == "INVALID_ARGS"
    assert result.error.message.startswith(
        'invalid arguments: "pattern" is not a valid regular expression'
    )


async def test_searches_do_not_authorize_edits(tree, session):
    await call(session, "grep", {"pattern": "import"})
    await call(session, "glob", {"pattern": "**"})
    result = await call(
        session, "edit", {"path": "src/main.py", "old_string": "os", "new_string": "sys"}
    )
    assert code(result) == "FS_NOT_OBSERVED"


# -- fs/observed events --------------------------------------------------------------------

async def test_each_observation_is_logged_as_fs_observed(root, log_path):
    with fs_session(root, log=log_path) as session:
        (root / "a.txt").write_text("one\n")
        key = str((root / "a.txt").resolve())
        await call(session, "read", {"path": "a.txt"}, agent="alice")
        await call(
            session,
            "edit",
            {"path": "a.txt", "old_string": "one", "new_string": "two"},
            agent="alice",
        )
        await call(session, "read", {"path": "b.txt"}, agent="alice")
        await call(session, "write", {"path": "b.txt", "content": "new\n"}, agent="alice")
        await call(
            session, "edit", {"path": "a.txt", "old_string": "two", "new_string": "x"}, agent="bob"
        )  # refused
        events = observed(session)
        assert [(e.key, e.state, e.agent) for e in events] == [
            (key, "present", "alice"),
            (key, "present", "alice"),
            (str((root / "b.txt").resolve()), "absent", "alice"),
            (str((root / "b.txt").resolve()), "present", "alice"),
        ]
        gate = session_gate(session)
        assert gate.state("alice", key) == ("present", events[1].version)
        assert gate.state("alice", events[3].key) == ("present", events[3].version)
        _mtime_ns, size, digest = events[1].version.split(":")
        assert (int(size), len(digest)) == (4, 64)
        assert events[2].version is msgspec.UNSET


async def test_the_version_of_an_observation_is_mtime_size_and_sha256(root, session):
    (root / "a.txt").write_text("hi\n")
    await call(session, "read", {"path": "a.txt"})
    [event] = observed(session)
    stat = (root / "a.txt").stat()
    digest = hashlib.sha256(b"hi\n").hexdigest()
    assert event.version == f"{stat.st_mtime_ns}:3:{digest}"
    assert str(Version(stat.st_mtime_ns, 3, digest)) == event.version


async def test_an_observer_that_raises_fails_the_call_after_the_write(root, session):
    def refuse(agent, key, state, version):
        raise RuntimeError("observer refused")

    session_gate(session).on_observed(refuse)
    result = await call(session, "write", {"path": "a.txt", "content": "x"})
    assert result.is_error is True
    assert result.error.message == "observer refused"
    assert (root / "a.txt").read_text() == "x"


# -- code mode ------------------------------------------------------------------------------

async def code_mode(session: Session) -> None:
    """Mount Code Mode on ``session`` in mode ``both`` (the tests call the tools directly
    too), or skip when the sandbox cannot run here."""
    codemode = pytest.importorskip("codemode")
    session.set_mode("both")
    try:
        codemode.CodeMode(session)
    except Exception as exc:  # pragma: no cover - environment without the sandbox
        pytest.skip(f"CodeMode unavailable: {exc}")
    probe = await session.call("run_code", {"code": "1", "description": "probe"})
    if probe.is_error:  # pragma: no cover
        pytest.skip(f"sandbox not usable here: {probe.error.message}")


async def test_a_read_in_a_sub_call_authorizes_an_edit_in_a_later_direct_call(root, session):
    await code_mode(session)
    (root / "a.txt").write_text("hello\n")
    run = await session.call(
        "run_code", {"code": "read(path='a.txt')", "description": "read a file"}, agent="main"
    )
    assert run.is_error is False
    result = await call(
        session, "edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"}
    )
    assert result.is_error is False
    assert (root / "a.txt").read_text() == "bye\n"


async def test_a_direct_read_authorizes_an_edit_in_a_later_sub_call(root, session):
    await code_mode(session)
    (root / "a.txt").write_text("hello\n")
    await call(session, "read", {"path": "a.txt"})
    program = "edit(path='a.txt', old_string='hello', new_string='bye')"
    run = await session.call(
        "run_code", {"code": program, "description": "edit a file"}, agent="main"
    )
    assert run.is_error is False
    assert (root / "a.txt").read_text() == "bye\n"


async def test_an_edit_without_read_inside_a_program_is_a_rejection_with_the_remedy(root, session):
    await code_mode(session)
    (root / "a.txt").write_text("hello\n")
    program = (
        "try:\n"
        "    edit(path='a.txt', old_string='hello', new_string='bye')\n"
        "except ToolCallError as exc:\n"
        "    print(exc.message)\n"
    )
    run = await session.call(
        "run_code", {"code": program, "description": "edit a file"}, agent="main"
    )
    assert run.is_error is False
    assert run.value["logs"] == [
        'edit requires reading "a.txt" first — read the file, then retry\n'
    ]
    assert (root / "a.txt").read_text() == "hello\n"


# -- the store as a pipeline.FileStore --------------------------------------------------------

def test_the_workspace_store_is_a_file_store_enforcing_the_gate_s_conditions(root, tmp_path):
    store = WorkspaceStore(root)
    (tmp_path / "elsewhere").mkdir()
    (root / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (root / "a.txt").write_text("draft")
    key = store.resolve("a.txt")
    assert key == str((root / "a.txt").resolve()) and store.display(key) == "a.txt"
    with pytest.raises(FsOutsideRootError):
        store.resolve("link/x.txt")
    with pytest.raises(FsOutsideRootError):
        store.resolve("../x.txt")
    with pytest.raises(FsNotFoundError):
        store.read(store.resolve("missing.txt"))

    text, version = store.read(key)
    assert text == "draft"
    with pytest.raises(FsNotObservedError, match=r'"a\.txt" already exists and was not read first'):
        store.write(key, "blind", CreateIfAbsent())
    with pytest.raises(FsStaleVersionError, match=r'"a\.txt" changed since it was last read'):
        store.write(key, "stale", ReplaceIfVersion(f"0:5:{'0' * 64}"))
    new_version = store.write(key, "final", ReplaceIfVersion(version))
    assert store.read(key) == ("final", new_version)
    created = store.resolve("new.txt")
    store.write(created, "fresh", CreateIfAbsent())
    store.write(created, "anything", Unconditional())
    assert (root / "new.txt").read_text() == "anything"
    assert (root / "a.txt").read_text() == "final"
    assert list((tmp_path / "elsewhere").iterdir()) == []
