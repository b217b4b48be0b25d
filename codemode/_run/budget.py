"""`run_code`'s description under a size budget (docs/codemode.md "A description with a
budget").

While the full listing (`description.describe_tools`) fits `budget` characters together
with the words around it, the description is the full one. Past it, the listing gives way
to an index: each tool's Python name and a one-line summary, grouped by where the tools
come from (an MCP server; else the name's prefix), and a paragraph saying how a program
finds the rest (`search_tools`, `describe`: `discovery`). With thousands of tools the
index itself is shortened, step by step, until it fits: shorter summaries, then names
only, then the first names of each group with a count of the others, then only the
groups' names and sizes, as many as fit, with a count of the rest. The description never
exceeds the budget: as a last resort (a budget smaller than the words around the listing
themselves) it is cut, ending in "…".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .stubs import ToolStub

__all__ = ["DEFAULT_DESCRIPTION_BUDGET", "MIN_DESCRIPTION_BUDGET", "bounded", "group_of",
           "summary_of"]

DEFAULT_DESCRIPTION_BUDGET = 50_000
"""Characters of `run_code`'s description by default: about 12,500 tokens (at about four
characters a token), under a tenth of a 128k-token context, paid on every turn. The full
listing of about 60 tools with realistic nested schemas fits it (a tool takes 500-900
characters), so small and medium toolsets keep today's description."""

MIN_DESCRIPTION_BUDGET = 4_000
"""The smallest budget accepted: the words around the listing (about 2,300 characters with
the wasm tier's modules) and the paragraph on discovery, with room for an index line."""

DISCOVERY_TEXT = """
There are too many tools to list here in full. Each tool is still a function of the \
program under the name shown below. Inside a program, `search_tools(query, limit=10)` \
returns the best matches for words of a tool's name, summary or parameters (a list of \
dicts with "name", "tool", "summary" and "signature"), and `describe(name)` returns a tool's full \
typed signature and docstring as text. Both are free (no tool runs, no approval); in async \
code, `await` them like tools. Search, describe, then call.
"""

_INDEX_HEADING = "\nTool index ({n} tools, grouped by {by}; `describe(name)` for the rest):\n"
_SEPARATORS = re.compile(r"[_.\-/: ]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def summary_of(stub: ToolStub, max_chars: int = 100) -> str:
    """The first sentence of `stub`'s docstring's first paragraph, whitespace collapsed, cut
    to `max_chars` characters ending in "…"; "" when it has no docstring."""
    return _cut_summary(_first_sentence(stub.docstring), max_chars)


def _first_sentence(docstring: str) -> str:
    paragraph = re.split(r"\n\s*\n", docstring, maxsplit=1)[0]
    return _SENTENCE_END.split(" ".join(paragraph.split()), maxsplit=1)[0]


def _cut_summary(text: str, max_chars: int) -> str:
    if len(text) > max_chars:
        text = text[: max(max_chars - 1, 0)].rstrip() + "…"
    return text


def group_of(stub: ToolStub) -> str:
    """The group a tool is indexed under: its toolset (`ToolStub.group`, an MCP server's
    name) when it has one, else its name's part before the first `_`, `.`, `-`, `/`, `:`
    or space (`git_status`, `git_log`: `git`), else the whole name."""
    if stub.group:
        return stub.group
    head = _SEPARATORS.split(stub.name, maxsplit=1)[0]
    return head or stub.name


def bounded(full: Callable[[], str], head: str, stubs: Sequence[ToolStub],
            budget: int) -> str:
    """`run_code`'s description within `budget` characters.

    Args:
        full: makes the full description (`head` and the listing); used when it fits.
        head: the words before the listing (how to write a program, modules, limits, the
            rule of code mode).
        stubs: the exposed tools.
        budget: the most characters the result may have (>= 1).
    Returns:
        `full()` when it has at most `budget` characters, else `head`, the discovery
        paragraph and the longest index of `stubs` that fits (see the module docstring).
    """
    # Every signature is in the full listing: when they alone overflow, it is not made.
    if len(head) + sum(len(stub.signature) for stub in stubs) <= budget:
        text = full()
        if len(text) <= budget:
            return text
    servers = sum(1 for s in stubs if s.group)
    by = ("name prefix" if not servers else "server" if servers == len(stubs)
          else "server or name prefix")
    lead = head + DISCOVERY_TEXT + _INDEX_HEADING.format(n=len(stubs), by=by)
    room = budget - len(lead)
    index = _index(stubs, room) if room > 0 else None
    if index is None:
        return _cut(lead, budget)
    return lead + index


def _cut(text: str, budget: int) -> str:
    return text if len(text) <= budget else text[: max(budget - 1, 0)] + "…"


def _groups(stubs: Sequence[ToolStub]) -> list[tuple[str, list[ToolStub]]]:
    grouped: dict[str, list[ToolStub]] = {}
    for stub in sorted(stubs, key=lambda s: (group_of(s), s.alias)):
        grouped.setdefault(group_of(stub), []).append(stub)
    return list(grouped.items())


def _index(stubs: Sequence[ToolStub], room: int) -> str | None:
    """The most detailed index of `stubs` of at most `room` characters, or None when not
    even the shortest form fits."""
    groups = _groups(stubs)
    sentences = {stub.alias: _first_sentence(stub.docstring) for stub in stubs}
    for chars in (100, 60, 30):
        # Each line has at least its name: when the names alone overflow, no need to try.
        if sum(len(a) + 3 for a in sentences) > room:
            break
        text = _with_summaries(groups, sentences, chars)
        if len(text) <= room:
            return text
    text = "".join(_names_line(group, members) for group, members in groups)
    if len(text) <= room:
        return text
    shortened = _truncated(groups, room)
    return shortened if len(shortened) <= room else None


def _with_summaries(groups: list[tuple[str, list[ToolStub]]], sentences: dict[str, str],
                    chars: int) -> str:
    lines: list[str] = []
    for group, members in groups:
        lines.append(f"[{group}]\n")
        for stub in members:
            summary = _cut_summary(sentences[stub.alias], chars)
            lines.append(f"- {stub.alias}: {summary}\n" if summary else f"- {stub.alias}\n")
    return "".join(lines)


def _names_line(group: str, members: Sequence[ToolStub]) -> str:
    return f"[{group}] " + ", ".join(s.alias for s in members) + "\n"


def _more(count: int, what: str) -> str:
    return f"… and {count} more {what}{'' if count == 1 else 's'} (search_tools finds them)"


def _truncated(groups: list[tuple[str, list[ToolStub]]], room: int) -> str:
    """Each group's first names and a count of the others, every group with an equal share
    of `room` (what a short group leaves goes to the groups after it). When a share cannot
    hold even a group's first name, the groups' names and sizes instead (`_group_counts`)."""
    lines: list[str] = []
    used = 0
    for i, (group, members) in enumerate(groups):
        share = (room - used) // (len(groups) - i)
        line = _group_line(group, members, share)
        if line is None:
            return _group_counts(groups, room)
        lines.append(line)
        used += len(line)
    return "".join(lines)


def _group_counts(groups: list[tuple[str, list[ToolStub]]], room: int) -> str:
    """`Groups: a (12), b (40), … and N more tools in K more groups (...)` in at most `room`
    characters when the count line alone fits."""
    def tail(tools: int, count: int) -> str:
        return (f"… and {tools} more tools in {count} more group"
                f"{'' if count == 1 else 's'} (search_tools finds them)\n")

    total = sum(len(m) for _, m in groups)
    reserve = len(tail(total, len(groups)))
    head = "Groups: "
    parts: list[str] = []
    used = len(head) + 1
    for i, (group, members) in enumerate(groups):
        piece = f"{group} ({len(members)})"
        if used + len(piece) + 2 + reserve > room:
            listed = head + ", ".join(parts) + "\n" if parts else ""
            return listed + tail(sum(len(m) for _, m in groups[i:]), len(groups) - i)
        parts.append(piece)
        used += len(piece) + 2
    return head + ", ".join(parts) + "\n"


def _group_line(group: str, members: Sequence[ToolStub], room: int) -> str | None:
    """`[group] a, b, … and N more tools (...)` in at most `room` characters, or None."""
    whole = _names_line(group, members)
    if len(whole) <= room:
        return whole
    prefix = f"[{group}] "
    names: list[str] = []
    length = len(prefix)
    for k, stub in enumerate(members):
        tail = ", " + _more(len(members) - k, "tool") + "\n" if names else \
            _more(len(members) - k, "tool") + "\n"
        piece = (", " if names else "") + stub.alias
        if length + len(piece) + len(", " + _more(len(members) - k - 1, "tool") + "\n") > room:
            line = prefix + ", ".join(names) + tail
            return line if len(line) <= room else None
        names.append(stub.alias)
        length += len(piece)
    return prefix + ", ".join(names) + "\n"
