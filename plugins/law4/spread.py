"""Spread anchors: one sample is a statistic over several readings at once, never one reading.

    quantity = "decode_spread"   one arm, `spread.visits` consecutive fresh engine visits per sample;
                                 the sample is their relative spread (max − min) / mean, the register's
                                 own statistic (prereg #106 P-4: 'relative spread `(max-min)/mean`')
    quantity = "eta_range"       two or more arms (named freely: `arms.q2_k`, `arms.q4_0` …), one visit
                                 of every arm per round, in an order that rotates round by round; each
                                 arm's η is its measured decode over its price at η = 1 on the
                                 profile's own bandwidths, and the sample is the round's min or max
                                 (`spread.statistic`): one end of a per-format η band (L-14, L-15)

The sampling unit stays honest: a sample is a round of separate engine processes, so the verdict's
interval over samples (core's rule) is an interval over rounds. A spread can be zero, so its
interval is taken on values; an η is a speed times constants, so its interval is on logarithms, as
a speed's is. Every visit, with its predecessor, is in the record.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from lawbench import Anchor, DataError, EngineError, HardwareProfile, Sample
from lawbench.plugins.law4 import measure, pricing as P
from lawbench.plugins.law4.case import arm_case, CASE_FILE, check_measured, Law4Case, parse_case, priced_case
from lawbench.plugins.law4.models import Models
from lawbench.plugins.law4.quantmix import weight_format
from lawbench.plugins.law4.scope import check_measured_on
from lawbench.plugins.law4.tiers import k_seconds, resolve_placement, resolve_tiers

if TYPE_CHECKING:
    from lawbench import Resources
    from lawbench.plugins.law4.law import Law4

SPREAD_QUANTITIES = ("decode_spread", "eta_range")


def spread_cases(anchor: Anchor) -> dict[str, Law4Case]:
    """{'main': case} for decode_spread; every arm (case ⊕ arm) for eta_range, at least two."""
    case = parse_case(anchor.case, anchor.id)
    if case.quantity == "decode_spread":
        if anchor.arms:
            raise DataError(CASE_FILE, "a decode_spread anchor measures one arm over consecutive visits; "
                            "leave arms out (eta_range spreads over arms)", anchor=anchor.id, field="arms")
        cases = {"main": case}
    else:
        if len(anchor.arms) < 2:
            raise DataError(CASE_FILE, f"an eta_range anchor spreads over two or more arms (got "
                            f"{len(anchor.arms)})", anchor=anchor.id, field="arms")
        cases = {name: arm_case(anchor.case, over, anchor.id, name) for name, over in anchor.arms.items()}
    for name, c in cases.items():
        where = "case" if name == "main" else f"arms.{name}"
        if c.bench is None:
            raise DataError(CASE_FILE, "a spread is measured: it needs a bench table", anchor=anchor.id,
                            field=f"{where}.bench")
        if c.model is None:
            raise DataError(CASE_FILE, "a spread is measured on a model file: name one", anchor=anchor.id,
                            field=f"{where}.model")
        if c.bench.tool != "llama-bench" or not c.bench.n_gen:
            raise DataError(CASE_FILE, "a spread reads llama-bench's decode (bench.n_gen > 0, tool llama-bench)",
                            anchor=anchor.id, field=f"{where}.bench")
        check_measured(c, anchor.kind, anchor.id, where)
    if anchor.kind != "measurement":
        raise DataError(CASE_FILE, f"a spread's sample is already a statistic over several readings: kind "
                        f"must be \"measurement\", not {anchor.kind!r}", anchor=anchor.id, field="kind")
    return cases


def _snapshot() -> dict[str, Any]:
    from lawbench.hardware import environment_snapshot

    try:
        return environment_snapshot()
    except Exception as exc:  # the snapshot is evidence, never a reason to lose a run
        return {"error": f"{type(exc).__name__}: {exc}"}


def _median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def relative_spread(values: list[float]) -> float:
    """(max − min) / mean, as the register computes it (weights/prereg106_score.py's spread())."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean


def eta_price(law: "Law4", anchor: Anchor, case: Law4Case, profile: HardwareProfile, models: Models) -> float:
    """The arm's decode tok/s priced at η = 1 on every tier (and for the KV read), each tier at the
    bandwidth its profile η multiplies and on the bytes spread.bytes names: a measured decode over
    it is the η the arm ran at, on the basis its source printed it ("active": the law's own bytes
    a token reads, as L-14's ladder; "file": the whole file, as L-15's per-format η)."""
    assert case.spread is not None
    priced = priced_case(case).model_copy(update={"quantity": "decode_tok_s", "spread": None})
    shape = law._shape(priced, anchor.id, models)
    tiers = resolve_tiers(priced, profile, shape.is_moe, weight_format(shape))
    tiers = {n: dataclasses.replace(t, eta=1.0, bytes_basis=case.spread.bytes) for n, t in tiers.items()}
    placement = resolve_placement(priced, tiers, shape.n_layer)
    pricing = P.price_decode(shape, tiers, placement, ctx=priced.ctx, kv_type=priced.kv_type,
                             kv_layout=priced.kv_layout, experts_used=priced.experts_used, eta_kv=1.0,
                             cpu_attention_k_s=k_seconds(priced, profile))
    if pricing.does_not_fit:
        raise DataError(CASE_FILE, f"the placement does not fit on profile {profile.id!r}: "
                        f"{'; '.join(pricing.does_not_fit)}", anchor=anchor.id, field="case.placement")
    return pricing.tok_s


class SpreadSampler:
    """Rounds of engine visits; one sample per round (core's Sampler protocol)."""

    log_scale = False  # set per quantity in __init__: a spread can be 0 (values), an η cannot (logs)

    def __init__(self, quantity: str, visits: dict[str, Callable[[int], Any]], labels: dict[str, str], *,
                 reps: int, per_visit: Callable[[list[float]], Optional[float]], n_visits: int = 1,
                 statistic: Optional[str] = None, eta_scale: Optional[dict[str, float]] = None,
                 protocol: Optional[dict[str, Any]] = None):
        self.quantity, self.arms, self.labels = quantity, visits, labels
        self.log_scale = quantity == "eta_range"  # an η is a speed times constants: multiplicative
        self.reps, self.per_visit, self.n_visits = reps, per_visit, n_visits
        self.end = statistic
        self.eta_scale = eta_scale or {}  # arm -> 1 / (its tok/s at η = 1)
        self._extra = dict(protocol or {})
        self._env_before = _snapshot()
        self._env_after: dict[str, Any] = {}
        self._last: Optional[str] = None
        self._round = 0
        self._warmed = False
        self.visits: list[dict[str, Any]] = []

    def _visit(self, arm: str, reps: int, discard: bool = False) -> tuple[Optional[float], Any]:
        t0 = time.monotonic()
        visit = self.arms[arm](reps)
        value = None if discard else self.per_visit(visit.values)
        self.visits.append({"arm": arm, "predecessor": self._last, "reps": reps, "discarded": discard,
                            "values": visit.values, "wall_s": round(visit.wall_s or time.monotonic() - t0, 3),
                            **({"raw": visit.raw} if visit.raw else {})})
        self._last = self.labels[arm]
        return value, visit

    def _warm(self) -> None:
        # One discarded visit per arm: model load and page cache, not the claim, dominate a cold run.
        if not self._warmed:
            for arm in sorted(self.arms):
                self._visit(arm, 1, discard=True)
        self._warmed = True

    def _one_round(self) -> Optional[Sample]:
        names = sorted(self.arms)
        first = self._round % len(names)
        order = names[first:] + names[:first]  # rotates, so no arm always follows the same one
        pred = self._last
        values: dict[str, list[float]] = {}
        for arm in order:
            for _ in range(self.n_visits):
                value, _visit = self._visit(arm, self.reps)
                if value is not None:
                    values.setdefault(arm, []).append(value)
        self._round += 1
        if self.quantity == "decode_spread":
            got = values.get("main", [])
            if len(got) < 2:
                return None
            return Sample(value=relative_spread(got), predecessor=pred,
                          raw={"values": got, "mean": sum(got) / len(got), "order": order})
        if set(values) != set(self.arms):
            return None
        etas = {arm: v[0] * self.eta_scale[arm] for arm, v in values.items()}
        pick = min if self.end == "min" else max
        end_arm = pick(etas, key=etas.__getitem__)
        return Sample(value=etas[end_arm], arm=end_arm, predecessor=pred,
                      raw={"tok_s": {a: v[0] for a, v in values.items()}, "eta": etas, "end": self.end,
                           "end_arm": end_arm, "order": order})

    def draw(self, n: int) -> list[Sample]:
        self._warm()
        out: list[Sample] = []
        try:
            for _ in range(n):
                sample = self._one_round()
                if sample is not None:
                    out.append(sample)
        except (EngineError, KeyboardInterrupt) as exc:
            exc.samples = out + list(getattr(exc, "samples", []))
            raise
        self._env_after = _snapshot()
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        return {"before": self._env_before, "after": self._env_after or _snapshot()}

    def protocol(self) -> dict[str, Any]:
        unit = (f"{self.n_visits} consecutive visits" if self.quantity == "decode_spread"
                else f"one visit of each of {len(self.arms)} arms, order rotating")
        statistic = ("(max - min) / mean of the round's visits" if self.quantity == "decode_spread"
                     else f"{self.end} over the arms of measured tok/s / tok/s priced at eta = 1")
        return {"warmup_visits_per_arm": 1, "reps_per_visit": self.reps, "sampling_unit": f"round of {unit}",
                "per_visit": getattr(self.per_visit, "__name__", "custom").lstrip("_"),
                "statistic": statistic, "arms": self.labels, "eta_scale": self.eta_scale or None,
                "visits": self.visits, **self._extra}


@dataclasses.dataclass
class SweptArms:
    """Every arm of a swept case ready to visit (order_effect.py and step.py share this): its
    engine visit, its label, the per-visit reading and the protocol the record keeps."""

    first: Law4Case
    visits: dict[str, Any]
    labels: dict[str, str]
    per_visit: Callable[[list[float]], float]
    protocol: dict[str, Any]


def swept_arms(cases: dict[str, Law4Case], profile: HardwareProfile, resources: "Resources") -> SweptArms:
    """llama-bench or llama-batched-bench visits of each arm, after the scope rule's check."""
    for case in cases.values():
        check_measured_on(case, profile)
    files = {name: measure.model_file(c.model, resources) for name, c in cases.items()}
    params = {name: measure.batched_params(c, profile, files[name]) if c.bench.tool == "batched-bench"  # type: ignore[union-attr]
              else measure.bench_params(c, profile) for name, c in cases.items()}
    llamas = {name: measure.engine_for(resources, c) for name, c in cases.items()}
    llama = next(iter(llamas.values()))
    visits = {name: measure._visit(llamas[name], files[name], params[name], c.bench)  # type: ignore[arg-type]
              for name, c in cases.items()}
    labels = {name: f"{name}: {measure._label(c, params[name])}" for name, c in cases.items()}
    first = next(iter(cases.values()))
    assert first.bench is not None and first.spread is not None
    per_visit = measure.fastest if first.bench.per_visit == "fastest" else _median
    return SweptArms(first, visits, labels, per_visit,
                     {"engine": measure.ENGINES[first.bench.tool], "llama_cpp": llama.version,
                      "bench_params": params, "models": {k: str(v) for k, v in files.items()}})


def sampler(law: "Law4", anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> SpreadSampler:
    cases = spread_cases(anchor)
    reps = {c.bench.reps for c in cases.values()}  # type: ignore[union-attr]
    if len(reps) != 1:
        raise DataError(CASE_FILE, "every arm must run the same bench.reps", anchor=anchor.id, field="arms")
    files = {name: measure.model_file(c.model, resources) for name, c in cases.items()}
    params = {name: measure.bench_params(c, profile) for name, c in cases.items()}
    eta_scale: dict[str, float] = {}
    first = next(iter(cases.values()))
    if first.quantity == "eta_range":
        models = Models(resources, fetch=True)
        for name, c in cases.items():
            eta_scale[name] = 1.0 / eta_price(law, anchor, c, profile, models)
    llamas = {name: measure.engine_for(resources, c) for name, c in cases.items()}
    llama = next(iter(llamas.values()))
    visits = {name: measure._visit(llamas[name], files[name], params[name], c.bench)  # type: ignore[arg-type]
              for name, c in cases.items()}
    labels = {name: measure._label(c, params[name]) for name, c in cases.items()}
    if len(set(labels.values())) != len(labels):
        labels = {name: f"{name}: {lab}" for name, lab in labels.items()}
    per_visit = measure.fastest if first.bench.per_visit == "fastest" else _median  # type: ignore[union-attr]
    spread = first.spread
    assert spread is not None
    return SpreadSampler(first.quantity, visits, labels, reps=reps.pop(), per_visit=per_visit,
                         n_visits=spread.visits if first.quantity == "decode_spread" else 1,
                         statistic=spread.statistic, eta_scale=eta_scale,
                         protocol={"engine": "llama-bench", "llama_cpp": llama.version, "bench_params": params,
                                   "models": {k: str(v) for k, v in files.items()}})
