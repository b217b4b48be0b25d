"""The snapshot leaves no free holes of small sizes between its objects
(`guest_main._fill_free_chunks`): a run's small objects are allocated past the last of
the snapshot's objects, together, instead of one or two to a page across the image (each
page written being a copy of the image's)."""

from codemode.sandbox import RunRequest, WasmSandbox, _pool, _wasm

from .conftest import noop

# The blocks first, 200 of each chunk size the snapshot fills; then the snapshot's
# objects: the frozen generation, unfrozen into the oldest.
LAYOUT = """
blocks = [b"\\x01" * (size - 21) for size in range(32, 513, 16) for _ in range(200)]
import gc
gc.unfreeze()
ceiling = max(map(id, gc.get_objects(generation=2)))
[sum(id(b) < ceiling for b in blocks), len(blocks)]
"""


def test_a_runs_small_objects_are_allocated_past_the_snapshots_objects(monkeypatch) -> None:
    # An instance of its own, straight from the snapshot: not one the pool prepared ahead,
    # whose warm-up run freed memory of its own (on pages that run already wrote).
    monkeypatch.setattr(_wasm, "POOL", _pool.InstancePool(_wasm._in_background, size=0))
    out = WasmSandbox().run(RunRequest(code=LAYOUT), noop)
    assert out.status == "ok", out.error
    below, made = out.value
    # Some reuse what the run itself freed of the snapshot's (89 of the 6,200 when
    # measured); before the holes were filled, all 6,200 went into holes.
    assert below < made // 10, (below, made)
