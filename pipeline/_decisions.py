"""Decisions returned by ``tools/pre-execute`` and ``tools/post-execute`` listeners
(docs/pipeline-spec.md §1.5). There is no argument-rewrite decision."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["Accept", "Allow", "Ask", "Block", "Deny", "PostDecision", "PreDecision"]


class Allow(msgspec.Struct, frozen=True):
    """Pre-execute: let the call proceed (guards may still deny)."""


class Deny(msgspec.Struct, frozen=True):
    """Pre-execute: refuse the call; ``reason`` becomes the failure message.

    ``code``: a stable code for the refusal (``"QUOTA_EXCEEDED"``), kept in the failure's
    ``error.info`` (``{name: "Denied", code}``) so that a program's ``ToolCallError`` carries
    it; None (the default): a plain denial, code ``DENIED`` in a program."""

    reason: str
    code: str | None = None


class Ask(msgspec.Struct, frozen=True):
    """Pre-execute: ask the approval channel; ``reason`` is shown to the answerer.

    ``defer=True`` says the answer may come later: a caller that can stop and resume (a
    Code-Mode run) does not wait for it, but stops and returns the pending request
    (``ApprovalRequest.defer``); any other caller asks the channel as usual."""

    reason: str | None = None
    defer: bool = False


class Accept(msgspec.Struct, frozen=True, kw_only=True):
    """Post-execute: keep the result, optionally replacing ``content`` (blocks) **or**
    ``value`` (a success only; revalidated and re-rendered), never both; append
    ``additional_contexts`` (strings or block lists)."""

    content: Any | UnsetType = UNSET
    value: Any | UnsetType = UNSET
    additional_contexts: tuple[Any, ...] | list[Any] = ()


class Block(msgspec.Struct, frozen=True):
    """Post-execute: turn the result into a failure whose content is exactly ``feedback``
    (blocks or a string); drops earlier contexts, keeps only this decision's."""

    feedback: Any
    additional_contexts: tuple[Any, ...] | list[Any] = ()


PreDecision = Allow | Deny | Ask
PostDecision = Accept | Block
