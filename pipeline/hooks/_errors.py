"""Typed errors of the command-hook bridge. A hook bridge that raises fails the call on the
final-result route (docs/pipeline-spec.md §2 S4, S11): no body, no post-execute.

    HarnessError
     └── HookError            HOOK_FAILED    the hook could not be started, or raised
                                             (defined in pipeline/_errors.py: any failing
                                             listener has this code)
          └── HookTimeoutError HOOK_TIMEOUT  the hook ran past its timeout and was killed
"""

from __future__ import annotations

from .._errors import HookError

__all__ = ["HookError", "HookTimeoutError"]


class HookTimeoutError(HookError):
    code = "HOOK_TIMEOUT"
