"""Component entry point. Importing this module is the pre-initialization snapshot.

componentize-py keeps only what is imported while this module loads, so every module a
program may import is imported here: each name of `modules.txt` (`cm_guest/modules.py`),
private modules that C code imports lazily included. The time zone database is read from
the `tzdata` package (on the build's python path only) into memory, compressed, and
`zoneinfo` is pointed at it. Then a warm-up run, the allocator's free chunks between the
snapshot's objects are filled (so a run's new objects go together at the heap's end), and
the heap is frozen so the garbage collector never touches (and so copies) the snapshot's
pages.
"""

import builtins
import errno
import gc
import importlib
import io
import os
import sys
import time
import warnings
import zlib

import wit_world
from wit_world.imports import host

from cm_guest import aio, modules, pending, runtime


_filters = warnings.filters[:]
warnings.simplefilter("ignore")          # deprecated modules warn when imported
for _name in sorted(modules.IMPORTABLE):
    importlib.import_module(_name)       # a failure fails the build: the list is wrong
warnings.filters[:] = _filters  # type: ignore[index]  # CPython's defaults, restored
warnings.simplefilter("ignore", DeprecationWarning)

import asyncio  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import select  # noqa: E402
import zoneinfo  # noqa: E402
import zoneinfo._common  # noqa: E402
import zoneinfo._tzpath  # noqa: E402

aio.install_policy()
# The program's asyncio and json take pending tool calls (and asyncio, plain values).
vars(asyncio).update(aio.ENTRY_POINTS)
vars(json).update(pending.json_functions(json))
datetime.datetime.strptime("2024-01-01", "%Y-%m-%d")   # warms _strptime's regex cache


def _read_tzdata():
    """{"Europe/Paris": zlib-compressed TZif bytes} from the `tzdata` package, if the build
    put it on the python path; else empty (then only fixed offsets work)."""
    try:
        import tzdata  # type: ignore[import-untyped]  # data only, on the build's path
    except ImportError:
        return {}
    root = os.path.join(os.path.dirname(tzdata.__file__), "zoneinfo")
    zones = {}
    for directory, _dirs, files in os.walk(root):
        for file in files:
            path = os.path.join(directory, file)
            with open(path, "rb") as f:
                data = f.read()
            if data[:4] == b"TZif":
                zones[os.path.relpath(path, root)] = zlib.compress(data, 9)
    del sys.modules["tzdata"]
    return zones


_TZDATA = _read_tzdata()


def _load_tzdata(key):
    """`zoneinfo._common.load_tzdata` over the database held in memory."""
    data = _TZDATA.get(key)
    if data is None:
        raise zoneinfo.ZoneInfoNotFoundError(f"No time zone found with key {key}")
    return io.BytesIO(zlib.decompress(data))


def _available_timezones():
    return set(_TZDATA)


zoneinfo.reset_tzpath(to=[])               # no files to search: the database is in memory
zoneinfo._common.load_tzdata = _load_tzdata
zoneinfo._tzpath.available_timezones = _available_timezones
zoneinfo.available_timezones = _available_timezones


_raw_dispatch, _raw_sleep = host.dispatch, host.sleep


def _sleep(seconds):
    """`time.sleep` through the host, which bounds it by the run's deadline."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"sleep length must be a number, not {type(seconds).__name__}")
    seconds = float(seconds)
    if seconds != seconds or seconds < 0:
        raise ValueError("sleep length must be non-negative")
    if seconds:
        _raw_sleep(seconds)


def _dispatch(batch):
    """`host.dispatch` as a program may call it: a value the WIT string cannot carry is a
    TypeError or ValueError in the program (the bindings would abort the instance)."""
    if not isinstance(batch, str):
        raise TypeError(f"host.dispatch takes a str, not {type(batch).__name__}")
    try:
        batch.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"host.dispatch takes valid Unicode text: {exc.reason} at index "
                         f"{exc.start}") from None
    return _raw_dispatch(batch)


# What a program reaches through `sys.modules["wit_world.imports.host"]`: checked calls.
host.dispatch, host.sleep = _dispatch, _sleep


def _no_select(*args, **kwargs):
    raise PermissionError("select is not available in the sandbox")


def _os_exit(code):
    """`os._exit` ends the program like `sys.exit` (WASI's process exit would trap)."""
    raise SystemExit(code)


def _no_filesystem(function):
    """`function` for file descriptors (stdout is 1); for a path, FileNotFoundError (ENOENT):
    the sandbox has no filesystem, so no path exists. That is what CPython itself raises for a
    missing file, and what it raises under WASI with no preopened directory; `except
    FileNotFoundError` and `e.errno == errno.ENOENT` work as they do outside. (The number is
    WASI's: 44, where Linux says 2.)"""
    def refuse(path, *args, **kwargs):
        if isinstance(path, int) and not isinstance(path, bool):
            return function(path, *args, **kwargs)
        raise FileNotFoundError(errno.ENOENT, "No such file or directory (the sandbox has no "
                                "filesystem)", os.fspath(path) if isinstance(
                                    path, (str, bytes, os.PathLike)) else path)
    refuse.__name__ = refuse.__qualname__ = function.__name__
    refuse.__doc__ = function.__doc__
    return refuse


for _name in ("stat", "lstat", "listdir", "scandir", "mkdir", "rmdir", "remove", "unlink",
              "rename", "replace", "chmod", "utime", "link", "symlink", "readlink",
              "truncate", "access", "chdir", "open", "statvfs", "mkfifo", "mknod"):
    if hasattr(os, _name):
        setattr(os, _name, _no_filesystem(getattr(os, _name)))
io.open = builtins.open = _no_filesystem(io.open)
time.sleep = _sleep
os._exit = _os_exit
for _name in ("select", "poll", "epoll", "kqueue", "devpoll"):
    if hasattr(select, _name):
        setattr(select, _name, _no_select)
runtime.install_import_guard()


# The request that asks for `_warm_up` in an instance made ahead of its run (the host's
# `sandbox._pool`), and the reply.
PREPARE = '{"prepare": true}'
PREPARED = '{"prepared": true}'
PREPARE_WITH_TOOLS = '{"prepare": true, "tools": '     # then the tool specs' JSON and "}"
_WARM_UP_PROGRAM = ("import asyncio\nprint(echo(value=1))\n"
                    "await asyncio.gather(echo(value=2), echo(value=3))\n{'x': [1.5, None]}")
_WARM_UP_REQUEST = json.dumps({
    "code": _WARM_UP_PROGRAM, "limits": {},
    "tools": [{"name": "echo", "alias": "echo", "params": [{"name": "value"}]}]})


def _echo_dispatch(batch):
    calls = json.loads(batch)["calls"]
    return json.dumps({"results": [{"id": c["id"], "ok": True, "value": c["args"]}
                                   for c in calls]})


def _discard(_fd):
    return lambda data: None


def _warm_up(times, writer, prepare_request=None):
    """Run a small program of the runtime's own `times` times, then forget those runs: so
    a run starts with the runtime's code paths loaded and specialized (codec lookups, the
    compiler, the tool bridge, the event loop) and, in an instance made ahead, with the
    memory those paths use already touched. No host call: tools answer locally, output
    goes to `writer`. Then the next run's `runtime.Prepared` is made, fresh (the warm-up
    runs used their own), with the bindings of the tools of `prepare_request` (the host's
    `PREPARE_WITH_TOOLS` request), if given: decoded only now, into the memory the warm-up
    freed."""
    stdout, stderr = sys.stdout, sys.stderr
    for _ in range(times):
        runtime.run(_WARM_UP_REQUEST, _echo_dispatch, lambda seconds: None, writer)
    sys.stdout, sys.stderr = stdout, stderr
    runtime.forget_runs()
    gc.collect()          # the warm-up's cycles freed: the run reuses the pages they used
    runtime.prepare(json.loads(prepare_request)["tools"] if prepare_request else None)


def _fill_free_chunks(largest=512, most_bytes=16 << 20):
    """Allocate blocks of every small size (16-byte steps up to `largest` bytes, the sizes
    most of a run's objects have) until the allocator hands out memory above every live
    object, and keep them: what is left free in the snapshot is then its end, not holes
    between the snapshot's objects. A run's new objects (the request, the program's code,
    its namespace and output) would otherwise fill those holes, one or two to a page across
    the whole image, and each page it writes in is a copy of the image's (a write fault):
    `python -m benchmarks.written` counts them (docs/benchmarks.md, "What a fresh run
    writes"). Stops at `most_bytes` in all, whatever is left."""
    ceiling = max(map(id, gc.get_objects()))
    filler, used = [], 0
    for size in range(32, largest + 1, 16):     # wasi-libc's malloc: 16-byte chunks
        while used < most_bytes:
            block = b"\x01" * (size - 21)   # header and malloc's overhead: `size` in all
            filler.append(block)
            used += size
            if id(block) > ceiling:
                break
    return filler


_warm_up(3, runtime.fd_writer)
gc.collect()
_FREE_CHUNKS_FILLED = _fill_free_chunks()
gc.freeze()


class WitWorld(wit_world.WitWorld):
    def run(self, request: str) -> str:
        if request == PREPARE:                # the host's own warm-up, never a program
            _warm_up(1, _discard)
            return PREPARED
        if request.startswith(PREPARE_WITH_TOOLS):    # the same, the run's tools bound too
            _warm_up(1, _discard, request)
            return PREPARED
        return runtime.run(request, _raw_dispatch, _sleep)
