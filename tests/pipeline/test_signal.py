import asyncio
import threading

from codemode.pipeline import AbortedError, Signal


def test_abort_is_sticky_and_runs_callbacks_once():
    signal = Signal()
    seen = []
    signal.on_abort(seen.append)
    signal.abort("first")
    signal.abort("second")
    assert (signal.aborted, signal.reason, seen) == (True, "first", ["first"])


def test_default_reason_is_an_abort_error_and_disposer_unsubscribes():
    signal = Signal()
    seen = []
    dispose = signal.on_abort(seen.append)
    dispose()
    signal.abort()
    assert seen == []
    assert isinstance(signal.reason, AbortedError)


def test_any_follows_the_first_source_and_detaches():
    a, b = Signal(), Signal()
    both = Signal.any(a, b)
    b.abort("b")
    assert both.aborted and both.reason == "b"
    c = Signal()
    derived = Signal.any(c)
    derived.detach()
    c.abort()
    assert not derived.aborted
    assert Signal.any(Signal.aborted_with("x")).reason == "x"


async def test_wait_wakes_when_aborted_from_another_thread():
    signal = Signal()
    threading.Timer(0.01, signal.abort, args=("t",)).start()
    assert await asyncio.wait_for(signal.wait(), 10) == "t"


def test_a_raising_callback_does_not_stop_the_others():
    signal = Signal()
    seen = []
    signal.on_abort(lambda r: 1 / 0)
    signal.on_abort(seen.append)
    signal.abort("r")
    assert seen == ["r"]


def test_a_detached_signal_leaves_its_source_as_it_was():
    """`detach` takes back exactly what `any` registered: the source's own callbacks still
    run, once, and neither a second detach nor a source aborted later reaches the derived."""
    source, seen = Signal(), []
    source.on_abort(lambda reason: seen.append(("own", reason)))
    derived = Signal.any(source)
    other = Signal.any(source)
    derived.detach()
    derived.detach()
    source.abort("stop")
    assert not derived.aborted and other.aborted and other.reason == "stop"
    assert seen == [("own", "stop")]
