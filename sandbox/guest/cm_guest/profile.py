"""Timers on the guest's side of the sub-call bridge, for `python -m benchmarks.breakdown`.

A request with `"profile": true` (only the benchmark sends one) runs its program with the
bridge's parts timed in place, and its outcome carries `"profile": {part: nanoseconds}`:

- `encode`: checking and encoding a call's arguments (`tools.encode_args`);
- `dispatch`: the `dispatch` import, from the guest's call to its return (the WIT crossing
  both ways and the host's work);
- `decode`: decoding the host's answer (`tools._decode_reply`);
- `clock`: what one read of the clock costs (each part holds about one per timed call).

The host's own part is timed on the host; the crossing is `dispatch` less that part, and
the rest of the guest's bridge is the sub-call's whole cost less everything timed.
"""

import time

from . import tools

_clock = time.perf_counter_ns


class Profile:
    """The timers of one run: `start` puts them in place, `stop` removes them and returns
    the totals in nanoseconds."""

    def __init__(self):
        self.totals = {"encode": 0, "dispatch": 0, "decode": 0}
        self._saved = []

    def _timed(self, function, part):
        totals = self.totals

        def timed(*args, **kwargs):
            started = _clock()
            try:
                return function(*args, **kwargs)
            finally:
                totals[part] += _clock() - started
        return timed

    def start(self, bridge):
        bridge._dispatch = self._timed(bridge._dispatch, "dispatch")
        for owner, name, part in ((tools, "encode_args", "encode"),
                                  (tools, "_decode_reply", "decode")):
            original = getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, self._timed(original, part))

    def stop(self):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []
        started = _clock()
        for _ in range(100):
            _clock()
        return {**self.totals, "clock": (_clock() - started) // 100}
