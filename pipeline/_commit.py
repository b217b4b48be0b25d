"""A call's commit, S11–S14 (docs/pipeline-spec.md §2, §7): the ``tools/post-execute``
waterfall on the post route, materialization, ``finalize_content`` (at most once), and the
publication to the ``tools/result`` observers, with the check that none of them wrote
through the published result.

Separate from admission and dispatch: it runs in the callers' commit order, once the
dispatch is over (or was skipped, or the call abandoned).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import msgspec
from msgspec import UNSET

from ._content import blocks_text, freeze_blocks, freeze_contexts
from ._decisions import Accept, Block
from ._errors import HookError, NotLosslessError
from ._materialize import MATERIALIZATION_MESSAGE, fingerprint, materialize, restored, success
from ._normalize import body_failure, failure_from, listener_failure
from ._pending_state import PendingState, aborted
from ._result import CallResult, ToolErrorDetail
from ._shield import own_cancellation

__all__ = ["CommitPhase"]

_log = logging.getLogger("codemode.pipeline")


class CommitPhase(PendingState):
    """S11 (post route only) and S12–S14 (``commit``)."""

    __slots__ = ()

    async def commit(self) -> CallResult:
        """S11 (post route only), S12–S14; returns the published frozen result."""
        if self._phase in ("created", "started") and self.route != "dispatch":
            self._phase = "dispatched"
        if self._phase != "dispatched":
            raise RuntimeError(f"{self!r}: commit() called in phase {self._phase!r}")
        self._phase = "committing"
        if self.route == "post":
            await self._post()
        assert self.result is not None
        result = self._finalize(self.result)
        self._published = result
        self._phase = "committed"
        scopes = self._scopes
        watched = any(reg.applies(scopes) for reg in self._registry.result_observers)
        taken = fingerprint(result) if watched else b""
        self._registry.publish(self.execution, result)
        if watched and fingerprint(result) != taken:  # an observer wrote through it
            _log.warning("a tools/result observer changed the frozen result of %s; the caller "
                         "gets the result as published", self.execution.call_id)
            result = restored(result, taken)
            self._published = result
        return result

    async def _post(self) -> None:
        assert self.result is not None
        current = self.result
        scopes = self._scopes
        watched = self._registry.post_execute.applies(scopes)
        if not watched:      # nothing to ask: the result as it stands (``Accept``)
            result = current
            if self.caller.aborted and not result.is_error:
                result = aborted(not self.body_invoked, result.additional_contexts)
            self._settle("final", result)
            return
        taken = fingerprint(current)
        try:
            decision = await self._registry.post_execute.run(
                (self.execution, current), Accept, scopes
            )
            if fingerprint(current) != taken:
                raise HookError(
                    "a tools/post-execute listener changed the frozen result of this call")
            result = self._apply_post(decision, current)
        except BaseException as exc:
            if own_cancellation(exc):
                raise
            self._settle("final", listener_failure(exc, "a tools/post-execute listener"))
            return
        if self.caller.aborted and not result.is_error:
            result = aborted(not self.body_invoked, result.additional_contexts)
        self._settle("final", result)

    def _apply_post(self, decision: Any, result: CallResult) -> CallResult:
        if isinstance(decision, Block):
            feedback = freeze_blocks(decision.feedback, what="block feedback")
            message = blocks_text(feedback) or "blocked by tools/post-execute policy"
            return CallResult(
                is_error=True,
                content=feedback,
                error=ToolErrorDetail(message=message),
                additional_contexts=freeze_contexts(decision.additional_contexts),
                denied=True,
            )
        if not isinstance(decision, Accept):
            raise TypeError(
                f"tools/post-execute returned an invalid decision ({type(decision).__name__})"
            )
        extra = freeze_contexts(decision.additional_contexts)
        contexts = result.additional_contexts + extra
        has_content = decision.content is not UNSET
        has_value = decision.value is not UNSET
        if has_content and has_value:
            raise ValueError(
                "a tools/post-execute decision may replace the content or the value, not both"
            )
        if has_value:
            if result.is_error:
                raise ValueError("tools/post-execute cannot replace the value of a failed result")
            defn = self._resolve()
            if defn is None:
                raise self._unknown_tool()
            built = success(defn, self.execution, decision.value,
                            concludes=result.concludes_turn)
            self._own.append(built)
            return msgspec.structs.replace(built, additional_contexts=contexts)
        if has_content:
            content = freeze_blocks(decision.content, what="replacement content")
            return msgspec.structs.replace(result, content=content, additional_contexts=contexts)
        if extra:
            return msgspec.structs.replace(result, additional_contexts=contexts)
        return result

    def _finalize(self, result: CallResult) -> CallResult:
        """S12 materialization, S13 ``finalize_content`` (at most once), S12 again. A
        result this call froze itself, which every listener that saw it was checked not to
        have changed, is already materialized."""
        try:
            if not any(r is result for r in self._own):
                result = materialize(result)
        except Exception:
            result = failure_from(NotLosslessError(MATERIALIZATION_MESSAGE))
        finalizer = self._finalizer
        if finalizer is None:
            return result
        try:
            out = finalizer(self.execution, result)
            if inspect.isawaitable(out):
                if hasattr(out, "close"):
                    out.close()
                raise TypeError(
                    "finalize_content must be synchronous, but it returned an awaitable"
                )
            if out is not None:
                result = msgspec.structs.replace(
                    result, content=freeze_blocks(out, what="finalized content")
                )
            return materialize(result)
        except BaseException as exc:
            return body_failure(exc, self.execution.name)
