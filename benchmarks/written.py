"""Which pages of a fresh run's linear memory the run writes, and which of the snapshot's
objects own the bytes it changes.

    python -m benchmarks.written [--program CODE] [--objects] [--top N]

A fresh run maps the snapshot's image from the compiled `.cwasm` file, copy-on-write
(wasmtime's on-demand allocator, the sandbox's default): every page the guest writes is a
copy, one write fault. Here `--program` (default `x = 1`) runs three times, then once more
with its instance watched: its image's bytes are read when it is instantiated and again
when its Store closes, and `/proc/self/pagemap` says which of the image's pages are the
process's own by then (written) rather than the file's. Printed: written pages, how many of
them hold the same bytes as before (written and put back: a reference count raised and
lowered), and the 4-byte words that changed.

With `--objects`, a second fresh instance (the same snapshot, so the same addresses) runs a
program that lists the snapshot's objects (the garbage collector's frozen ones and what
they refer to: `id` is the address in linear memory) and names the object each changed
word lies in: the pages per kind of object, then the `--top` objects by changed words.
Words in no object are the interpreter's own memory (dict key tables, list item arrays,
the allocator's free blocks, the C stack): "?".

Linux only (`/proc/self/pagemap`); the sandbox on its default Engine (the image must be a
file mapping). A diagnostic, not a figure for `benchmarks.run`.
"""

from __future__ import annotations

import argparse
import ctypes
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import _peers

PAGE = 4096
TRIVIAL = "x = 1"


@dataclass
class Written:
    """One watched run: `pages` written (the process's own by the Store's close), `unchanged`
    of them holding the bytes they held when instantiated, and the linear-memory addresses
    of the 4-byte words that changed (`changed`)."""

    pages: int = 0
    unchanged: int = 0
    changed: list[int] = field(default_factory=list)


def _images() -> set[tuple[int, int]]:
    """The address ranges of the snapshot images mapped in this process: the `.cwasm`
    file's writable private mappings, one per live instance."""
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) > 5 and parts[5].endswith(".cwasm") and parts[1] == "rw-p":
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                found.add((lo, hi))
    return found


def _new_image(before: set[tuple[int, int]]) -> tuple[int, int]:
    """The one image mapped since `before` (`_images()` then): the instance just made's."""
    new = _images() - before
    if len(new) != 1:
        raise RuntimeError(f"{len(new)} new .cwasm mappings, not 1: the component was not "
                           "loaded from its file or the Engine maps no image")
    return new.pop()


def _own_pages(lo: int, hi: int) -> list[int]:
    """Indexes of the pages of [lo, hi) that are present and not the file's (written)."""
    with open("/proc/self/pagemap", "rb") as fh:
        fh.seek(lo // PAGE * 8)
        data = fh.read((hi - lo) // PAGE * 8)
    own = []
    for i in range((hi - lo) // PAGE):
        (entry,) = struct.unpack_from("<Q", data, i * 8)
        if entry >> 63 and not (entry >> 61) & 1:      # present, not file-backed
            own.append(i)
    return own


@contextmanager
def _pool_off() -> Iterator[None]:
    """While open, runs make their instances straight from the snapshot: an empty instance
    pool stands in for the process's (whose instances ran the warm-up, which moves what
    lies where)."""
    from codemode.sandbox import _pool, _wasm

    pool = _wasm.POOL
    # The process's pool may be refilling in the background: on a loaded machine its
    # instance would be mapped during the watched one's. It makes none while this is open.
    with pool._lock:
        size, pool.size = pool.size, 0
        pool._step_done.wait_for(lambda: not pool._stepping)
    _wasm.POOL = _pool.InstancePool(_wasm._in_background, size=0)
    try:
        yield
    finally:
        _wasm.POOL = pool
        with pool._lock:
            pool.size = size


@contextmanager
def _watched(into: Written) -> Iterator[None]:
    """While open, the next instance made is watched into `into`."""
    from codemode.sandbox import _pool

    instantiate, close = _pool.Fresh.instantiate, _pool.Fresh.close
    seen: dict[str, Any] = {}

    def watched_instantiate(self: Any, *args: Any, **kwargs: Any) -> None:
        mapped = _images()
        instantiate(self, *args, **kwargs)
        if "before" not in seen:
            lo, hi = _new_image(mapped)
            seen["before"] = (self, lo, hi, ctypes.string_at(lo, hi - lo))

    def watched_close(self: Any) -> None:
        if "before" in seen and seen["before"][0] is self and not into.pages:
            _, lo, hi, before = seen["before"]
            base = lo & ~((1 << 20) - 1)        # linear memory starts on a MiB boundary
            own = _own_pages(lo, hi)
            after = ctypes.string_at(lo, hi - lo)
            into.pages = len(own)
            for i in own:
                old, new = before[i * PAGE:(i + 1) * PAGE], after[i * PAGE:(i + 1) * PAGE]
                if old == new:
                    into.unchanged += 1
                    continue
                into.changed.extend(lo - base + i * PAGE + off for off in range(0, PAGE, 4)
                                    if old[off:off + 4] != new[off:off + 4])
        close(self)

    _pool.Fresh.instantiate, _pool.Fresh.close = watched_instantiate, watched_close
    try:
        yield
    finally:
        _pool.Fresh.instantiate, _pool.Fresh.close = instantiate, close


def watch(peer: Any, program: str) -> Written:
    """Run `program` three times on `peer` (a `_peers.SandboxPeer`), then once watched, in
    an instance made for it (not one the pool prepared ahead, which ran the warm-up)."""
    for _ in range(3):
        peer.run(program)
    written = Written()
    with _pool_off(), _watched(written):
        peer.run(program)
    return written


# Runs in the sandbox: the snapshot's objects are the frozen generation (unfrozen into the
# oldest) and what they refer to; the program's own objects are young, so left out.
_OWNERS = r'''
import bisect, collections, gc, sys, types
changed = CHANGED
gc.unfreeze()
objects = {id(o): o for o in gc.get_objects(generation=2)}
for o in list(objects.values()):
    for r in gc.get_referents(o):
        objects.setdefault(id(r), r)
starts = sorted(objects)

def label(o):
    kind = type(o).__name__
    if isinstance(o, types.CodeType):
        return f"{kind} {o.co_qualname} ({o.co_filename.rsplit('/', 1)[-1]})"
    if isinstance(o, (types.FunctionType, type)):
        return f"{kind} {o.__qualname__}"
    if isinstance(o, types.ModuleType):
        return f"{kind} {o.__name__}"
    return kind

pages, words = collections.defaultdict(set), collections.Counter()
for address in changed:
    i = bisect.bisect_right(starts, address) - 1
    o = objects[starts[i]] if i >= 0 else None
    if o is not None and address < starts[i] + sys.getsizeof(o):
        pages[type(o).__name__].add(address // 4096)
        words[label(o)] += 1
    else:
        pages["?"].add(address // 4096)
        words["?"] += 1
{"pages": sorted(([len(p), k] for k, p in pages.items()), reverse=True),
 "words": [list(item) for item in words.most_common(TOP)]}
'''


def owners(peer: Any, changed: list[int], top: int) -> Any:
    """The objects of a fresh instance of the same snapshot that hold `changed`'s addresses:
    {"pages": [[pages, kind], ...], "words": [[label, words], ...]} (`top` labels)."""
    program = _OWNERS.replace("CHANGED", repr(sorted(set(changed)))).replace("TOP", str(top))
    with _pool_off():
        return peer.run(program)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.written",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default=TRIVIAL, help="the program run (default: x = 1)")
    parser.add_argument("--objects", action="store_true",
                        help="name the snapshot's objects that hold the changed words")
    parser.add_argument("--top", type=int, default=30, help="objects listed (default 30)")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        parser.error("needs Linux's /proc/self/pagemap")
    peer = _peers.make("sandbox")
    try:
        try:
            written = watch(peer, args.program)
        except RuntimeError as exc:      # the program failed, or no image to watch
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"written pages {written.pages}, of them unchanged {written.unchanged}, "
              f"changed words {len(written.changed)}")
        if args.objects:
            found = owners(peer, written.changed, args.top)
            print("pages by kind of object:", ", ".join(f"{k} {n}" for n, k in found["pages"]))
            for label, count in found["words"]:
                print(f"{count:6d}  {label}")
    finally:
        peer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
