"""Command hooks: user executables as pipeline policy (PIPELINE.md §2 S4/S11, §10).

``command_hook(session, point, command, matcher=..., timeout_s=...)`` runs the command per
matching call with the call as JSON on stdin, maps its exit code and JSON answer onto the
waterfall decision, and logs ``hook/invoked`` / ``hook/result``.
"""

from ._answer import Answer, interpret
from ._bridge import DIALECT, command_hook
from ._errors import HookError, HookTimeoutError
from ._payload import EVENT_NAMES, payload

__all__ = ["DIALECT", "EVENT_NAMES", "Answer", "HookError", "HookTimeoutError", "command_hook", "interpret", "payload"]
