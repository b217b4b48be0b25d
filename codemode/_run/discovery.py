"""Tool discovery inside a program: `search_tools(query, limit=10)` and `describe(name)`
(docs/codemode.md "Finding tools from a program").

Both are functions of every program on every tier: the host adds them to a run's tools as
two more tool specs (`DISCOVERY_SPECS`, wire names `SEARCH_TOOLS` and `DESCRIBE`), so the
guest binds them like tools (Python's own call rules; `await` them in async code). The
dispatcher answers their calls at once from the run's `ToolIndex`, without the pipeline:
no tool runs, no policy rule or approval applies, and they count in the run's value
(`"subcalls": {"discovery": {"search_tools": n, "describe": m}}`) and, like every call, in
the run's `max_subcalls`. A paused run's record holds their answers, so a resumed run
replays them like any call.

The index holds exactly the stubs of the run's exposed tools: a tool the policy hides is
never found, described, or suggested ("did you mean" picks among the exposed names only).

Ranking (`ToolIndex.search`) is BM25 (k1 = 1.2, b = 0.75) over three fields of each tool,
weighted as a field-weighted term frequency: its Python name and tool name (weight 3), its
parameter names (2), its docstring's first paragraph (1). Words are split at
non-alphanumerics and camelCase, lowercased, a plural's final "s" dropped; the query's
English stop words ("a", "of", "the", ...) are dropped; a query word also matches a longer
word it is a prefix of (at least 3 letters), at half weight. Ties go to the alphabetical
order of the names. A scorer of its own rather than a library: `bm25s` brings numpy and
scipy into the host for a few thousand short documents, and fuzzy matchers (`rapidfuzz`)
rank by string similarity, not by words. It indexes a set of tools once, at the first
search (docs/benchmarks.md "Many tools" has its cost).
"""

from __future__ import annotations

import bisect
import difflib
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from codemode.sandbox import ParamSpec, SubCall, SubCallErr, SubCallOk, SubCallOutcome, ToolSpec

from .budget import summary_of
from .description import describe_tool
from .stubs import ToolStub

__all__ = ["DESCRIBE", "DISCOVERY_NAMES", "DISCOVERY_SPECS", "DISCOVERY_STUBS", "MAX_QUERY_CHARS",
           "MAX_SEARCH_LIMIT", "SEARCH_TOOLS", "ToolIndex"]

SEARCH_TOOLS = "codemode/search_tools"
"""The wire name of `search_tools` (a name no MCP tool may have: "/" is outside MCP's
tool-name characters)."""
DESCRIBE = "codemode/describe"
"""The wire name of `describe`."""
DISCOVERY_NAMES = {SEARCH_TOOLS: "search_tools", DESCRIBE: "describe"}
"""Wire name -> the name the program calls (and the run's value counts it under)."""

MAX_SEARCH_LIMIT = 50
"""The most matches one `search_tools` call returns (a larger `limit` is cut to it)."""
MAX_QUERY_CHARS = 1_000
"""The longest query `search_tools` accepts."""

DISCOVERY_SPECS = (
    ToolSpec(name=SEARCH_TOOLS, alias="search_tools", accepts_extra=False,
             doc="search_tools(query, limit=10) -> list of {'name', 'tool', 'summary', "
                 "'signature'}: the run's tools that best match the words of `query` "
                 f"(at most `limit`, up to {MAX_SEARCH_LIMIT}), best first.",
             params=(ParamSpec(name="query", required=True),
                     ParamSpec(name="limit", required=False, omit_if_none=True))),
    ToolSpec(name=DESCRIBE, alias="describe", accepts_extra=False,
             doc="describe(name) -> str: the full typed signature and docstring of the tool "
                 "`name` (its Python name or tool name), as the full listing shows it.",
             params=(ParamSpec(name="name", required=True),)),
)

DISCOVERY_STUBS = '''\
def search_tools(query: str, limit: int = 10) -> list[dict[str, str]]:
    """The run's tools that best match the words of `query`, best first."""
    ...


def describe(name: str) -> str:
    """The full typed signature and docstring of the tool `name`."""
    ...
'''
"""The two functions as typed stubs, for a module a type checker reads besides the tools'
(`description.stubs_module`)."""

_STOP_WORDS = frozenset("a an and as at be by for from in is it of on or that the this to with"
                        .split())
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_K1, _B = 1.2, 0.75
_FIELD_WEIGHTS = (3, 2, 1)          # names, parameter names, summary paragraph


def _words(text: str) -> list[str]:
    """`text`'s words, lowercased, a plural's final "s" dropped ("orders" -> "order")."""
    words = [w.lower() for w in _WORD.findall(text)]
    return [w[:-1] if len(w) > 3 and w[-1] == "s" and w[-2] not in "su" else w
            for w in words]


class ToolIndex:
    """The run's tools as discovery sees them: built once per set of stubs.

    Args:
        stubs: the exposed tools' stubs (and nothing else: what is not here is never
            found, described or suggested).
    """

    def __init__(self, stubs: Sequence[ToolStub]) -> None:
        self.stubs = sorted(stubs, key=lambda s: s.alias)
        self._built = False                 # the words are indexed at the first search

    def _build(self) -> None:
        self._by_name = {s.alias: s for s in self.stubs}
        for stub in self.stubs:
            self._by_name.setdefault(stub.name, stub)
        self._docs: list[Counter[str]] = []
        df: Counter[str] = Counter()
        for stub in self.stubs:
            paragraph = re.split(r"\n\s*\n", stub.docstring, maxsplit=1)[0]
            fields = (_words(stub.alias) + _words(stub.name),
                      [w for p in stub.params for w in _words(p.name)],
                      _words(paragraph))
            doc: Counter[str] = Counter()
            for weight, words in zip(_FIELD_WEIGHTS, fields, strict=True):
                for word in words:
                    doc[word] += weight
            self._docs.append(doc)
            df.update(doc.keys())
        n = len(self.stubs)
        self._idf = {w: math.log(1 + (n - k + 0.5) / (k + 0.5)) for w, k in df.items()}
        self._lengths = [sum(d.values()) for d in self._docs]
        self._avg = (sum(self._lengths) / n) if n else 1.0
        self._vocabulary = sorted(self._idf)
        self._built = True

    def search(self, query: str, limit: int = 10) -> list[dict[str, str]]:
        """The tools best matching `query`'s words, best first, at most `limit` (cut to
        `MAX_SEARCH_LIMIT`): each `{"name": <Python name>, "tool": <tool name>, "summary":
        <first sentence>, "signature": <the def line>}`. No word in common: `[]`."""
        if not self._built:
            self._build()
        terms = self._terms(query)
        scored: list[tuple[float, str, ToolStub]] = []
        for stub, doc, length in zip(self.stubs, self._docs, self._lengths, strict=True):
            score = 0.0
            norm = _K1 * (1 - _B + _B * length / self._avg)
            for word, weight in terms:
                tf = doc.get(word, 0)
                if tf:
                    score += weight * self._idf[word] * tf * (_K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((-score, stub.alias, stub))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [{"name": s.alias, "tool": s.name, "summary": summary_of(s, 200),
                 "signature": s.signature}
                for _, _, s in scored[: max(1, min(limit, MAX_SEARCH_LIMIT))]]

    def _terms(self, query: str) -> list[tuple[str, float]]:
        """The query's words (weight 1) and the indexed words they are a prefix of
        (weight 1/2, for words of 3 letters or more)."""
        terms: dict[str, float] = {}
        for word in dict.fromkeys(_words(query)):
            if word in _STOP_WORDS:
                continue
            if word in self._idf:
                terms[word] = max(terms.get(word, 0.0), 1.0)
            if len(word) >= 3:
                for known in self._vocabulary_from(word):
                    if known != word:
                        terms.setdefault(known, 0.5)
        return list(terms.items())

    def _vocabulary_from(self, prefix: str) -> list[str]:
        start = bisect.bisect_left(self._vocabulary, prefix)
        found = []
        for word in self._vocabulary[start:]:
            if not word.startswith(prefix):
                break
            found.append(word)
        return found

    def describe(self, name: str) -> str | None:
        """What the full listing shows of the tool `name` (its Python name or its tool
        name; `description.describe_tool`), or None when this run has no such tool."""
        if not self._built:
            self._build()
        stub = self._by_name.get(name)
        return describe_tool(stub) if stub is not None else None

    def close_names(self, name: str) -> list[str]:
        """Up to three of this run's Python names closest to `name` (for "did you mean")."""
        return difflib.get_close_matches(name, [s.alias for s in self.stubs], n=3, cutoff=0.6)

    def answer(self, call: SubCall) -> SubCallOutcome:
        """The answer to a program's `search_tools` or `describe` call (by its wire name).

        A call of the wrong shape (`call.invalid`) or with arguments of the wrong type fails
        `INVALID_ARGS`; `describe` of a name this run does not have fails `UNKNOWN_TOOL`
        (`ToolNotFound` in the program), suggesting only names this run has."""
        if call.invalid is not None:
            return SubCallErr(id=call.id, code="INVALID_ARGS", message=call.invalid)
        args: Any = call.arguments if isinstance(call.arguments, dict) else {}
        if call.name == SEARCH_TOOLS:
            query, limit = args.get("query"), args.get("limit", 10)
            if not isinstance(query, str):
                return _invalid(call, f"query must be a str, not {type(query).__name__}")
            if len(query) > MAX_QUERY_CHARS:
                return _invalid(call, f"query is longer than {MAX_QUERY_CHARS} characters")
            if type(limit) is not int or limit < 1:
                return _invalid(call, f"limit must be an int of at least 1, not {limit!r}")
            return SubCallOk(id=call.id, value=self.search(query, limit))
        name = args.get("name")
        if not isinstance(name, str):
            return _invalid(call, f"name must be a str, not {type(name).__name__}")
        text = self.describe(name)
        if text is not None:
            return SubCallOk(id=call.id, value=text)
        close = self.close_names(name)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else \
            "; search_tools(query) finds tools by words of their names and summaries"
        return SubCallErr(id=call.id, code="UNKNOWN_TOOL",
                          message=f"no tool named {name!r} in this run{hint}")


def _invalid(call: SubCall, message: str) -> SubCallErr:
    return SubCallErr(id=call.id, code="INVALID_ARGS", message=f"{DISCOVERY_NAMES[call.name]}"
                      f"(): {message}")
