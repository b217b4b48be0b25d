"""Labels on tool results, and what a run holds (docs/codemode.md "Labels").

A tool's results carry labels ("private", "untrusted"): its definition's own
(`ToolDefinition.labels`) and those of the policy's `[[labels]]` entries whose glob matches
its name (how an MCP server's tools get labels). A run holds the union of the labels of
every result its program received: an answer to a call of a labelled tool whose body ran,
whatever its outcome (a success; any failure after the body was entered, `SubCallErr.ran`:
an exception, `SystemExit`, an output its check refused, a timeout, a post-execute block,
an MCP server's error, since its message may carry the tool's data). A call refused before
its body (denied, unknown, invalid, pending approval) brought nothing.

This is deliberately coarse: a program may combine anything it has seen, so no value is
tracked through the program. What a run received is read from its exchanges with the
sandbox (`replay.Exchange`: the calls the program sent and the answers it got, in order),
the same record a paused run keeps, so a resumed run that replays them holds the same
labels at the same points.

Evidence: when an argument of a later call holds a verbatim piece of a labelled result
(`EVIDENCE_CHARS` characters or more of one of its strings), `RunFlow.evidence` says which
argument and which earlier call, for the person approving it.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from codemode.sandbox import SubCallOk

from .replay import Exchange

EVIDENCE_CHARS = 16
"""Shortest verbatim piece of a labelled result that counts as evidence, in characters."""

EVIDENCE_ARGUMENT_CHARS = 16_384
"""Characters of each argument searched for evidence (its strings, in order): a bound on
the work of one decision, whatever size the program sends."""

EVIDENCE_RESULT_CHARS = 262_144
"""Characters of the labelled results one decision searches (their strings, in the order
the run received them); past it, older results are not searched."""

_ANCHOR = EVIDENCE_CHARS // 2     # every piece of EVIDENCE_CHARS holds one aligned anchor

EXCERPT_CHARS = 60
"""Characters of the verbatim piece quoted in a reason (past it: cut, with "...")."""



class LabelRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A `[[labels]]` entry of a policy: results of the tools matching `tool` carry `label`.

    Attributes:
        tool: an fnmatch glob over tool names, case-sensitive (`"read_email"`, `"db_*"`).
        label: a label, or a list of labels (non-empty strings).
        optional: the session may lack the tools `tool` names; without it, `Policy.apply`
            refuses an exact name that matches no tool and warns about a glob that matches
            none (as for rules).
    """

    tool: str
    label: str | tuple[str, ...]
    optional: bool = False

    def __post_init__(self) -> None:
        if not self.labels or not all(self.labels):
            raise ValueError("`label`: a label is a non-empty string (or a list of them)")

    @property
    def labels(self) -> tuple[str, ...]:
        return (self.label,) if isinstance(self.label, str) else self.label


class Source(msgspec.Struct, frozen=True):
    """A result a run received that carried labels.

    Attributes:
        n: the sub-call's number in the run (1, 2, ...).
        name: the tool called.
        labels: the labels it carried, sorted.
    """

    n: int
    name: str
    labels: tuple[str, ...]


class Evidence(msgspec.Struct, frozen=True):
    """A verbatim piece of a labelled result found in an argument.

    Attributes:
        argument: the top-level argument holding it.
        source: the call whose result it came from.
        chars: its length in characters (at least `EVIDENCE_CHARS`).
        excerpt: its start, cut at `EXCERPT_CHARS`.
    """

    argument: str
    source: Source
    chars: int
    excerpt: str


def no_labels(name: str) -> frozenset[str]:
    """The `labels_of` of a run whose tools carry no labels at all (reads nothing)."""
    return frozenset()


class RunFlow:
    """The labels one run holds, read from its exchanges when asked.

    Args:
        labels_of: the labels of a tool's results, by tool name (`no_labels`: none of the
            run's tools has any, so its exchanges are never read).
        exchanges: the run's exchanges so far (read again at every question: the list grows
            as the run goes on).
        sub_call_id: the sub-call id of the run's n-th call, to name it.
    """

    def __init__(self, labels_of: Callable[[str], frozenset[str]],
                 exchanges: Callable[[], Sequence[Exchange]],
                 sub_call_id: Callable[[int], str]) -> None:
        self._labels_of = labels_of
        self._exchanges = exchanges
        self.sub_call_id = sub_call_id
        self._read = 0                              # exchanges read so far
        self._calls: dict[int, tuple[int, str]] = {}   # the program's id -> (n, name)
        self._sources: list[Source] = []
        self._values: list[tuple[Source, Any]] = []
        self._held: frozenset[str] = frozenset()       # the union of the sources' labels
        self._indexes: dict[int, TextIndex] = {}       # a labelled result's, by its place

    def _catch_up(self) -> None:
        if self._labels_of is no_labels:
            return
        exchanges = self._exchanges()
        for exchange in exchanges[self._read:]:
            for call in exchange.calls:             # a reused id is refused, not numbered
                if call.id not in self._calls:
                    self._calls[call.id] = (len(self._calls) + 1, call.name)
            for reply in exchange.replies:
                if isinstance(reply, SubCallOk):
                    value: Any = reply.value
                elif reply.ran:               # the body ran: its message may hold its data
                    value = reply.message
                else:
                    continue
                if reply.id not in self._calls:
                    continue
                n, name = self._calls[reply.id]
                labels = self._labels_of(name)
                if labels:
                    source = Source(n=n, name=name, labels=tuple(sorted(labels)))
                    self._sources.append(source)
                    self._values.append((source, value))
                    if not labels <= self._held:
                        self._held = self._held | labels
        self._read = len(exchanges)

    def sources(self) -> list[Source]:
        """The labelled results the run received so far, in the order it received them."""
        self._catch_up()
        return list(self._sources)

    def labels(self) -> frozenset[str]:
        """Every label the run holds now."""
        self._catch_up()
        return self._held

    def by_label(self) -> dict[str, list[str]]:
        """`{label: [sub-call ids that brought it, in order]}`, labels sorted."""
        found: dict[str, list[str]] = {}
        for source in self.sources():
            for label in source.labels:
                found.setdefault(label, []).append(self.sub_call_id(source.n))
        return dict(sorted(found.items()))

    def evidence(self, arguments: Any, labels: frozenset[str]) -> list[Evidence]:
        """Verbatim pieces of results carrying any of `labels` in `arguments` (a call's
        argument object): at most one per argument and source, longest first within an
        argument, arguments in their order. Bounded in work whatever the program sends
        (`EVIDENCE_WORK`): it runs on the session's event loop."""
        self._catch_up()
        if not isinstance(arguments, dict):
            return []
        budget = EVIDENCE_RESULT_CHARS
        indexes = []
        for number, (source, value) in enumerate(self._values):
            if labels.intersection(source.labels) and budget > 0:
                if number not in self._indexes:      # built once per result
                    self._indexes[number] = TextIndex(bounded_strings(value, budget))
                index = self._indexes[number]
                budget -= sum(len(t) for t in index.texts)
                indexes.append((source, index))
        found: list[Evidence] = []
        work = Work()
        for argument, value in arguments.items():
            pieces = bounded_strings(value, EVIDENCE_ARGUMENT_CHARS)
            hits = []
            for source, index in indexes:
                best = longest_shared(pieces, index, work)
                if len(best) >= EVIDENCE_CHARS:
                    hits.append(Evidence(argument=str(argument), source=source,
                                         chars=len(best), excerpt=_excerpt(best)))
            found.extend(sorted(hits, key=lambda e: -e.chars))
            if work.left <= 0:
                break
        return found


class RunFlows:
    """The flows of the runs in progress, by the `run_code` execution's token (a sub-call's
    `Execution.parent`)."""

    def __init__(self) -> None:
        self._by_token: dict[Any, RunFlow] = {}

    def open(self, token: Any, flow: RunFlow) -> Callable[[], None]:
        """Register `flow` for the run of `token`; returns its disposer."""
        self._by_token[token] = flow

        def close() -> None:
            if self._by_token.get(token) is flow:
                del self._by_token[token]
        return close

    def of(self, execution: Any) -> RunFlow | None:
        """The flow of the run `execution` is a sub-call of; None for a direct call."""
        parent = getattr(execution, "parent", None)
        return self._by_token.get(parent) if parent is not None else None


def labeller(rules: Sequence[LabelRule],
             definition_labels: Callable[[str], frozenset[str]]) -> Callable[[str], frozenset[str]]:
    """`labels_of(name)`: the definition's labels and the matching rules' (cached by name)."""
    cache: dict[str, frozenset[str]] = {}

    def labels_of(name: str) -> frozenset[str]:
        found = cache.get(name)
        if found is None:
            found = definition_labels(name).union(
                label for rule in rules if fnmatch.fnmatchcase(name, rule.tool)
                for label in rule.labels)
            cache[name] = found
        return found
    return labels_of


LISTED = 5
"""Calls named per label, and pieces of evidence, in a reason (past it: "and N more")."""


def describe_sources(sources: Sequence[Source], labels: frozenset[str],
                     sub_call_id: Callable[[int], str]) -> str:
    """`"private" from read_email (<id>), get_contact (<id>)` for each of `labels`, at most
    `LISTED` calls each."""
    parts = []
    for label in sorted(labels):
        calls = [f"{s.name} ({sub_call_id(s.n)})" for s in sources if label in s.labels]
        if calls:
            parts.append(f'"{label}" from {_listed(calls, ", ")}')
    return "; ".join(parts)


def describe_evidence(evidence: Sequence[Evidence], sub_call_id: Callable[[int], str]) -> str:
    """`argument "body" holds 42 characters of the result of read_email (<id>): "..."`, at
    most `LISTED` of them."""
    return _listed([f'argument "{e.argument}" holds {e.chars} characters of the result of '
                    f'{e.source.name} ({sub_call_id(e.source.n)}): "{e.excerpt}"'
                    for e in evidence], "; ")


def _listed(items: Sequence[str], separator: str) -> str:
    """`items` joined by `separator`, the first `LISTED` of them, then "and N more"."""
    shown = separator.join(items[:LISTED])
    return shown if len(items) <= LISTED else f"{shown}{separator}and {len(items) - LISTED} more"


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON value (object keys too), in document order."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed([x for pair in item.items() for x in pair]))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))


EVIDENCE_WORK = 500_000
"""The work one decision's evidence search may do, whatever the arguments and results: a
unit per character compared or block cut, 64 per block of an argument that a labelled
result holds, 256 per place a match is tried (about 5-10 ms on a loaded 2-vCPU machine,
`tests/codemode/run/test_labels.py` measures it). Past it the search stops with what it
found: evidence only explains a decision, the rule fires on the labels alone."""

_SITE_COST = 256          # work charged for trying one place, beyond its comparisons
_HIT_COST = 64            # work charged for a block of the piece that the texts hold
_BLOCK = re.compile(f".{{{_ANCHOR}}}", re.S)


class Work:
    """The work one decision may still do (`EVIDENCE_WORK` units)."""

    def __init__(self, units: int = EVIDENCE_WORK) -> None:
        self.left = units

    def spend(self, units: int) -> bool:
        """Take `units` from what is left; False, and nothing left, when they are not there."""
        if units > self.left:
            self.left = 0
            return False
        self.left -= units
        return True


class TextIndex:
    """Labelled texts indexed for the evidence search: their `_ANCHOR`-character blocks at
    positions that are multiples of `_ANCHOR` (a shared piece of `EVIDENCE_CHARS` characters
    always covers one), each block at its first place. The texts are joined by NUL, and
    the blocks cut and indexed by the regular-expression engine and `dict` (C loops): a
    result of `EVIDENCE_RESULT_CHARS` characters is indexed in a few milliseconds, once."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = [t for t in texts if len(t) >= EVIDENCE_CHARS]
        self.text = "\x00".join(self.texts)
        chunks = _BLOCK.findall(self.text)
        last = _ANCHOR * (len(chunks) - 1)
        self.blocks: dict[str, int] = dict(zip(reversed(chunks),
                                               itertools.count(last, -_ANCHOR), strict=False))

    def longest(self, piece: str, work: Work) -> str:
        """A longest verbatim piece of `piece` that the texts hold, if it has at least
        `EVIDENCE_CHARS` characters ("" otherwise). For each of the `_ANCHOR` alignments
        of `piece`, its blocks are cut and looked up at C speed; at each block the texts
        hold, the match is extended both ways (doubling, then halving, slice comparisons)
        unless a match found already covers it. Lookups and comparisons are paid from
        `work`."""
        text, blocks = self.text, self.blocks
        found: list[tuple[int, int]] = []          # (start, end) of the matches so far
        best_start, best_len = 0, 0
        for offset in range(min(_ANCHOR, max(0, len(piece) - _ANCHOR + 1))):
            chunks = _BLOCK.findall(piece, offset)
            if not work.spend(len(chunks)) or blocks.keys().isdisjoint(chunks):
                continue
            for j, chunk in enumerate(chunks):
                k = blocks.get(chunk)
                if k is None:
                    continue
                if not work.spend(_HIT_COST):
                    break
                i = offset + j * _ANCHOR
                if any(start <= i and i + _ANCHOR <= end for start, end in found):
                    continue
                if not work.spend(_SITE_COST):
                    break
                left = _extend(piece, i, text, k, -1, work)
                right = _extend(piece, i, text, k, 1, work)
                if left + right >= EVIDENCE_CHARS:
                    found.append((i - left, i + right))
                    if left + right > best_len:
                        best_start, best_len = i - left, left + right
        return piece[best_start:best_start + best_len] if best_len else ""


def _extend(piece: str, i: int, text: str, k: int, way: int, work: Work) -> int:
    """How many characters `piece` and `text` share going right from `piece[i]` and
    `text[k]` (`way` 1), or left from just before them (`way` -1): segments of doubling
    length are compared until one differs, then halves of that one, so each character is
    compared about twice (paid from `work`; 0 past it)."""
    room = min(len(piece) - i, len(text) - k) if way > 0 else min(i, k)

    def same(start: int, end: int) -> bool:       # the characters start..end from the origin
        if not work.spend(2 * (end - start)):
            return False
        if way > 0:
            return piece[i + start:i + end] == text[k + start:k + end]
        return piece[i - end:i - start] == text[k - end:k - start]

    low, step = 0, _ANCHOR                          # they share `low` characters
    while low < room:
        high = min(room, low + step)
        if not same(low, high):
            break
        low, step = high, step * 2
    else:
        return low
    while high - low > 1:                            # the first difference is in low..high
        middle = (low + high) // 2
        if same(low, middle):
            low = middle
        else:
            high = middle
    return low


def longest_shared(pieces: Sequence[str], texts: Sequence[str] | TextIndex,
                   work: Work | None = None) -> str:
    """The longest verbatim piece of any of `pieces` that any of `texts` holds, if it has at
    least `EVIDENCE_CHARS` characters ("" otherwise), within `work` (a fresh
    `EVIDENCE_WORK` when None)."""
    index = texts if isinstance(texts, TextIndex) else TextIndex(texts)
    work = work if work is not None else Work()
    return max((index.longest(p, work) for p in pieces), key=len, default="")


def longest_common_piece(piece: str, text: str) -> str:
    """A longest verbatim piece of `piece` that `text` holds, if it has at least
    `EVIDENCE_CHARS` characters ("" otherwise): `TextIndex.longest`."""
    return TextIndex([text]).longest(piece, Work())


def bounded_strings(value: Any, limit: int) -> list[str]:
    """The strings of `value` with at least `EVIDENCE_CHARS` characters, in order, cut so
    that together they hold at most `limit` characters."""
    found: list[str] = []
    for text in strings_in(value):
        if limit < EVIDENCE_CHARS:
            break
        if len(text) >= EVIDENCE_CHARS:
            found.append(text[:limit])
            limit -= len(found[-1])
    return found


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS].rstrip() + "..."
