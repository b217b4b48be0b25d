"""The filesystem gate (PIPELINE.md §9)."""

import pytest

from pipeline import FsGate, LocalFileStore, Session, Signal, fs_tools, read_before_edit
from pipeline.events import FsObserved

from conftest import error_text, inp


@pytest.fixture
def workspace(tmp_path):
    store = LocalFileStore(tmp_path)
    session = Session()
    gate = FsGate(session.log.append)
    dispose = read_before_edit(gate, display=store.display)
    for defn in fs_tools(store, gate):
        session.register(defn)
    return session, tmp_path, gate, dispose


async def call(session, name, args, *, agent="main", parent=None, call_id="c1"):
    return await session.execute(inp(name, args, agent=agent, parent=parent, call_id=call_id))


async def test_edit_without_read_is_not_observed_with_a_remedy(workspace):
    session, root, _, _ = workspace
    (root / "a.txt").write_text("hello")
    result = await call(session, "edit", {"path": "a.txt", "old": "hello", "new": "bye"})
    assert result.content == error_text('edit requires reading "a.txt" first — read the file, then retry')
    assert result.error.code == "FS_NOT_OBSERVED"
    assert (root / "a.txt").read_text() == "hello"


async def test_edit_after_read_succeeds_and_records_the_new_version(workspace):
    session, root, gate, _ = workspace
    (root / "a.txt").write_text("hello world")
    assert (await call(session, "read", {"path": "a.txt"})).value == "hello world"
    result = await call(session, "edit", {"path": "a.txt", "old": "world", "new": "there"})
    assert result.value == "edited a.txt"
    assert (root / "a.txt").read_text() == "hello there"
    # the write made it present at the new version: a second edit needs no re-read
    assert (await call(session, "edit", {"path": "a.txt", "old": "there", "new": "again"})).is_error is False
    observed = [(e.state, e.agent) for e in session.log.read() if isinstance(e, FsObserved)]
    assert observed == [("present", "main")] * 3


async def test_edit_after_an_external_change_is_stale_with_a_remedy(workspace):
    session, root, _, _ = workspace
    (root / "a.txt").write_text("v1")
    await call(session, "read", {"path": "a.txt"})
    (root / "a.txt").write_text("v2 from someone else")
    result = await call(session, "edit", {"path": "a.txt", "old": "v2", "new": "v3"})
    assert result.content == error_text('"a.txt" changed since it was last read — re-read the file, then retry')
    assert result.error.code == "FS_STALE_VERSION"


async def test_write_over_an_unread_existing_file_is_not_observed(workspace):
    session, root, _, _ = workspace
    (root / "a.txt").write_text("precious")
    result = await call(session, "write", {"path": "a.txt", "content": "overwritten"})
    assert result.content == error_text('"a.txt" already exists and was not read first — read the file, then retry')
    assert result.error.code == "FS_NOT_OBSERVED"
    assert (root / "a.txt").read_text() == "precious"


async def test_write_creates_new_files_and_replaces_read_ones(workspace):
    session, root, _, _ = workspace
    assert (await call(session, "write", {"path": "new.txt", "content": "x"})).is_error is False
    assert (await call(session, "write", {"path": "new.txt", "content": "y"})).is_error is False
    assert (root / "new.txt").read_text() == "y"


async def test_reading_a_missing_file_records_absent_then_edit_is_not_found(workspace):
    session, _, gate, _ = workspace
    result = await call(session, "read", {"path": "missing.txt"})
    assert result.error.code == "FS_NOT_FOUND"
    edit = await call(session, "edit", {"path": "missing.txt", "old": "a", "new": "b"})
    assert edit.content == error_text('file not found: "missing.txt"')
    assert edit.error.code == "FS_NOT_FOUND"


async def test_a_read_in_a_sub_call_authorizes_an_edit_in_a_later_native_call_and_vice_versa(workspace):
    session, root, _, _ = workspace
    (root / "a.txt").write_text("one")
    (root / "b.txt").write_text("two")
    token = object()
    await call(session, "read", {"path": "a.txt"}, parent=token, call_id="outer:code:1")
    assert (await call(session, "edit", {"path": "a.txt", "old": "one", "new": "1"})).is_error is False
    await call(session, "read", {"path": "b.txt"})
    sub = await call(session, "edit", {"path": "b.txt", "old": "two", "new": "2"}, parent=token, call_id="outer:code:2")
    assert sub.is_error is False and (root / "b.txt").read_text() == "2"


async def test_observations_are_per_agent_and_agentless_edits_are_refused(workspace):
    session, root, _, _ = workspace
    (root / "a.txt").write_text("x")
    await call(session, "read", {"path": "a.txt"}, agent="reader")
    other = await call(session, "edit", {"path": "a.txt", "old": "x", "new": "y"}, agent="writer")
    nobody = await call(session, "edit", {"path": "a.txt", "old": "x", "new": "y"}, agent=None)
    assert other.error.code == nobody.error.code == "FS_NOT_OBSERVED"


async def test_without_the_policy_writes_and_edits_are_unconditional(workspace):
    session, root, _, dispose = workspace
    dispose()
    (root / "a.txt").write_text("x")
    assert (await call(session, "write", {"path": "a.txt", "content": "y"})).is_error is False
    assert (await call(session, "edit", {"path": "a.txt", "old": "y", "new": "z"})).is_error is False
    assert (root / "a.txt").read_text() == "z"


async def test_paths_cannot_escape_the_workspace(workspace):
    session, _, _, _ = workspace
    result = await call(session, "read", {"path": "../outside.txt"})
    assert result.content == error_text('"../outside.txt" is outside the workspace')


async def test_a_raising_observation_listener_fails_the_call_after_the_mutation(workspace):
    session, root, gate, _ = workspace

    def listener(agent, key, state, version):
        raise RuntimeError("listener broke")

    gate.on_observed(listener)
    result = await call(session, "write", {"path": "n.txt", "content": "made"})
    assert result.error.message == "listener broke"
    assert (root / "n.txt").read_text() == "made"
