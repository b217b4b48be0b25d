"""Typed errors of the command-hook bridge. A hook bridge that raises fails the call on the
final-result route (PIPELINE.md §2 S4, S11): no body, no post-execute.

    HarnessError
     └── HookError            HOOK_FAILED    the hook could not be started
          └── HookTimeoutError HOOK_TIMEOUT  the hook ran past its timeout and was killed
"""

from __future__ import annotations

from .._errors import HarnessError

__all__ = ["HookError", "HookTimeoutError"]


class HookError(HarnessError):
    code = "HOOK_FAILED"


class HookTimeoutError(HookError):
    code = "HOOK_TIMEOUT"
