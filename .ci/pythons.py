"""The CPython interpreters CI tests on: every minor version that pyproject.toml's
`requires-python` admits and this machine has.

Prints one line per version, oldest first: `3.N<TAB>/path/to/python<TAB>SUITE`, where SUITE
is `whole` for the oldest and the newest (the whole suite runs there) and `fast` for those
between (the tests not marked slow). On stderr it says what it found and what it left out.
Exits 1 when the oldest admitted version is missing: CI must prove the floor it claims.

Where it looks (nothing specific to one machine image): `python3.N` on PATH, the
interpreter running this script, and, when pyenv is installed, every version under
`pyenv root`. Each candidate is run once to ask its implementation and version, so a pyenv
shim that cannot run that version, or a PyPy, is skipped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_BOUND = re.compile(r"(>=|<|<=|==|>|!=|~=)\s*3\.(\d+)(?:\.\*)?")
_MAX_MINOR = 40        # how far up PATH is searched for python3.N


def supported_minors() -> range:
    """The 3.N minors `requires-python` admits, from its `>=3.A` and `<3.B` bounds."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    low, high = 0, _MAX_MINOR + 1
    for op, minor in _BOUND.findall(spec):
        if op == ">=":
            low = max(low, int(minor))
        elif op == "<":
            high = min(high, int(minor))
        else:
            raise SystemExit(f"pythons: cannot read requires-python {spec!r} (only >=3.A,<3.B)")
    return range(low, high)


def candidates() -> list[str]:
    found = [sys.executable]
    found += [path for minor in range(8, _MAX_MINOR + 1)
              if (path := shutil.which(f"python3.{minor}"))]
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30)
        versions = Path(root.stdout.strip()) / "versions"
        if root.returncode == 0 and versions.is_dir():
            found += [str(p) for p in sorted(versions.glob("*/bin/python3")) if p.is_file()]
    return found


def identify(path: str) -> tuple[int, int, int] | None:
    """(3, minor, micro) of a CPython at `path`, or None when it is not one that runs."""
    probe = "import sys; print(sys.implementation.name, *sys.version_info[:3])"
    try:
        done = subprocess.run([path, "-c", probe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 4 or words[0] != "cpython":
        return None
    major, minor, micro = (int(w) for w in words[1:])
    return (major, minor, micro) if major == 3 else None


def main() -> int:
    minors = supported_minors()
    best: dict[int, tuple[tuple[int, int, int], str]] = {}
    outside: set[str] = set()
    for path in candidates():
        version = identify(path)
        if version is None:
            continue
        minor = version[1]
        if minor not in minors:
            outside.add(".".join(map(str, version)))
        elif minor not in best or version > best[minor][0]:
            best[minor] = (version, str(Path(path).resolve()))
    found = ", ".join(".".join(map(str, best[m][0])) for m in sorted(best)) or "none"
    print(f"pythons: requires-python admits 3.{minors.start} to 3.{minors.stop - 1}; "
          f"found {found}", file=sys.stderr)
    if outside:
        print(f"pythons: not admitted, left out: {', '.join(sorted(outside))}", file=sys.stderr)
    if minors.start not in best:
        print(f"pythons: the oldest supported Python, 3.{minors.start}, is not on this "
              "machine", file=sys.stderr)
        return 1
    ends = {minors.start, max(best)}
    for minor in sorted(best):
        print(f"3.{minor}\t{best[minor][1]}\t{'whole' if minor in ends else 'fast'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
