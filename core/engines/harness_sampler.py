"""The sampler of a register-harness anchor: one sample is one round of the harness's runs.

A round runs every named run once, in the order the anchor writes them, and combines their
printed figures with the anchor's `harness.figure`; a harness of one run gives its figure. Each
script run is a fresh process at the pinned commit, so samples are independent visits, never
repetitions inside one process; how many the verdict takes is the anchor's budget. Whatever
rounds finished before a fault ride on the error to the record (core/stats/verdicts.py).
"""
from __future__ import annotations

import platform
from typing import Any, Optional

from lawbench.core.engines.harness import Checkout, locate, run_once
from lawbench.core.errors import EngineError
from lawbench.core.models import Anchor, HardwareProfile, Sample
from lawbench.core.models.harness import HarnessRun


def _field(anchor: Anchor, name: str) -> str:
    assert anchor.harness is not None
    return f"harness.runs.{name}" if anchor.harness.runs else "harness"


class HarnessSampler:
    """Draws rounds of the anchor's harness runs on this runner's checkout."""

    log_scale = False  # a difference of two figures may be 0 or negative

    def __init__(self, anchor: Anchor, profile: HardwareProfile):
        assert anchor.harness is not None
        self.anchor = anchor
        self.harness = anchor.harness
        self.runs: dict[str, HarnessRun] = self.harness.resolved()
        # Everything a run needs is found before the first run: a missing checkout, Python or data
        # folder is a SKIP naming it (a FAIL on the anchor's own runner), not an ERROR mid-round.
        self.checkouts: dict[str, Checkout] = {name: locate(run, profile, _field(anchor, name))
                                               for name, run in self.runs.items()}
        self.heads: dict[str, str] = {}
        self.last: Optional[str] = None

    def draw(self, n: int) -> list[Sample]:
        out: list[Sample] = []
        for _ in range(n):
            try:
                out.append(self._round())
            except EngineError as exc:
                exc.samples = out + list(exc.samples)
                raise
            except KeyboardInterrupt as exc:
                exc.samples = out  # type: ignore[attr-defined]
                raise
        return out

    def _round(self) -> Sample:
        figures: dict[str, float] = {}
        runs: dict[str, Any] = {}
        first = self.last
        for name, run in self.runs.items():
            reading = run_once(run, self.checkouts[name], self.anchor.id, _field(self.anchor, name))
            self.heads[name] = reading.head
            figures[name] = reading.figure
            runs[name] = {"figure": reading.figure, "line": reading.line, "wall_s": reading.wall_s,
                          "argv": reading.argv, "commit": reading.head}
            self.last = name
        value = self.harness.figure_of(figures)
        return Sample(value=value, predecessor=first, raw={"runs": runs, "figure": self.harness.figure or "run"})

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        return {"host": platform.node(), "python": {n: str(c.python) for n, c in self.checkouts.items()},
                "checkout": {n: str(c.root) for n, c in self.checkouts.items()}, "commit": dict(self.heads)}

    def protocol(self) -> dict[str, Any]:
        return {"engine": "register-harness",
                "runs": {n: {"repository": r.repository, "commit": r.commit, "script": r.script,
                             "script_sha256": r.script_sha256, "argv": r.argv, "env": r.env,
                             "env_folders": r.env_folders, "links": r.links, "line": r.line, "group": r.group,
                             "timeout_s": r.timeout_s} for n, r in self.runs.items()},
                "figure": self.harness.figure or "the run's printed figure",
                "sample": "one round: every run once, in order, each a fresh process at the pinned commit"}


def harness_sampler(anchor: Anchor, profile: HardwareProfile) -> HarnessSampler:
    return HarnessSampler(anchor, profile)
