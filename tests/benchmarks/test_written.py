"""`python -m benchmarks.written`: the pages a fresh run writes, and whose bytes changed."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _peers, written

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc/self/pagemap")


def test_a_run_that_writes_more_writes_more_pages_and_its_words_lie_in_them():
    peer = _peers.make("sandbox")
    try:
        small = written.watch(peer, "x = 1")
        # ~2 MiB of new data, some of it in the image's free end: more of its pages written
        # (what grows the memory past the image is not the image's, and not counted).
        large = written.watch(peer, "x = [str(i) * 20 for i in range(20_000)]")
        found = written.owners(peer, small.changed, 5)
    finally:
        peer.close()
    assert 0 < small.unchanged < small.pages
    assert small.changed and len({a // 4096 for a in small.changed}) <= small.pages
    assert large.pages > small.pages
    kinds = {kind for _, kind in found["pages"]}
    assert "code" in kinds            # the runtime's bytecode is specialized as it runs
    assert sum(n for _, n in found["words"]) <= len(small.changed)


def test_the_command_prints_its_counts_and_with_objects_who_owns_them():
    done = subprocess.run([sys.executable, "-m", "benchmarks.written", "--objects",
                           "--top", "3"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("written pages ") and "changed words" in lines[0]
    assert lines[1].startswith("pages by kind of object: ")
    assert len(lines) == 5                      # the counts, the kinds, three objects


def test_a_program_that_fails_is_an_error_naming_its_exception():
    done = subprocess.run([sys.executable, "-m", "benchmarks.written", "--program", "1/0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and "ZeroDivisionError" in done.stderr
    assert done.stdout == ""
