"""predict(): the sum of case.terms. sampler(): replays case.samples in order (a test double for a
noisy instrument, so the VOID path can be driven from the command line)."""
import itertools

from lawbench.core.law import Law, Prediction
from lawbench.core.models import Sample


class Replay:
    def __init__(self, values):
        self._it = itertools.cycle(values)
        self._last = None

    def draw(self, n):
        out = []
        for _ in range(n):
            out.append(Sample(value=next(self._it), predecessor=self._last))
            self._last = "replay"
        return out

    def statistic(self, samples):
        return [s.value for s in samples]

    def environment(self):
        return {"instrument": "replay"}

    def protocol(self):
        return {"kind": "replay"}


class Dummy(Law):
    name = "dummy"
    title = "Dummy law (tests only)"
    anchors_package = "lawbench_dummy.anchors"

    def predict(self, anchor, profile):
        return Prediction(float(sum(anchor.case["terms"])), {"terms": anchor.case["terms"]})

    def sampler(self, anchor, profile, resources):
        return Replay(anchor.case["samples"])
