"""The errors of the MCP client (`client`): one tree under `McpError`, apart so that the
transport, the recovery of broken messages and the answers' classification raise the same
classes without importing the server's lifecycle.

Each is a `HarnessError`, so a failed call keeps `{name, code}` in the log and the program
sees the code on its `ToolCallError`::

    McpError                MCP_ERROR
     ├── McpStartError      MCP_START_FAILED  bad command, early exit, handshake timeout;
     │                                        the message names the command and ends with
     │                                        the tail of the server's stderr
     ├── McpServerDied      MCP_SERVER_DIED   the connection ended while a call was pending
     │                                        (or before it was sent)
     ├── McpCallTimeout     TOOL_TIMEOUT      no answer within `call_timeout_s` (or the
     │                                        timeout given to `call`)
     ├── McpProtocolError   MCP_PROTOCOL_ERROR the server's answer could not be parsed
     └── McpToolError       TOOL_ERROR        the server answered `isError: true` (message:
                                              the server's text) or with a JSON-RPC error
"""

from __future__ import annotations

from collections.abc import Sequence

from codemode.pipeline import HarnessError

__all__ = [
    "McpCallTimeout",
    "McpError",
    "McpProtocolError",
    "McpServerDied",
    "McpStartError",
    "McpToolError",
]


class McpError(HarnessError):
    """Base of the MCP adapter's errors.

    Attributes:
        server: the server's display name.
        code: stable code (see the module docstring).
    """

    code = "MCP_ERROR"

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class McpStartError(McpError):
    """The server did not start: the command could not be run, it exited before answering,
    or the handshake did not complete within `startup_timeout_s`.

    Attributes:
        command: the argv that was run.
        stderr_tail: the last `STDERR_TAIL_BYTES` bytes of its stderr, decoded (may be "").
    """

    code = "MCP_START_FAILED"

    def __init__(self, message: str, *, server: str, command: Sequence[str],
                 stderr_tail: str) -> None:
        super().__init__(message, server=server)
        self.command = tuple(command)
        self.stderr_tail = stderr_tail


class McpServerDied(McpError):
    """The connection to a running server ended (the process exited or closed stdout)."""

    code = "MCP_SERVER_DIED"


class McpCallTimeout(McpError):
    """A `tools/call` got no answer within the server's `call_timeout_s`."""

    code = "TOOL_TIMEOUT"


class McpProtocolError(McpError):
    """The server sent an answer that could not be parsed (not JSON, or not a JSON-RPC
    message); the call it answered, or every call in flight when it named none, fails at
    once instead of waiting for its timeout."""

    code = "MCP_PROTOCOL_ERROR"


class McpToolError(McpError):
    """The server reported a failed call: `isError: true` (message: its text content) or a
    JSON-RPC error such as an unknown tool or invalid parameters (message: the error's)."""

    code = "TOOL_ERROR"
