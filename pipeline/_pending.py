"""``PendingCall``: one call through S3–S14 (docs/pipeline-spec.md §2–§7), its three phases
joined. Composition, outermost first::

    normalization (anything thrown -> failed result)
      tools/pre-execute waterfall -> approval (ask) -> guards -> cancellation re-checks
      tools/execute waterfall (registration order) -> core dispatch -> tool body
      dispatch normalization -> tools/post-execute waterfall
    materialization -> finalize_content (once) -> tools/result observers

Routes: ``dispatch`` (continue), ``post`` (skip the body, still run post-execute), ``final``
(skip everything up to finalization).

Each phase is a module of its own: ``_admission`` (S3–S7), ``_dispatch`` (S8–S10),
``_commit`` (S11–S14), on the state they share (``_pending_state``). This module only
joins them.
"""

from __future__ import annotations

from ._admission import AdmissionPhase
from ._commit import CommitPhase
from ._dispatch import DispatchPhase

__all__ = ["PendingCall"]


class PendingCall(AdmissionPhase, DispatchPhase, CommitPhase):
    """One call in flight: made by ``ToolRegistry.prepare`` (S3), then ``start()`` (S4–S7),
    ``dispatch()`` (S8–S10), ``commit()`` (S11–S14). Each phase runs at most once;
    ``commit`` returns the published result. Batches and sub-call schedulers run the phases
    separately so that only ``dispatch`` overlaps between calls; ``abandon()`` ends a call
    whatever phase it is stuck in."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<PendingCall {self._input.name} {self._input.call_id} route={self.route}>"
