"""A plan approval as it is stored (docs/codemode.md "Plan before the run"): its decided
entries and its seal. Apart from `plan_approval`, which makes and follows one, so that a
paused run's record (`replay.RunRecord`) can carry the approval it follows."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["ApprovedEntry", "PlanApproval"]


class ApprovedEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One decided entry: the plan's entry `n`, its tool and arguments, and the decision."""

    n: int
    tool: str
    arguments: Any
    approved: bool
    reason: str = ""


class PlanApproval(msgspec.Struct, frozen=True, kw_only=True):
    """The sealed decisions on a plan's asked entries (`approve_plan`); JSON-encodable
    (`msgspec.json.encode`), so it may be stored and used by another process with the same
    seal key.

    Attributes:
        id: this approval's id (random); the answers it gives name it.
        code: the program it is for.
        entries: the decided entries, in the plan's order.
        seal: hex HMAC-SHA256 over the rest (`SealKey.sign`).
    """

    id: str
    code: str
    entries: tuple[ApprovedEntry, ...]
    seal: str = ""
