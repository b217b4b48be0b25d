"""Glob patterns over root-relative POSIX paths.

``*`` matches within one path segment, ``?`` one character of a segment, ``[abc]`` /
``[!abc]`` a character class, and a whole ``**`` segment any number (zero included) of
segments. Patterns match the whole path; hidden files are not special.
"""

from __future__ import annotations

import re

__all__ = ["compile_glob"]


def _segment(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = i + 1
            if end < len(text) and text[end] in "!^":
                end += 1
            if end < len(text) and text[end] == "]":
                end += 1
            end = text.find("]", end)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = text[i + 1:end]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\")
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex that ``fullmatch``es the root-relative paths ``pattern`` selects."""
    parts = pattern.split("/")
    pieces: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            pieces.append(".*" if last else "(?:[^/]+/)*")
        else:
            pieces.append(_segment(part) + ("" if last else "/"))
    return re.compile("".join(pieces), re.DOTALL)
