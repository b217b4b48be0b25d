"""Timers on the guest's side of the sub-call bridge, for `python -m benchmarks.breakdown`.

A request with `"profile": true` (only the benchmark sends one) runs its program with the
bridge's parts timed in place, and its outcome carries `"profile": {part: nanoseconds}`:

- `call`: a binding's whole call, from the program's call to its value;
- `encode`: checking and encoding the arguments (`tools.encode_args`);
- `dispatch`: the `dispatch` import, from the guest's call to its return (the WIT crossing
  both ways and the host's work);
- `decode`: decoding the host's answer (`tools._decode_reply`).

The host's own part is timed on the host; the crossing is `dispatch` less that part.
"""

import time

from . import tools

_clock = time.perf_counter_ns


class Profile:
    """The timers of one run: `start` puts them in place, `stop` removes them and returns
    the totals in nanoseconds."""

    def __init__(self):
        self.totals = {"call": 0, "encode": 0, "dispatch": 0, "decode": 0}
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
        for owner, name, part in ((tools.Binding, "__call__", "call"),
                                  (tools, "encode_args", "encode"),
                                  (tools, "_decode_reply", "decode")):
            original = getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, self._timed(original, part))

    def stop(self):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []
        return dict(self.totals)
