"""Hooks: user executables and Python callables as pipeline policy (docs/pipeline-spec.md §2
S4/S11, §10).

``command_hook(session, point, command, matcher=..., timeout_s=...)`` runs the command per
matching call with the call as JSON on stdin; ``python_hook(session, point, handler,
matcher=...)`` calls ``handler`` per matching call. Both map the hook's answer onto the
waterfall decision the same way and log ``hook/invoked`` / ``hook/result``.
"""

from ._answer import Answer, decide, interpret
from ._bridge import DIALECT, PYTHON_DIALECT, PythonHandler, command_hook, python_hook
from ._errors import HookError, HookTimeoutError
from ._payload import EVENT_NAMES, payload

__all__ = [
    "DIALECT",
    "EVENT_NAMES",
    "PYTHON_DIALECT",
    "Answer",
    "HookError",
    "HookTimeoutError",
    "PythonHandler",
    "command_hook",
    "decide",
    "interpret",
    "payload",
    "python_hook",
]
