"""Where the commands draw: a terminal at its width, a pipe or a file whole.

On a terminal, rich draws tables, panels and messages at the terminal's width (it asks the
terminal; `COLUMNS` overrides). Piped or redirected, the reader is a program, a log or a
pager: a case id cut with `…` or a message broken mid-sentence at 80 columns (rich's width
when it cannot ask a terminal) is harder to read and to match. There the consoles draw at a
width no line reaches (`WHOLE`, `COLUMNS` ignored): tables take their natural width, cells
are never cut or folded, messages never wrapped. What a command cuts for the screen (a
long argument in `log show`, a sub-call's outcome in `run`'s table) it prints whole there
(`on_terminal`).
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:   # rich loads when something is drawn: `codemode --help` needs typer's only
    from rich.console import Console

__all__ = ["WHOLE", "console_for", "err_console", "on_terminal", "print_error",
           "terminal_width"]

WHOLE = 1 << 20
"""The width of a console that is not a terminal: wider than any line a command draws."""


def console_for(stream: TextIO) -> Console:
    """A rich console writing to `stream`: at the terminal's width when it is one, else
    at `WHOLE` (nothing cut or wrapped)."""
    from rich.console import Console

    console = Console(file=stream)
    if not console.is_terminal:
        console = Console(file=stream, width=WHOLE)
    return console


@functools.cache
def err_console() -> Console:
    """The console of the card and of error messages: stderr (made on first use)."""
    return console_for(sys.stderr)


def on_terminal(stream: TextIO) -> bool:
    """True when `stream` is a terminal (then a command may cut what does not fit)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):      # closed, or not a real stream
        return False


def terminal_width(stream: TextIO) -> int | None:
    """The width of the terminal `stream` is, in columns (`COLUMNS` overrides, as for
    rich); None when it is not a terminal."""
    if not on_terminal(stream):
        return None
    from rich.console import Console

    return Console(file=stream).width


def print_error(label: str, text: str, **options: Any) -> None:
    """`label: text` on stderr, the label in red, `text` shown as it is (no rich markup,
    no highlighting); wrapped at the terminal's width, whole when stderr is not one.
    `options` go to `Console.print`."""
    from rich.markup import escape

    err_console().print(f"[red]{label}:[/red] {escape(text)}", highlight=False, **options)
