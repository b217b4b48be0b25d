"""Component entry point. Importing this module is the pre-initialization snapshot.

componentize-py keeps only what is imported while this module loads, so every module a
program may import (and every module those import lazily, such as `_strptime` for
`datetime.strptime`) is imported here.
"""

import abc, array, asyncio, base64, binascii, bisect, calendar, collections  # noqa: E401
import collections.abc, contextlib, copy, csv, dataclasses, datetime, decimal  # noqa: E401
import difflib, enum, fractions, functools, hashlib, heapq, html, html.entities  # noqa: E401
import io, itertools, json, linecache, math, numbers, operator, os, os.path  # noqa: E401
import pprint, random, re, secrets, statistics, string, struct, sys, textwrap  # noqa: E401
import time, traceback, types, typing, unicodedata, urllib, urllib.parse  # noqa: E401
import uuid, warnings, weakref, zlib, _strptime, encodings.idna  # noqa: E401
import select

import wit_world
from wit_world.imports import host

from cm_guest import aio, pending, runtime

warnings.simplefilter("ignore", DeprecationWarning)
aio.install_policy()
# The program's asyncio and json take pending tool calls (and asyncio, plain values).
vars(asyncio).update(aio.ENTRY_POINTS)
vars(json).update(pending.json_functions(json))
datetime.datetime.strptime("2024-01-01", "%Y-%m-%d")   # warms _strptime's regex cache


def _sleep(seconds):
    """`time.sleep` through the host, which bounds it by the run's deadline."""
    seconds = float(seconds)
    if seconds != seconds or seconds < 0:
        raise ValueError("sleep length must be non-negative")
    if seconds:
        host.sleep(seconds)


def _no_select(*args, **kwargs):
    raise PermissionError("select is not available in the sandbox")


def _os_exit(code):
    """`os._exit` ends the program like `sys.exit` (WASI's process exit would trap)."""
    raise SystemExit(code)


time.sleep = _sleep
os._exit = _os_exit
for _name in ("select", "poll", "epoll", "kqueue", "devpoll"):
    if hasattr(select, _name):
        setattr(select, _name, _no_select)


def _warm_up():
    """Run a small program once while the snapshot is taken, so every run starts with the
    runtime's code paths already loaded and specialized (codec lookups, the compiler,
    the tool bridge, the event loop), then forget that run."""
    def dispatch(batch):
        calls = json.loads(batch)["calls"]
        return json.dumps({"results": [{"id": c["id"], "ok": True, "value": c["args"]}
                                       for c in calls]})

    program = ("import asyncio\nprint(echo(value=1))\n"
               "await asyncio.gather(echo(value=2), echo(value=3))\n{'x': [1.5, None]}")
    request = {"code": program, "limits": {},
               "tools": [{"name": "echo", "alias": "echo", "params": [{"name": "value"}]}]}
    stdout, stderr = sys.stdout, sys.stderr
    for _ in range(3):
        runtime.run(json.dumps(request), dispatch, lambda seconds: None)
    sys.stdout, sys.stderr = stdout, stderr
    runtime.forget_runs()


_warm_up()


class WitWorld(wit_world.WitWorld):
    def run(self, request: str) -> str:
        return runtime.run(request, host.dispatch, _sleep)
