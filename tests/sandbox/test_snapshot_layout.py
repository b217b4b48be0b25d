"""The snapshot leaves no free holes of small sizes between its objects
(`guest_main._fill_free_chunks`): a run's small objects are allocated past the last of
the snapshot's objects, together, instead of one or two to a page across the image (each
page written being a copy of the image's)."""

from codemode.sandbox import RunRequest, WasmSandbox

from .conftest import noop

# The blocks first (before the program makes anything else that could free memory), then
# the snapshot's objects: the frozen generation, unfrozen into the oldest.
LAYOUT = """
blocks = [b"\\x01" * (size - 21) for size in range(32, 513, 16)]
import gc
gc.unfreeze()
ceiling = max(map(id, gc.get_objects(generation=2)))
[id(b) > ceiling for b in blocks]
"""


def test_a_runs_small_objects_are_allocated_past_the_snapshots_objects() -> None:
    out = WasmSandbox().run(RunRequest(code=LAYOUT), noop)
    assert out.status == "ok", out.error
    above = out.value
    # A few may reuse memory the run itself freed below the last object; before the
    # holes were filled none of the 31 sizes landed past it.
    assert sum(above) >= len(above) * 2 // 3, above
