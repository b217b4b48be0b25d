"""What a person is shown (`codemode._run.visible`): every control, format and separator
character is an escape, in every channel that shows tool names, arguments and reasons."""

from __future__ import annotations

import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from codemode._eval._report import printable
from codemode._run.render import _render_pending
from codemode._run.visible import visible
from codemode.cli._render import safe_text

HIDDEN_KINDS = {"Cc", "Cf", "Zl", "Zp"}


def test_every_hidden_character_of_the_unicode_database_is_escaped():
    hidden = [chr(c) for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) in HIDDEN_KINDS and chr(c) not in "\n\t"]
    assert len(hidden) > 200           # C0, C1, bidi controls, zero-widths, tags, ...
    shown = visible("".join(hidden))
    assert not any(unicodedata.category(c) in HIDDEN_KINDS for c in shown)
    assert visible("\u202e") == "\\u202e" and visible("\U000e0041") == "\\U000e0041"
    assert visible("\x1b[2J\r") == "\\x1b[2J\\x0d"


@given(st.text())
def test_shown_text_holds_no_hidden_character_and_keeps_the_rest(text: str):
    shown = visible(text)
    assert not any(unicodedata.category(c) in HIDDEN_KINDS and c not in "\n\t" for c in shown)
    one_line = visible(text, lines=False)
    assert "\n" not in one_line and "\t" not in one_line
    if not any(unicodedata.category(c) in HIDDEN_KINDS for c in text):
        assert one_line == text


def test_the_terminal_the_report_and_the_pending_text_use_it():
    name = "invoice\u202etxt.exe\u200b\u2028admin"
    assert safe_text(name + "\n") == "invoice\\u202etxt.exe\\u200b\\u2028admin\n"
    assert printable(name + "\n") == "invoice\\u202etxt.exe\\u200b\\u2028admin\\x0a"
    [block] = _render_pending({"run_id": "r", "approvals": [
        {"id": "r:1", "toolName": "send\u202e", "arguments": {"to": name},
         "reason": "ok\u2029approved by admin"}]})
    assert not set("\u202e\u200b\u2028\u2029") & set(block["text"])
    assert "send\\u202e" in block["text"] and "ok\\u2029approved by admin" in block["text"]
