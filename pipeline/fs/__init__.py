"""Workspace filesystem tools over the read-before-edit gate (docs/pipeline-spec.md §9).

``filesystem_tools(root, session=...)`` builds ``read``, ``write``, ``edit``, ``list``,
``glob`` and ``grep`` confined to ``root``. Observations live in the session's
``codemode.pipeline.FsGate`` (``session_gate``), which logs ``fs/observed`` events; a
``WorkspaceStore`` enforces the gate's write conditions atomically on disk.
"""

from ._attach import session_gate
from ._errors import (
    FsEditError,
    FsNotADirectoryError,
    FsNotAFileError,
    FsNotTextError,
    FsOutsideRootError,
)
from ._paths import Target, Workspace
from ._store import WorkspaceStore
from ._tools import (
    READ_REMEDY,
    REREAD_REMEDY,
    EditResult,
    GrepMatch,
    GrepResult,
    WriteResult,
    filesystem_tools,
)
from ._version import Version

__all__ = [
    "READ_REMEDY",
    "REREAD_REMEDY",
    "EditResult",
    "FsEditError",
    "FsNotADirectoryError",
    "FsNotAFileError",
    "FsNotTextError",
    "FsOutsideRootError",
    "GrepMatch",
    "GrepResult",
    "Target",
    "Version",
    "Workspace",
    "WorkspaceStore",
    "WriteResult",
    "filesystem_tools",
    "session_gate",
]
