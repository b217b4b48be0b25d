"""How many examples the property-based tests run: a few in the default suite (seconds),
as many as `CODEMODE_FUZZ_EXAMPLES` says in a fuzz run (`python scripts/fuzz.py`)."""

from __future__ import annotations

import os


def examples(default: int) -> int:
    """`default`, or `CODEMODE_FUZZ_EXAMPLES` when it is set (a fuzz run)."""
    value = os.environ.get("CODEMODE_FUZZ_EXAMPLES")
    return int(value) if value else default
