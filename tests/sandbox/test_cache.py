"""The component cache's listing and pruning (`sandbox/_cache.py`), on a real directory of
files named as the build and compile steps name their artifacts, and `codemode cache` run
as a user would, in a subprocess."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from codemode.sandbox._cache import _FileLock, cached_keys, prune, source_hash

CURRENT = source_hash()
OLD, OLDER = "0123456789abcdef01234567", "fedcba9876543210fedcba98"
ENGINE = "wasmtime50.0.1-epoch-fuel0-stack67108864"


def artifacts(key: str) -> list[str]:
    return [f"guest-{key}.wasm", f"guest-{key}-{ENGINE}.cwasm",
            f"guest-{key}-wasmtime49.0.0-epoch-fuel1-stack2097152.cwasm"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory with the current key, two older ones (one with the temporary file
    of an interrupted write), the locks and a file nobody's artifact."""
    monkeypatch.setenv("CODEMODE_CACHE_DIR", str(tmp_path))
    for age, (key, size) in enumerate([(CURRENT, 300), (OLD, 200), (OLDER, 100)]):
        for name in artifacts(key):
            (tmp_path / name).write_bytes(b"x" * size)
            os.utime(tmp_path / name, (1_700_000_000 - age * 86_400,) * 2)
    (tmp_path / f"guest-{OLDER}.wasmq1w2e3r4.tmp").write_bytes(b"x" * 50)
    os.utime(tmp_path / f"guest-{OLDER}.wasmq1w2e3r4.tmp", (1_700_000_000 - 2 * 86_400,) * 2)
    for other in ("build.lock", "compile.lock", "notes.txt", "guest-notahash.wasm",
                  f"guest-{OLD}0.wasm", f"guest-{OLD[:-1]}.wasm"):
        (tmp_path / other).write_bytes(b"")
    (tmp_path / f"guest-{'a' * 24}.wasm").mkdir()                   # named like ours, not ours
    (tmp_path / f"guest-{'b' * 24}.wasm").symlink_to(tmp_path / "notes.txt")
    return tmp_path


def test_the_keys_are_listed_newest_first_with_their_files_and_sizes(cache):
    keys = cached_keys()
    assert [k.key for k in keys] == [CURRENT, OLD, OLDER]
    assert [k.current for k in keys] == [True, False, False]
    assert [k.size_bytes for k in keys] == [900, 600, 350]
    assert keys[2].files == tuple(sorted([*artifacts(OLDER),
                                          f"guest-{OLDER}.wasmq1w2e3r4.tmp"]))
    assert keys[0].modified == 1_700_000_000


def test_pruning_removes_the_other_keys_and_nothing_else(cache):
    before = set(os.listdir(cache))
    pruned = prune()
    assert ([k.key for k in pruned.removed], pruned.files, pruned.size_bytes) == (
        [OLD, OLDER], 7, 950)
    removed = before - set(os.listdir(cache))
    assert removed == {*artifacts(OLD), *artifacts(OLDER),
                       f"guest-{OLDER}.wasmq1w2e3r4.tmp"}
    assert [k.key for k in cached_keys()] == [CURRENT]


def test_a_dry_run_reports_the_same_and_removes_nothing_nor_takes_a_lock(cache):
    for lock in ("build.lock", "compile.lock"):
        (cache / lock).unlink()
    before = sorted(os.listdir(cache))
    assert prune(dry_run=True) == prune(dry_run=True)
    assert prune(dry_run=True).size_bytes == 950
    assert sorted(os.listdir(cache)) == before       # no lock file made either


def test_pruning_everything_removes_the_current_key_too(cache):
    assert [k.key for k in prune(everything=True).removed] == [CURRENT, OLD, OLDER]
    assert cached_keys() == []
    assert sorted(os.listdir(cache)) == sorted([
        "build.lock", "compile.lock", "guest-notahash.wasm", "notes.txt", f"guest-{OLD}0.wasm",
        f"guest-{OLD[:-1]}.wasm", f"guest-{'a' * 24}.wasm", f"guest-{'b' * 24}.wasm"])


def test_a_missing_cache_directory_holds_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEMODE_CACHE_DIR", str(tmp_path / "absent"))
    assert cached_keys() == []
    assert prune().files == 0
    assert not (tmp_path / "absent").exists()


@pytest.mark.parametrize("lock", ["build.lock", "compile.lock"])
def test_pruning_waits_for_a_build_or_compile_in_progress(cache, lock):
    with _FileLock(cache / lock):          # another process's build, from its lock's side
        pruning = threading.Thread(target=prune)
        pruning.start()
        pruning.join(0.3)
        assert pruning.is_alive()          # it cannot have begun: the lock is held
        assert (cache / f"guest-{OLD}.wasm").exists()
    pruning.join(30)
    assert not pruning.is_alive()
    assert not (cache / f"guest-{OLD}.wasm").exists()


def codemode(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEMODE_CACHE_DIR": str(cache), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "codemode", "cache", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_the_command_lists_one_line_per_key_on_stdout(cache):
    done = codemode(cache, "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [CURRENT, OLD, OLDER]
    assert lines[0].endswith("  current") and not lines[1].endswith("current")
    assert done.stderr.strip() == f"{cache}: 3 component(s), 0.0 MiB"


def test_the_command_prunes_and_says_what_it_removed(cache):
    dry = codemode(cache, "prune", "--dry-run")
    assert [line.split()[0] for line in dry.stdout.splitlines()] == [OLD, OLDER]
    assert dry.stderr.strip() == f"{cache}: would remove 2 component(s), 7 file(s), 0.0 MiB"
    done = codemode(cache, "prune")
    assert (done.returncode, done.stdout) == (0, dry.stdout)
    assert done.stderr.strip() == f"{cache}: removed 2 component(s), 7 file(s), 0.0 MiB"
    assert [k.key for k in cached_keys()] == [CURRENT]


def test_a_build_names_what_older_components_take(cache):
    from codemode.sandbox._cache import older_components as _older_components

    assert _older_components() == ""          # under 1 MiB: not worth a word
    os.truncate(cache / f"guest-{OLD}.wasm", 3 << 20)       # sparse: no disk used
    os.truncate(cache / f"guest-{CURRENT}.wasm", 50 << 20)  # the current key is not older
    assert _older_components() == (f" (older components in {cache} take 3.0 MiB; "
                                   "`codemode cache prune` removes them)")


def test_a_cache_path_that_is_a_file_is_one_error_line_and_exit_1(tmp_path):
    (tmp_path / "file").write_text("")
    for command in (["list"], ["prune"]):
        done = codemode(tmp_path / "file", *command)
        assert done.returncode == 1, done
        assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_a_run_with_an_unusable_cache_path_fails_naming_the_cache(tmp_path):
    (tmp_path / "file").write_text("")
    program = tmp_path / "p.py"
    program.write_text("1 + 1\n")
    env = {**os.environ, "CODEMODE_CACHE_DIR": str(tmp_path / "file")}
    done = subprocess.run([sys.executable, "-m", "codemode", "run", str(program)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1
    assert done.stderr.startswith(f"codemode: code run failed (runtime): the component cache "
                                  f"{tmp_path / 'file'} cannot be used (")
    assert "point CODEMODE_CACHE_DIR at a writable directory" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("inside", [True, False])
def test_only_an_error_of_a_file_in_the_cache_is_reported_as_the_cache(cache, monkeypatch,
                                                                       inside):
    from codemode.sandbox import SandboxUnavailable, _component

    where = str(cache / "build.lock") if inside else "/tmp/somewhere-else"

    def failing(engine, config):
        raise PermissionError(13, "Permission denied", where)
    monkeypatch.setattr(_component, "_load_component", failing)
    expected = SandboxUnavailable if inside else PermissionError
    with pytest.raises(expected) as caught:
        _component.load_component(None, None)
    assert ("cannot be used" in str(caught.value)) is inside
