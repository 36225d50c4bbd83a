"""predict(): the sum of case.terms. sampler(): replays case.samples in order (a test double for a
noisy instrument, so the VOID path can be driven from the command line). Public imports only."""
import itertools

import lawbench


class DummyCase(lawbench.Strict):
    terms: list[lawbench.FiniteFloat] = []
    samples: list[lawbench.FiniteFloat] = []


class Replay:
    def __init__(self, values):
        self._it = itertools.cycle(values)
        self._last = None

    def draw(self, n):
        out = []
        for _ in range(n):
            out.append(lawbench.Sample(value=next(self._it), predecessor=self._last))
            self._last = "replay"
        return out

    def statistic(self, samples):
        return [s.value for s in samples]

    def environment(self):
        return {"instrument": "replay"}

    def protocol(self):
        return {"kind": "replay"}


class Dummy(lawbench.Law):
    name = "dummy"
    title = "Dummy law (tests only)"
    anchors_package = "lawbench_dummy.anchors"
    case_model = DummyCase

    def predict(self, anchor, profile, resources=None):
        case = self.case(anchor)
        return lawbench.Prediction(sum(case.terms), {"terms": case.terms})

    def sampler(self, anchor, profile, resources):
        return Replay(self.case(anchor).samples)
