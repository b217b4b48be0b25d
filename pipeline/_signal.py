"""``Signal``: cooperative cancellation, like a JavaScript ``AbortSignal`` (docs/pipeline-spec.md
§6).

A signal starts live and can be aborted once; aborting is sticky. ``abort`` may be called
from any thread; callbacks run synchronously on the aborting thread, and ``await wait()``
wakes on its own event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from ._errors import AbortedError

__all__ = ["Signal"]

_log = logging.getLogger("codemode.pipeline")


class Signal:
    """A one-shot cancellation flag with callbacks.

    Attributes:
        aborted: ``True`` once ``abort`` was called (on this signal or, for a derived signal,
            on any source).
        reason: the value passed to ``abort`` (default: an ``AbortedError("aborted")``);
            ``None`` while live.
    """

    __slots__ = ("__weakref__", "_aborted", "_callbacks", "_detach", "_lock", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._callbacks: list[Callable[[Any], Any]] = []
        self._lock = threading.Lock()
        self._detach: list[tuple[Signal, Callable[[Any], Any]]] = []  # (source, callback)

    def __repr__(self) -> str:
        return f"<Signal aborted={self._aborted}>"

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def abort(self, reason: Any = None) -> None:
        """Abort (idempotent: later calls change nothing). Runs callbacks in order.

        A callback that raises is logged and skipped; the others still run.
        """
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            self._reason = AbortedError("aborted") if reason is None else reason
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self._reason)
            except Exception:
                _log.warning("signal abort callback %r raised", callback, exc_info=True)

    def on_abort(self, callback: Callable[[Any], Any]) -> Callable[[], None]:
        """Call ``callback(reason)`` once on abort; return an idempotent disposer.

        If the signal is already aborted the callback runs immediately.
        """
        with self._lock:
            if not self._aborted:
                self._callbacks.append(callback)

                def dispose() -> None:
                    with self._lock:
                        try:
                            self._callbacks.remove(callback)
                        except ValueError:
                            pass

                return dispose
        callback(self._reason)
        return lambda: None

    async def wait(self) -> Any:
        """Wait until aborted; return the reason. Safe to cancel."""
        if self._aborted:
            return self._reason
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def wake(reason: Any) -> None:
            def settle() -> None:
                if not future.done():
                    future.set_result(reason)

            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # loop closed
                pass

        dispose = self.on_abort(wake)
        try:
            return await future
        finally:
            dispose()

    def throw_if_aborted(self) -> None:
        """Raise the reason if it is an exception, else ``AbortedError``, when aborted."""
        if self._aborted:
            if isinstance(self._reason, BaseException):
                raise self._reason
            raise AbortedError("aborted")

    def detach(self) -> None:
        """For a derived signal (``Signal.any``): stop listening to the sources."""
        detach, self._detach = self._detach, []
        for source, callback in detach:
            source._forget(callback)

    def _forget(self, callback: Callable[[Any], Any]) -> None:
        with self._lock:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

    @classmethod
    def any(cls, *signals: Signal) -> Signal:
        """A signal that aborts as soon as any of ``signals`` does, with that one's reason.

        Already aborted if one of them is. Call ``detach()`` when done to unsubscribe.
        (Made for every sub-call: each source keeps the derived signal's ``abort`` itself,
        not a disposer made for it.)
        """
        derived = cls()
        abort = derived.abort
        for source in signals:
            with source._lock:
                if not source._aborted:
                    source._callbacks.append(abort)
                    derived._detach.append((source, abort))
                    continue
            derived.abort(source.reason)
            derived.detach()
            return derived
        return derived

    @classmethod
    def aborted_with(cls, reason: Any = None) -> Signal:
        """A signal that is already aborted."""
        signal = cls()
        signal.abort(reason)
        return signal
