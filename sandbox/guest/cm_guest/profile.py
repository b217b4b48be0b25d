"""Timers on the guest's side of the sub-call bridge, for `python -m benchmarks.breakdown`.

A request with `"profile": true` (only the benchmark sends one) runs its program with the
bridge's parts timed in place, and its outcome carries `"profile": {part: nanoseconds}`:

- `encode`: checking and encoding a call's arguments (`tools.encode_args`);
- `dispatch`: the `dispatch` import, from the guest's call to its return (the WIT crossing
  both ways and the host's work);
- `decode`: decoding the host's answer (`tools._ok_value`, `tools._decode_reply`);
- `clock`: what one read of the clock costs (each part holds about one per timed call);

and the run's own phases, each from the end of the one before: `compile` (from when the
run's request was decoded and its prepared state bound), `namespace` (the program's globals
and bindings), `program` (running it, its value and output settled).

The host's own part is timed on the host; the crossing is `dispatch` less that part, and
the rest of the guest's bridge is the sub-call's whole cost less everything timed.
"""

import time

from . import tools

_clock = time.perf_counter_ns


class Profile:
    """The timers of one run, put in place when it is made; `stop` removes them and puts
    the totals, in nanoseconds, in the outcome."""

    def __init__(self, bridge):
        self.totals = {"encode": 0, "dispatch": 0, "decode": 0}
        self._saved = []
        self._start(bridge)
        self._last = _clock()

    def mark(self, phase):
        """The time since the last mark (or the start) is `phase`'s."""
        now = _clock()
        self.totals[phase] = now - self._last
        self._last = now

    def _timed(self, function, part):
        totals = self.totals

        def timed(*args, **kwargs):
            started = _clock()
            try:
                return function(*args, **kwargs)
            finally:
                totals[part] += _clock() - started
        return timed

    def _start(self, bridge):
        bridge._dispatch = self._timed(bridge._dispatch, "dispatch")
        for owner, name, part in ((tools, "encode_args", "encode"),
                                  (tools, "_ok_value", "decode"),
                                  (tools, "_decode_reply", "decode")):
            original = getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, self._timed(original, part))

    def stop(self, outcome):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []
        started = _clock()
        for _ in range(100):
            _clock()
        outcome["profile"] = {**self.totals, "clock": (_clock() - started) // 100}


class _Off:
    """No profile (every run but the benchmark's): the marks cost a method call."""

    def mark(self, phase):
        pass

    def stop(self, outcome):
        pass


OFF = _Off()
