"""Text as a person may safely be shown it: every character that is invisible or changes
how the text around it reads is written as an escape.

An approval question, a terminal listing or a report shows tool names, arguments and
reasons that a program (or a tool's result) chose. Characters that do not show as
themselves could make that text lie: a right-to-left override reverses a file name
(`invoice\u202etxt.exe` reads as `invoiceexe.txt`), a zero-width space or joiner hides part
of an address, a line or paragraph separator (or a carriage return) starts a fake line
("approved by admin"), and terminal control sequences redraw the screen. `visible`
escapes, by Unicode general category, every control character (Cc: C0, DEL, C1), every
format character (Cf: the bidirectional controls U+200E/F, U+202A-E, U+2066-9 and U+061C,
the zero-width U+200B-D, U+2060-4 and U+FEFF, soft hyphen, tags, ...) and the line and
paragraph separators (Zl, Zp), as `\\xNN` or `\\uNNNN` (`\\UNNNNNNNN` past the BMP). New
characters of those categories are covered as Python's Unicode database learns them.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["visible"]

_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})
_CANDIDATE = re.compile(r"[^\x20-\x7e]")      # printable ASCII is always shown as it is


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xff:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xffff else f"\\U{code:08x}"


def visible(text: str, *, lines: bool = True) -> str:
    """`text` with its invisible and reading-changing characters escaped (the module
    docstring says which).

    Args:
        text: any text.
        lines: keep newlines and tabs as they are (a multi-line message); False escapes
            them too (a table cell, a one-line field).
    Returns:
        The text, equal to `text` when it holds none of those characters.
    """
    def shown(found: re.Match[str]) -> str:
        char = found.group()
        if lines and char in "\n\t":
            return char
        return _escape(char) if unicodedata.category(char) in _HIDDEN else char

    return _CANDIDATE.sub(shown, text)
