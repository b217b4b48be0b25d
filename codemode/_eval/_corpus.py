"""Corpus cases: finding them, reading their headers, substituting placeholders, splitting
two-phase programs (`fixtures/attacks/README.md`).

A case is a `*.py` file whose leading comment lines form a header::

    # id: short-kebab-id
    # category: fs-read
    # expect: prose for people
    # source: where the technique comes from
    # oracle: leak:file, fs:write          (checks that mean the sandbox FAILED)
    # expect_error: text                   (optional: the run must fail with this message)
    # labels: search_docs=private          (optional: labels of the reference tools' results)

Every `*.py` under the given files and directories (recursively) is a case: a new file
dropped into a corpus directory is picked up with no code change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from codemode.sandbox._limits import MAX_CODE_BYTES

from .._policy.bounded import TooLarge, read_bounded

PHASE_SPLIT = re.compile(r"^# ---- phase 2 \(fresh sandbox, same host\) ----[ \t]*$", re.M)
PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")
_HEADER_LINE = re.compile(r"^#\s*(?P<key>[a-z_]+):\s*(?P<value>.*)$")
_KNOWN_KEYS = frozenset({"id", "category", "expect", "source", "oracle", "expect_error",
                         "labels"})


class CorpusError(ValueError):
    """A corpus path that does not exist or a case file that cannot be read."""


class Case(msgspec.Struct, frozen=True, kw_only=True):
    """One corpus program.

    Attributes:
        id: the header's id (the file's stem when the header has none).
        category: the header's category ("benign" for benign programs).
        expect: prose: what a correct sandbox does.
        origin: the header's `source` (the report or technique the case is based on).
        oracles: the header's oracle checks, in order (e.g. "leak:file", "tool:budget:1000").
        expect_error: a benign program must end with an error whose message contains this.
        labels: `tool=label` items: labels of the reference tools' results in this case
            (added to the policy's `[[labels]]`; `_flow.py`).
        path: the file.
        source: the whole program text, placeholders not yet substituted.
    """

    id: str
    category: str
    expect: str = ""
    origin: str = ""
    oracles: tuple[str, ...] = ()
    expect_error: str | None = None
    labels: tuple[str, ...] = ()
    path: str = ""
    source: str = ""

    @property
    def benign(self) -> bool:
        return self.category == "benign"

    @property
    def phases(self) -> tuple[str, ...]:
        """The program's phases: one, or two split at the phase-2 marker line (each a
        whole program; placeholders not substituted)."""
        parts = PHASE_SPLIT.split(self.source, maxsplit=1)
        return (self.source,) if len(parts) == 1 else (parts[0], parts[1].lstrip("\n"))

    def placeholders(self) -> frozenset[str]:
        """Placeholder names used by the program (`CANARY_READ`, `PORT`, ...)."""
        return frozenset(PLACEHOLDER.findall(self.source))


def parse_case(path: Path) -> Case:
    """Read one case file.

    Raises:
        CorpusError: the file cannot be read as UTF-8, or holds more than a program may
            (`MAX_CODE_BYTES`).
    """
    try:
        source = read_bounded(path, MAX_CODE_BYTES).decode("utf-8")
    except TooLarge:
        raise CorpusError(f"{path}: cannot read the case: larger than {MAX_CODE_BYTES >> 20} "
                          "MiB, the most a program may be") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read the case: {exc}") from None
    header: dict[str, str] = {}
    for line in source.splitlines():
        if not line.startswith("#"):
            break
        match = _HEADER_LINE.match(line)
        if match is None:
            continue
        key, value = match["key"], match["value"].strip()
        if key in _KNOWN_KEYS and key not in header:
            header[key] = value
    oracles = tuple(o.strip() for o in header.get("oracle", "").split(",") if o.strip())
    return Case(id=header.get("id") or path.stem, category=header.get("category", "unknown"),
                expect=header.get("expect", ""), origin=header.get("source", ""),
                oracles=oracles, expect_error=header.get("expect_error") or None,
                labels=tuple(x.strip() for x in header.get("labels", "").split(",")
                             if x.strip()),
                path=str(path), source=source)


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Every `*.py` under `paths` (files taken as they are, directories recursively),
    sorted per argument, without duplicates.

    Raises:
        CorpusError: a path does not exist.
    """
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*.py") if p.is_file())
        elif path.is_file():
            candidates = [path]
        else:
            raise CorpusError(f"{path}: no such file or directory")
        for candidate in candidates:
            key = candidate.resolve()
            if key not in seen:
                seen.add(key)
                found.append(candidate)
    return found


def load_corpus(paths: Iterable[str | Path]) -> list[Case]:
    """`parse_case` over `discover(paths)`.

    Raises:
        CorpusError: a path is missing, a file unreadable, or two cases share an id.
    """
    cases = [parse_case(p) for p in discover(paths)]
    ids: dict[str, str] = {}
    for case in cases:
        if case.id in ids:
            raise CorpusError(f"{case.path}: case id {case.id!r} is also used by {ids[case.id]}")
        ids[case.id] = case.path
    return cases


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace `@@NAME@@` with `values[NAME]`; unknown names are left as they are."""
    return PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), text)
