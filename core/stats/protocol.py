"""The measurement protocol: warm-up, repetitions, interleave-and-repeat, predecessors, environment.

These machines drift, and in the page-cache regime consecutive runs are not independent samples
(seed 000, L-31): a reading depends on what ran just before it. So every sample records its
predecessor configuration, multi-arm anchors alternate their arms in one run (A B B A …, so a
slow drift biases neither arm), and a ratio sample is formed only within one round.

Two samplers share that rule (``round_order``): ``ArmSampler`` for one arm or an a/b pair of engine
visits with repetitions and a warm-up, ``InterleavedSampler`` for any number of arms whose round
makes one sample by a law's own arithmetic (Law 1's gauge/native, Law 3's recipes and source).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from lawbench.core.errors import EngineError
from lawbench.core.models import RateSample, RateSeries, Sample
from lawbench.core.stats.verdicts import location_interval

# One visit of an arm: run the engine once, asking for `reps` repetitions; return one reading per
# repetition plus whatever raw record the engine printed.
ArmVisit = Callable[[int], "Visit"]


@dataclass
class Visit:
    """One engine visit (one process): a reading per repetition, the raw record it printed, its time."""

    values: list[float]
    raw: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


def _snapshot() -> dict[str, Any]:
    try:
        from lawbench.core.hardware.detect import environment_snapshot

        return environment_snapshot()
    except Exception as exc:  # the snapshot is evidence, never a reason to lose a run
        return {"error": f"{type(exc).__name__}: {exc}"}


def round_order(arms: Sequence[str], round_index: int) -> tuple[str, ...]:
    """The order a round visits its arms in: the arms rotated by one place a round (a b c, b c a,
    c a b …; two arms: a b, b a — A B B A), so a slow drift favours no arm and each arm follows
    every other equally often."""
    k = round_index % len(arms)
    return (*arms[k:], *arms[:k])


class ArmSampler:
    """Samples one or two arms. A visit (one engine process) gives one value from its repetitions
    (``per_visit``: their median by default). One arm: each visit is one sample. Two arms (a, b):
    each round visits both, in alternating order, and yields one sample = a / b, or a − b with
    ``combine="difference"`` (e.g. a memory delta between two modes); raw value_a / value_b keep
    the two visits' values for a law that prices a from b (Prediction.from_reference)."""

    def __init__(self, arms: dict[str, ArmVisit], *, labels: Optional[dict[str, str]] = None,
                 reps_per_visit: int = 1, warmup: bool = True, protocol: Optional[dict] = None,
                 combine: str = "ratio", per_visit: Optional[Callable[[list[float]], Optional[float]]] = None,
                 series: Optional[dict[str, RateSeries]] = None, engine: str = ""):
        if set(arms) not in ({"main"}, {"a", "b"}):
            raise ValueError("arms must be {'main'} or {'a', 'b'}")
        if combine not in ("ratio", "difference"):
            raise ValueError("combine must be 'ratio' or 'difference'")
        self.combine = combine
        # A visit's value from its repetitions: the median, unless the law knows better (the
        # fastest repetition of a speed: a neighbour only ever slows a repetition down).
        self.per_visit = per_visit or _median
        # Ratios and speeds are positive and multiplicative: their interval is taken on logs.
        self.log_scale = combine == "ratio"
        self.arms = arms
        self.labels = labels or {k: k for k in arms}
        self.reps = max(1, reps_per_visit)
        self.warmup = warmup
        self._warmed = False
        self._last: Optional[str] = None  # label of the configuration that ran last (L-31)
        self._round = 0
        self._env_before = _snapshot()
        self._env_after: dict[str, Any] = {}
        self._extra = dict(protocol or {})
        self.visits: list[dict[str, Any]] = []
        # The arms that are absolute speeds, as the law named them (issue 31): each kept visit's
        # value is also a reading of that runner's rate series, whatever the anchor's statistic.
        self.series = dict(series or {})
        self.engine = engine
        self._rate_values: dict[str, list[float]] = {arm: [] for arm in self.series}

    # -- one engine process -------------------------------------------------------------
    def _visit(self, arm: str, reps: int, discard: bool = False) -> Visit:
        t0 = time.monotonic()
        visit = self.arms[arm](reps)
        visit.wall_s = visit.wall_s or time.monotonic() - t0
        if arm in self.series and not discard:
            value = self.per_visit(visit.values)
            if value is not None and value > 0:
                self._rate_values[arm].append(value)
        self.visits.append({"arm": arm, "predecessor": self._last, "reps": reps, "discarded": discard,
                            "values": visit.values, "wall_s": round(visit.wall_s, 3)})
        return visit

    def _warm(self) -> None:
        # One discarded visit per arm: model load and page cache, not the law, dominate a cold run.
        if self.warmup and not self._warmed:
            for arm in sorted(self.arms):
                self._visit(arm, 1, discard=True)
                self._last = self.labels[arm]
        self._warmed = True

    # -- Sampler protocol -------------------------------------------------------------------
    def draw(self, n: int) -> list[Sample]:
        self._warm()
        out: list[Sample] = []
        try:
            if set(self.arms) == {"main"}:
                # One sample per visit: repetitions inside one process share its luck (page
                # cache, placement, clocks), so only visits are independent enough to count.
                for _ in range(n):
                    pred = self._last
                    visit = self._visit("main", self.reps)
                    self._last = self.labels["main"]
                    value = self.per_visit(visit.values)
                    if value is None:
                        continue
                    out.append(Sample(value=value, predecessor=pred,
                                      raw={"visit": len(self.visits) - 1, "reps": visit.values, **visit.raw}))
            else:
                for _ in range(n):
                    order = round_order(("a", "b"), self._round)
                    got: dict[str, Visit] = {}
                    preds: dict[str, Optional[str]] = {}
                    for arm in order:
                        preds[arm] = self._last
                        got[arm] = self._visit(arm, self.reps)
                        self._last = self.labels[arm]
                    a, b = self.per_visit(got["a"].values), self.per_visit(got["b"].values)
                    self._round += 1
                    if a is None or b is None or (self.combine == "ratio" and not b):
                        continue
                    value, arm = (a / b, "a/b") if self.combine == "ratio" else (a - b, "a-b")
                    out.append(Sample(value=value, arm=arm, predecessor=preds[order[0]],
                                      raw={"a": got["a"].values, "b": got["b"].values, "value_a": a,
                                           "value_b": b, "order": "".join(order),
                                           "predecessor_a": preds["a"], "predecessor_b": preds["b"],
                                           "raw_a": got["a"].raw, "raw_b": got["b"].raw}))
        except (EngineError, KeyboardInterrupt) as exc:
            # a stop signal between two visits is a KeyboardInterrupt (core.run.signals): the pairs
            # finished so far ride on it as on an engine's fault, or a stopped A/B would record none
            exc.samples = out + list(getattr(exc, "samples", []))
            raise
        self._env_after = _snapshot()
        return out

    def rates(self) -> list[RateSample]:
        """One reading per named series: its kept visits' values, geometric mean and interval."""
        out = []
        for arm, series in self.series.items():
            values = self._rate_values.get(arm, [])
            if not values:
                continue
            measured, interval = (location_interval(values, 0.95) if len(values) >= 2
                                  else (values[0], None))
            out.append(RateSample(series=series, engine=self.engine, values=values,
                                  measured=measured, interval=interval))
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        return {"before": self._env_before, "after": self._env_after or _snapshot()}

    def protocol(self) -> dict[str, Any]:
        return {"warmup_visits_per_arm": 1 if self.warmup else 0, "reps_per_visit": self.reps,
                "interleaved": set(self.arms) == {"a", "b"},
                "sampling_unit": "round of both arms" if len(self.arms) == 2 else "engine visit",
                "per_visit": getattr(self.per_visit, "__name__", "custom").lstrip("_"),
                "order": "ABBA" if len(self.arms) == 2 else "A",
                "statistic": self.combine if len(self.arms) == 2 else "value",
                "arms": self.labels, "visits": self.visits, **self._extra}


class InterleavedSampler:
    """Any number of arms, compared in rounds: a round visits every arm once (one engine process
    each) in ``round_order`` of the sorted arm names, and ``combine`` makes one sample of that
    round's visits — a paired comparison, so what drifts between rounds cancels. Every visit
    records its predecessor. No warm-up visit: a visit may spend what each round needs fresh (Law 1
    and Law 3 score one new slice of text a round, lawbench.engines.SliceVisits).

    :param arms: arm name -> visit, a callable that runs the engine once and returns a ``Visit``
    :param combine: the round's visits by arm name -> the sample's value (None drops the round;
        a non-finite value is kept, and core's verdict makes it an ERROR)
    :param arm: the samples' ``arm`` label (e.g. ``"a/b"``)
    :param raw: the round's visits -> what the sample keeps besides ``order`` and every visit's raw
        record (``visits``): e.g. the slice the round scored
    :param log_raw: the keys of a visit's raw record that its line in the protocol's visit log keeps
    :param log_scale: the interval is taken on logs (ratios); False where a value may be 0 or less
    :param protocol: what the run record keeps of the protocol besides the order and the visit log
        (``sampling_unit``, ``statistic``, the files and text the arms read)
    """

    def __init__(self, arms: dict[str, Callable[[], Visit]],
                 combine: Callable[[dict[str, Visit]], Optional[float]], *, arm: Optional[str] = None,
                 raw: Optional[Callable[[dict[str, Visit]], dict[str, Any]]] = None,
                 log_raw: Sequence[str] = (), log_scale: bool = True, protocol: Optional[dict] = None):
        if len(arms) < 2:
            raise ValueError(f"an interleaved sampler compares two arms or more, not {sorted(arms)}")
        self.arms = dict(arms)
        self.names = tuple(sorted(arms))
        self.combine, self.arm, self.raw, self.log_raw = combine, arm, raw, tuple(log_raw)
        self.log_scale = log_scale
        self.round = 0
        self.visits: list[dict[str, Any]] = []
        self._last: Optional[str] = None
        self._extra = dict(protocol or {})
        self._env_before = _snapshot()
        self._env_after: dict[str, Any] = {}

    def draw(self, n: int) -> list[Sample]:
        out: list[Sample] = []
        try:
            for _ in range(n):
                order = round_order(self.names, self.round)
                first = self._last
                got: dict[str, Visit] = {}
                for name in order:
                    t0 = time.monotonic()
                    visit = self.arms[name]()
                    visit.wall_s = visit.wall_s or time.monotonic() - t0
                    got[name] = visit
                    self.visits.append({"round": self.round, "arm": name, "predecessor": self._last,
                                        "values": visit.values, "wall_s": round(visit.wall_s, 3),
                                        **{k: visit.raw[k] for k in self.log_raw if k in visit.raw}})
                    self._last = name
                self.round += 1
                value = self.combine(got)
                if value is None:
                    continue
                extra = self.raw(got) if self.raw else {}
                out.append(Sample(value=value, arm=self.arm, predecessor=first,
                                  raw={**extra, "order": list(order),
                                       "visits": {name: v.raw for name, v in got.items()}}))
        except (EngineError, KeyboardInterrupt) as exc:
            # the rounds finished so far ride on the error, as in ArmSampler
            exc.samples = out + list(getattr(exc, "samples", []))
            raise
        self._env_after = _snapshot()
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        return {"before": self._env_before, "after": self._env_after or _snapshot()}

    def protocol(self) -> dict[str, Any]:
        return {"interleaved": True, "order": "rotated per round", "arms": list(self.names),
                **self._extra, "visits": self.visits}


def _median(values: list[float]) -> Optional[float]:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
