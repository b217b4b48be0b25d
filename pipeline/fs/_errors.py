"""Typed errors of the filesystem tools beyond the gate's three (docs/pipeline-spec.md §9).

The tree (``codemode.pipeline._errors.FsError`` is the base)::

    FsError
     ├── FsNotObservedError     FS_NOT_OBSERVED    (pipeline._errors)
     ├── FsStaleVersionError    FS_STALE_VERSION   (pipeline._errors)
     ├── FsNotFoundError        FS_NOT_FOUND       (pipeline._errors)
     ├── FsOutsideRootError     FS_OUTSIDE_ROOT    traversal, foreign absolute path, symlink escape
     ├── FsNotAFileError        FS_NOT_A_FILE      a directory (or device) where a file is needed
     ├── FsNotADirectoryError   FS_NOT_A_DIRECTORY a file where a directory is needed
     ├── FsNotTextError         FS_NOT_TEXT        ``edit`` of bytes that are not UTF-8
     └── FsEditError            FS_EDIT_FAILED     no match, ambiguous match, no-op edit

Codes are persisted with failed results: never rename one.
"""

from __future__ import annotations

from .._errors import FsError

__all__ = [
    "FsEditError",
    "FsNotADirectoryError",
    "FsNotAFileError",
    "FsNotTextError",
    "FsOutsideRootError",
]


class FsOutsideRootError(FsError):
    code = "FS_OUTSIDE_ROOT"


class FsNotAFileError(FsError):
    code = "FS_NOT_A_FILE"


class FsNotADirectoryError(FsError):
    code = "FS_NOT_A_DIRECTORY"


class FsNotTextError(FsError):
    code = "FS_NOT_TEXT"


class FsEditError(FsError):
    code = "FS_EDIT_FAILED"
