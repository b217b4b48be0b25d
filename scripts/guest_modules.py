"""Generate `sandbox/guest/modules.txt`: the standard-library modules a program may import.

    python scripts/guest_modules.py [--check]

Builds a probe component with the same componentize-py as the guest (about 40 s of CPU),
which, while componentize-py pre-initializes it, lists every module of the guest's
standard library (the files componentize-py bundles, every package walked, plus the C
modules built into its CPython) and imports each one. The list written is: every module
that imported, minus `REFUSED` below (host access by nature, or no use without a terminal,
a filesystem or a process of its own), minus test and tool packages, plus the submodules
that exist only in `sys.modules` (`os.path`, `collections.abc`). Private modules that
imported are listed too: C code of public modules imports them lazily (`datetime.strptime`
imports `_strptime`); the program-facing list (`codemode.sandbox.AVAILABLE_MODULES`) leaves
them out.

`--check` exits 1 when the file on disk differs from what the probe finds (for CI on a new
componentize-py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "sandbox" / "guest" / "modules.txt"
WIT_DIR = ROOT / "sandbox" / "wit"

# Modules (and packages, with everything under them) a program may not import even where
# they import in the guest, each with the reason. The sandbox's security does not rest on
# this list (WASI grants no files, network or environment, and the build has no threads or
# processes); it keeps programs from reaching for what cannot work there.
REFUSED: dict[str, str] = {
    # network
    "socket": "network", "_socket": "network", "ssl": "network", "select": "network",
    "selectors": "network", "socketserver": "network", "http.client": "network",
    "http.server": "network", "http.cookiejar": "network (imports urllib.request)",
    "urllib.request": "network", "urllib.robotparser": "network", "ftplib": "network",
    "poplib": "network", "imaplib": "network", "smtplib": "network",
    "xmlrpc": "network", "wsgiref": "a web server", "webbrowser": "starts programs",
    "asyncio.subprocess": "processes", "asyncio.unix_events": "processes and signals",
    "asyncio.selector_events": "network", "asyncio.proactor_events": "network",
    "asyncio.windows_events": "Windows", "asyncio.windows_utils": "Windows",
    # processes, threads, signals, native code
    "subprocess": "processes", "_posixsubprocess": "processes",
    "multiprocessing": "processes", "concurrent": "threads and processes",
    "pty": "processes", "signal": "signals", "_signal": "signals", "posix": "use os",
    "_thread": "threads", "faulthandler": "the process's own file descriptors",
    "ctypes": "native code", "_ctypes": "native code",
    # the host's files, terminal or interpreter
    "tempfile": "files", "shutil": "files", "glob": "files", "fileinput": "files",
    "filecmp": "files", "dbm": "files", "_dbm": "files", "_gdbm": "files", "shelve": "files",
    "mailbox": "files", "zipimport": "files", "compileall": "files", "py_compile": "files",
    "site": "the interpreter's setup", "sitecustomize": "the interpreter's setup",
    "getpass": "a terminal", "readline": "a terminal", "rlcompleter": "a terminal",
    "curses": "a terminal", "tty": "a terminal", "termios": "a terminal",
    "pdb": "a terminal", "pydoc": "a terminal", "cmd": "a terminal",
    "pydoc_data": "a terminal", "runpy": "runs files and modules by path",
    "modulefinder": "files", "pkgutil": "files", "zipapp": "files", "netrc": "files",
    "tabnanny": "files", "trace": "files",
    "_aix_support": "another platform", "_android_support": "another platform",
    "_apple_support": "another platform", "_ios_support": "another platform",
    "_osx_support": "another platform",
    # printing or opening things on import, tests and tools
    "antigravity": "opens a browser", "this": "prints on import",
    "__hello__": "prints", "__phello__": "prints", "idlelib": "a tool", "tkinter": "a GUI",
    "turtle": "a GUI", "turtledemo": "a GUI", "test": "CPython's tests", "lib2to3": "a tool",
    "ensurepip": "a tool", "venv": "a tool", "_pyrepl": "a terminal",
    "componentize_py_runtime": "the runtime's own", "componentize_py_types": "the runtime's own",
    "componentize_py_async_support": "the runtime's own", "poll_loop": "the runtime's own",
}

_SKIP_PARTS = {"test", "tests", "idle_test", "__main__"}

PROBE = r'''
import json, os, sys

import wit_world

STDLIB = "/python"
REFUSED = set(json.loads(%(refused)r))
SKIP_PARTS = set(json.loads(%(skip)r))


def refused(name):
    parts = name.split(".")
    return any(".".join(parts[:i]) in REFUSED for i in range(1, len(parts) + 1)) \
        or any(p in SKIP_PARTS for p in parts)


def walk(directory, prefix):
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if entry.endswith(".py") and entry != "__init__.py":
            yield prefix + entry[:-3]
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            yield prefix + entry
            yield from walk(path, prefix + entry + ".")


names = sorted(set(walk(STDLIB, "")) | set(sys.builtin_module_names))
RESULTS = {}
for name in names:
    if refused(name) or "-" in name:
        continue
    try:
        __import__(name)
        RESULTS[name] = "ok"
    except BaseException as exc:
        RESULTS[name] = f"{type(exc).__name__}: {exc}"
# Modules that exist only as entries of sys.modules (os.path is posixpath, collections.abc
# and xml.parsers.expat.errors are set up by their parents).
for name in sorted(sys.modules):
    if name not in RESULTS and "." in name and not refused(name) \
            and RESULTS.get(name.rpartition(".")[0]) == "ok":
        RESULTS[name] = "ok"


class WitWorld(wit_world.WitWorld):
    def run(self, request: str) -> str:
        return json.dumps(RESULTS)
'''


def probe() -> dict[str, str]:
    """Build the probe component, run it once, return {module: "ok" | error}."""
    import wasmtime
    from wasmtime import component as wc

    with tempfile.TemporaryDirectory() as tmp:
        source = PROBE % {"refused": json.dumps(sorted(REFUSED)),
                          "skip": json.dumps(sorted(_SKIP_PARTS))}
        (Path(tmp) / "probe_main.py").write_text(source)
        out = Path(tmp) / "probe.wasm"
        exe = Path(sys.executable).parent / "componentize-py"
        subprocess.run([str(exe), "-q", "-d", str(WIT_DIR), "-w", "guest", "componentize",
                        "probe_main", "-p", tmp, "-o", str(out)], check=True, cwd=tmp)
        engine = wasmtime.Engine()
        component = wc.Component.from_file(engine, str(out))
    linker = wc.Linker(engine)
    linker.add_wasip2()
    with linker.root() as root, root.add_instance("codemode:sandbox/host@0.1.0") as host:
        host.add_func("dispatch", lambda _store, _batch: '{"results": []}')
        host.add_func("sleep", lambda _store, _seconds: None)
    store = wasmtime.Store(engine)
    store.set_wasi(wasmtime.WasiConfig())
    instance = linker.instantiate(store, component)
    run = instance.get_func(store, "run")
    assert run is not None
    results: dict[str, str] = json.loads(run(store, ""))
    return results


def render(results: dict[str, str]) -> str:
    ok = sorted(name for name, result in results.items() if result == "ok")
    header = [
        "# Standard-library modules a sandboxed program may import: one per line.",
        "# Generated by scripts/guest_modules.py from the guest's own standard library;",
        "# do not edit by hand. The guest imports each while its snapshot is taken",
        "# (sandbox/guest/guest_main.py); names with a private part are for the runtime's",
        "# lazy imports and are left out of codemode.sandbox.AVAILABLE_MODULES.",
    ]
    return "\n".join(header + ok) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--show-failures", action="store_true")
    args = parser.parse_args()
    results = probe()
    if args.show_failures:
        for name, result in sorted(results.items()):
            if result != "ok":
                print(f"{name}: {result}", file=sys.stderr)
    text = render(results)
    if args.check:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} is out of date: run scripts/guest_modules.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"{sum(r == 'ok' for r in results.values())} modules -> {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
