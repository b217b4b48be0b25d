"""What a hook said, as a waterfall answer: a finished hook process (``interpret``) or a
hook's JSON answer object (``decide``: a command's stdout, a Python hook's returned dict).

Exit code and stdout map as follows (``pre``: ``tools/pre-execute``, ``post``:
``tools/post-execute``):

====================================  ===========================  =========================
hook output                           pre                          post
====================================  ===========================  =========================
exit 2                                deny, stderr as the reason   block, stderr as feedback
other non-zero exit                   error: delegate + warning    error: delegate + warning
exit 0, stdout empty or not JSON      delegate                     delegate
exit 0, ``{"decision": d, "reason"}`` d: allow | deny | ask         d: block (deny) or none
                                      (``approve`` = allow,         (``allow``/``approve``/
                                      ``block`` = deny)             ``accept`` = none)
exit 0, ``{"hookSpecificOutput":      wins over ``decision``        ignored
{"permissionDecision": d,
"permissionDecisionReason": r}}``
``additionalContext`` (top level or   ignored                      contexts appended to the
inside ``hookSpecificOutput``)                                     result ("accept")
``updatedInput`` (top level or        deny, naming the hook: this  ignored
inside ``hookSpecificOutput``), with  pipeline never rewrites
any decision or none                  arguments
JSON that does not parse, or an       error: delegate + warning    error: delegate + warning
unknown decision
====================================  ===========================  =========================

The exit-0 JSON rows are ``decide``; a Python hook's ``None`` is the empty-stdout row.
A deny or block without a reason gets ``denied by hook "<id>"`` / ``blocked by hook "<id>"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from ._process import Completed

__all__ = ["Answer", "decide", "interpret", "summarize"]

Decision = Literal["allow", "deny", "ask", "block", "accept", "delegate", "error"]

_STDERR_SUMMARY_CHARS = 500
_PRE = {"allow": "allow", "approve": "allow", "deny": "deny", "block": "deny", "ask": "ask"}
_POST = {"block": "block", "deny": "block", "allow": None, "approve": None, "accept": None}


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """The hook's answer.

    Attributes:
        decision: ``allow``/``deny``/``ask`` (pre), ``block``/``accept`` (post),
            ``delegate`` (no opinion) or ``error`` (non-blocking failure: delegate, warn).
        reason: the deny/ask reason or the block feedback.
        contexts: additional contexts for the result (post only).
        warning: what to warn about (``error`` answers).
    """

    decision: Decision
    reason: str | None = None
    contexts: tuple[str, ...] = ()
    warning: str | None = None


def summarize(stderr: bytes) -> str | None:
    """The first 500 characters of stripped stderr (``…`` marks a cut); ``None`` if empty."""
    text = stderr.decode("utf-8", "replace").strip()
    if not text:
        return None
    return text if len(text) <= _STDERR_SUMMARY_CHARS else text[:_STDERR_SUMMARY_CHARS] + "…"


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def interpret(point: Literal["pre", "post"], done: Completed, handler_id: str) -> Answer:
    """Map a finished hook process onto an ``Answer`` (see the module table)."""
    blocked: Decision = "block" if point == "post" else "deny"
    default_reason = f'{"blocked" if point == "post" else "denied"} by hook "{handler_id}"'
    if done.exit_code == 2:
        return Answer(
            decision=blocked, reason=_text(done.stderr.decode("utf-8", "replace")) or default_reason
        )
    if done.exit_code != 0:
        detail = summarize(done.stderr)
        return Answer(
            decision="error",
            warning=f'hook "{handler_id}" failed with exit code {done.exit_code}'
            + (f": {detail}" if detail else ""),
        )
    out = done.stdout.decode("utf-8", "replace").strip()
    if not out.startswith("{"):
        return Answer(decision="delegate")
    try:
        data = msgspec.json.decode(out)
    except msgspec.DecodeError as exc:
        return Answer(decision="error", warning=f'hook "{handler_id}" printed invalid JSON: {exc}')
    if not isinstance(data, dict):
        return Answer(
            decision="error", warning=f'hook "{handler_id}" printed JSON that is not an object'
        )
    return decide(point, data, handler_id)


def decide(point: Literal["pre", "post"], data: Mapping[str, Any], handler_id: str) -> Answer:
    """Map a hook's JSON answer object (the exit-0 rows of the module table) onto an
    ``Answer``; shared by command hooks (their stdout) and Python hooks (their return)."""
    blocked: Decision = "block" if point == "post" else "deny"
    default_reason = f'{"blocked" if point == "post" else "denied"} by hook "{handler_id}"'
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    if point == "pre":
        raw, reason = specific.get("permissionDecision"), specific.get("permissionDecisionReason")
        if raw is None:
            raw, reason = data.get("decision"), data.get("reason")
        if specific.get("updatedInput") is not None or data.get("updatedInput") is not None:
            # Whatever the decision: allowing the original would silently drop the rewrite,
            # running the rewrite would run arguments other than the ones logged.
            why = f" (its reason: {_text(reason)})" if _text(reason) else ""
            return Answer(decision="deny",
                          reason=f'hook "{handler_id}" asked to rewrite the tool input '
                                 "(updatedInput), and arguments are never rewritten: "
                                 f"the call is denied{why}")
        if raw is None:
            return Answer(decision="delegate")
        decision = _PRE.get(raw) if isinstance(raw, str) else None
        if decision is None:
            return Answer(
                decision="error",
                warning=f'hook "{handler_id}" returned an unknown decision {raw!r}',
            )
        if decision == blocked:
            return Answer(decision=blocked, reason=_text(reason) or default_reason)
        return Answer(decision=decision, reason=_text(reason))  # type: ignore[arg-type]
    context = specific.get("additionalContext", data.get("additionalContext"))
    contexts = (context,) if isinstance(context, str) and context.strip() else ()
    raw = data.get("decision")
    if raw is not None and (not isinstance(raw, str) or raw not in _POST):
        return Answer(
            decision="error", warning=f'hook "{handler_id}" returned an unknown decision {raw!r}'
        )
    if raw is not None and _POST[raw] == "block":
        return Answer(decision=blocked, reason=_text(data.get("reason")) or default_reason)
    return Answer(decision="accept", contexts=contexts) if contexts else Answer(decision="delegate")
