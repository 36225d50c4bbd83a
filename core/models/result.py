"""What a run produces per anchor: samples, the measurement, the verdict."""
from __future__ import annotations

import enum
from typing import Any, Optional, Union

from pydantic import Field, model_validator

from lawbench.core.models.anchor import AnchorKind
from lawbench.core.models.base import Id, ResultId, Strict


class Verdict(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    VOID = "VOID"  # the instrument cannot resolve the band: the interval straddles an edge
    SKIP = "SKIP"  # not applicable here, with the reason
    ERROR = "ERROR"  # could not run

    @property
    def bad(self) -> bool:
        return self in (Verdict.FAIL, Verdict.VOID, Verdict.ERROR)


class Sample(Strict):
    value: float
    arm: Optional[str] = None  # ratio anchors: "a" / "b"; single-arm: None
    predecessor: Optional[str] = None  # the configuration that ran immediately before (L-31)
    raw: dict[str, Any] = Field(default_factory=dict)


class Measurement(Strict):
    """Every raw sample, the protocol that took them, and the machine they were taken on."""

    samples: list[Sample] = Field(default_factory=list)
    protocol: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    log: Optional[str] = None  # tail of the engine's output, for census and for people


# Old `detail` keys now typed on Result (and detail.interval, now `sampling`): records written before
# schema 4 kept core's notes and decisions there; they are lifted on read.
_CORE_NOTES = ("expected_void", "print_limited", "open_finding", "finding_closed", "strict_skip", "listed_only")
# detail keys of older records that became fields under another name: census counts, a retired anchor
_RENAMED = {"counts": "census_counts", "judged": "census_judged", "ab": "ab", "plant": "plant"}


class Sampling(Strict):
    """How a measured interval was made (sequential looks at a per-look confidence): what turns the
    interval back into a standard error (core/history/drift.py) and tells a stopped VOID from one
    that used its whole budget."""

    method: str
    confidence_per_look: float
    looks: list[int]
    n: int  # samples the decision used
    family_confidence: float


class RateSeries(Strict):
    """What one measured arm is, as a runner's tracked speed (issue 31): the same model, format,
    placement and quantity on the same runner is one series, night after night, whatever anchor
    it served. A law names its arms' series; core stores and judges them without naming the law."""

    model: str
    format: str = ""  # the weight format ("Q4_0"), or "" where the case names none
    placement: str = ""  # e.g. "ngl=0": a different placement is a different speed
    quantity: str  # "decode tok/s" or "prefill tok/s"

    @property
    def key(self) -> str:
        return " | ".join((self.model, self.format or "-", self.placement or "-", self.quantity))


class RateSample(Strict):
    """One series' reading in one run: its per-visit values (warm-up excluded), their geometric
    mean and its 95 % interval (student-t on logs, one value per engine visit)."""

    series: RateSeries
    engine: str = ""  # the engine build key the values were taken with
    values: list[float] = Field(default_factory=list)
    measured: Optional[float] = None
    interval: Optional[tuple[float, float]] = None
    # The night's second round of this series' visits, taken only when its first round read slower
    # than the runner's accepted nights (lawbench.core.run.recheck); `values`, `measured` and
    # `interval` stay the first round's, the anchor's own evidence.
    recheck: list[float] = Field(default_factory=list)

    @property
    def fastest(self) -> Optional[float]:
        """The fastest visit of both rounds: what the nightly rate test judges (lawbench.core.history.rates)."""
        visits = self.values + self.recheck
        return max(visits) if visits else self.measured

    @property
    def first_round_fastest(self) -> Optional[float]:
        """The fastest visit before any second round: what the night read before it was read again."""
        return max(self.values) if self.values else self.measured


class AbFigures(Strict):
    """An A/B's figures beside the result's ratio and interval (lawbench.core.run.ab): what the
    ab.json view needs and the Result does not hold itself."""

    subject: str = ""
    test: str = ""
    unit: str = "tok/s"
    status: str  # "measured", "skip" or "error"
    median_a: Optional[float] = None
    median_b: Optional[float] = None
    confidence: Optional[float] = None
    pairs: int = 0
    gate: Optional[str] = None
    ratios: list[float] = Field(default_factory=list)
    duration_s: Optional[float] = None


class PlantProof(Strict):
    """A planted-fault proof (lawbench.core.run.planted) on a plant run's result: on the census's own
    result the anchor's proof (`fault` None), on "<anchor>~<fault>" that fault's, under `fault`."""

    anchor: str = ""  # the census anchor proved ("" in records written before this field)
    file: Optional[str] = None
    parity: dict[str, Any] = Field(default_factory=dict)
    proved: Optional[bool] = None
    problems: Optional[list[str]] = None
    skipped: Optional[bool] = None
    no_faults: Optional[bool] = None
    fault: Optional[dict[str, Any]] = None  # the fault's proof as planted.json shows it


class Result(Strict):
    """The outcome of one anchor in one run."""

    anchor_id: ResultId
    law: str
    kind: AnchorKind
    profile: Id
    verdict: Verdict
    reason: str = ""
    quantity: str = ""
    unit: str = ""
    published: Optional[float] = None
    predicted: Optional[float] = None
    # One statistic per result: `measured`, `interval` and `band` are all in `unit`, and
    # `statistic` says what they are; raw speeds and predictions in other units live in `detail`.
    statistic: str = ""
    measured: Optional[float] = None  # the statistic the verdict is about
    interval: Optional[tuple[float, float]] = None  # its confidence interval
    band: Optional[tuple[float, float]] = None
    spread: Optional[float] = None  # relative spread of the samples (IQR / median)
    measurement: Optional[Measurement] = None
    # Notes core writes from the anchor and reads back: typed, so a misspelt key is an error, not
    # a silently different report. `detail` is the law's own free-form data (issue 33).
    expected_void: Optional[str] = None  # the anchor expects VOID: the source's reason (docs/verdicts.md)
    print_limited: Optional[str] = None  # the band is print-limited: the reason (docs/bands.md)
    sampling: Optional[Sampling] = None  # measured anchors: how `interval` was made
    detail: dict[str, Any] = Field(default_factory=dict)
    # Every measured arm's absolute speed, typed (issue 31): filled by core's ArmSampler from the
    # series the law named, so the history and the gate read rates without reading `detail`.
    rates: list[RateSample] = Field(default_factory=list)
    duration_s: float = 0.0
    # Decisions core takes, typed (issue 33): the anchor's open finding when tonight reproduced it
    # (an expected FAIL), and the finding that no longer reproduces (news for the nightly gate).
    open_finding: Optional[str] = None
    finding_closed: Optional[str] = None
    strict_skip: bool = False  # a skip turned FAIL under --strict / on the anchor's own runner: not measured
    # A SKIP the anchor's own scope decided at run time (OutOfScope: a rule, a timing probe): its
    # reason. The gate says when this decision changes against the accepted night (issue 30 item 5).
    out_of_scope: Optional[str] = None
    listed_only: bool = False  # listed for the record only (a census with no planted fault): not judged
    retired: Optional[str] = None  # the anchor's status when it no longer runs (superseded, refuted, retired)
    retired_by: Optional[str] = None  # the anchor that superseded / refuted it
    census_counts: Optional[dict[str, Union[int, float]]] = None  # census anchors: every label counted
    census_judged: Optional[dict[str, Union[int, float]]] = None  # the counts of the labels the verdict rests on
    agreement_predicted: Optional[float] = None  # agreement anchors: the prediction, in the anchor's unit
    ab: Optional[AbFigures] = None  # an A/B's result "<anchor>~ab"
    plant: Optional[PlantProof] = None  # a planted-fault run's result

    @model_validator(mode="before")
    @classmethod
    def _lift_core_notes(cls, data: Any) -> Any:
        """Records written before these fields kept them in `detail`; they still import."""
        if not isinstance(data, dict) or not isinstance(data.get("detail"), dict):
            return data
        d = data["detail"]
        old = {k: d[k] for k in _CORE_NOTES if k in d and not data.get(k)}
        gone = set(old)
        if isinstance(d.get("interval"), dict) and data.get("sampling") is None:
            old["sampling"] = d["interval"]  # written as detail.interval before (schema 3)
            gone.add("interval")
        for key, field in _RENAMED.items():
            if key in ("counts", "judged") and data.get("kind") != "census":
                continue  # a law's own "counts" elsewhere stays the law's
            if isinstance(d.get(key), dict) and data.get(field) is None:
                old[field] = d[key]
                gone.add(key)
        if (d.get("history") is True or d.get("status") in ("superseded", "refuted", "retired")) \
                and not data.get("retired"):  # a retired anchor, before schema 4
            old["retired"] = str(d.get("status") or "retired")
            old["retired_by"] = d.get(f"{old['retired']}_by")
            gone |= {"history", "status", f"{old['retired']}_by"}
        if isinstance(d.get("out_of_scope"), dict) and data.get("verdict") == "SKIP" and not data.get("out_of_scope"):
            old["out_of_scope"] = str(data.get("reason") or "out of scope")  # the law's detail keeps its figures
        if data.get("kind") == "agreement" and isinstance(d.get("predicted"), (int, float)) \
                and data.get("agreement_predicted") is None:
            old["agreement_predicted"] = d["predicted"]  # the law's detail keeps its own copy too
        if not old:
            return data
        return {**data, **old, "detail": {k: v for k, v in d.items() if k not in gone}}

    @property
    def blocking(self) -> bool:
        """Fails the build: FAIL / ERROR / VOID, except the expected FAIL of an open finding."""
        return self.verdict.bad and not self.open_finding
