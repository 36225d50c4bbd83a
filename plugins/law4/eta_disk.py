"""The disk tier's η read back from a decode streamed past RAM (quantity "eta_disk_implied").

Law 4 prices a token's read of the weights placed on the RAM tier as served from the page cache
where it holds them and from the disk tier where it does not (capacity.hold). A measured visit
knows more than the law's model of that miss: lawbench records, per visit, how much of the file
the page cache held (bench.prime; mincore). So each visit gives

    miss     = 1 − resident fraction (the mean of the visit's start and end)
    t_disk   = 1 / tok/s − (every priced term but the RAM weights) − B_ram · (1 − miss) / (η_ram · BW_ram)
    η_disk   = B_ram · miss / (BW_disk · t_disk)

with B_ram the bytes a token reads of the RAM-placed weights (the law's own, before its miss
model), and every other term priced at the profile's η. One sample per visit, as for a speed. A
visit whose decode is faster than its non-disk terms allow (t_disk ≤ 0), or that missed nothing,
cannot say what the disk did: an engine error naming the figures, never a number.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from lawbench import Anchor, DataError, EngineError, HardwareProfile, Sample
from lawbench.plugins.law4 import measure
from lawbench.plugins.law4.case import CASE_FILE, Law4Case, parse_case, priced_case
from lawbench.plugins.law4.models import Models
from lawbench.plugins.law4.quantmix import weight_format
from lawbench.plugins.law4.tiers import resolve_tiers

if TYPE_CHECKING:
    from lawbench import Resources
    from lawbench.plugins.law4.law import Law4


class DiskTerms:
    """What the law prices for one case, split as the η_disk read-back needs it."""

    def __init__(self, ram_bytes: float, ram_rate: float, other_s: float, disk_gbs: float, detail: dict[str, Any]):
        self.ram_bytes, self.ram_rate, self.other_s, self.disk_gbs = ram_bytes, ram_rate, other_s, disk_gbs
        self.detail = detail

    def eta(self, tok_s: float, resident: float) -> tuple[float, dict[str, Any]]:
        miss = 1.0 - resident
        t_disk = 1.0 / tok_s - self.other_s - self.ram_bytes * resident / self.ram_rate
        figures = {"tok_s": tok_s, "resident_fraction": round(resident, 6), "miss": round(miss, 6),
                   "disk_bytes_per_token": self.ram_bytes * miss, "t_disk_s": t_disk}
        if miss <= 0 or t_disk <= 0:
            raise EngineError(f"this visit cannot say what the disk did: {tok_s:.4g} tok/s with "
                              f"{resident:.1%} of the file in the page cache leaves {t_disk:.4g} s a token "
                              f"for the disk after the other terms ({self.other_s:.4g} s) and the cached "
                              f"reads; the file is not streaming past RAM here")
        return self.ram_bytes * miss / (self.disk_gbs * 1e9 * t_disk), figures


def disk_terms(law: "Law4", anchor: Anchor, case: Law4Case, profile: HardwareProfile, models: Models) -> DiskTerms:
    priced = priced_case(case).model_copy(update={"quantity": "decode_tok_s"})
    shape = law._shape(priced, anchor.id, models)
    pr = law.price(priced, shape, profile)
    tiers = {t.name: t for t in profile.tiers}
    ram = next((n for n, t in tiers.items() if t.kind == "ram"), None)
    disk = next((n for n, t in tiers.items() if t.kind == "disk"), None)
    if ram is None or disk is None:
        raise DataError(CASE_FILE, f"profile {profile.id!r} has no ram and disk tiers to read η_disk between",
                        anchor=anchor.id, field="profiles")
    rates = resolve_tiers(priced, profile, shape.is_moe, weight_format(shape))
    disk_bw = rates[disk].bandwidth_gbs if disk in rates else None
    if not disk_bw or ram not in rates:
        raise DataError(CASE_FILE, f"profile {profile.id!r} states no bandwidth for tier {disk!r} or {ram!r}",
                        anchor=anchor.id, field="profiles")
    ram_bytes = pr.weight_bytes.get(ram, 0.0) + pr.streamed_bytes.get(ram, 0.0)
    if ram_bytes <= 0:
        raise DataError(CASE_FILE, "the placement reads no weights from RAM, so nothing can stream past it",
                        anchor=anchor.id, field="case.placement")
    other = sum(s for k, s in pr.seconds.items() if k not in (f"weights@{ram}", f"weights@{disk}"))
    return DiskTerms(ram_bytes, rates[ram].bytes_per_s, other, disk_bw,
                     {"ram_tier": ram, "disk_tier": disk, "ram_bytes_per_token": ram_bytes,
                      "ram_bytes_per_s": rates[ram].bytes_per_s, "other_seconds": other,
                      "disk_bandwidth_gbs": disk_bw, "modelled_streamed_bytes": pr.streamed_bytes.get(ram, 0.0)})


def residency(raw: dict[str, Any]) -> float:
    """The page cache's share of the file over a visit: the mean of its start (after the prime)
    and its end (mincore, lawbench.core.hardware.pagecache)."""
    prime = raw.get("prime") or {}
    start = (prime.get("resident_after") or {}).get("fraction")
    end = (prime.get("resident_after_visit") or {}).get("fraction")
    if start is None or end is None:
        raise EngineError("the visit recorded no page-cache residency (bench.prime sets it)")
    return (float(start) + float(end)) / 2.0


class EtaDiskSampler:
    """The law's sampler for the case (one arm, one visit a sample), each sample's speed read back
    into η_disk with that visit's own residency."""

    log_scale = True

    def __init__(self, inner: Any, terms: DiskTerms):
        self.inner, self.terms = inner, terms

    def draw(self, n: int) -> list[Sample]:
        out: list[Sample] = []
        try:
            for s in self.inner.draw(n):
                eta, figures = self.terms.eta(s.value, residency(s.raw))
                out.append(s.model_copy(update={"value": eta, "raw": {**s.raw, "eta_disk": figures}}))
        except EngineError as exc:
            exc.samples = out + list(getattr(exc, "samples", []))
            raise
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        return self.inner.environment()

    def protocol(self) -> dict[str, Any]:
        return {**self.inner.protocol(), "statistic": "eta_disk = missed bytes / (BW_disk x the seconds the "
                "other terms leave), per visit", "priced_terms": self.terms.detail}

    def rates(self) -> list[Any]:
        return self.inner.rates() if hasattr(self.inner, "rates") else []


def sampler(law: "Law4", anchor: Anchor, profile: HardwareProfile, resources: "Resources",
            inner: Optional[Any] = None) -> EtaDiskSampler:
    check(anchor)
    case = parse_case(anchor.case, anchor.id)
    inner = inner or measure.sampler(anchor, profile, resources)
    return EtaDiskSampler(inner, disk_terms(law, anchor, case, profile, Models(resources, fetch=True)))


def check(anchor: Anchor) -> None:
    if anchor.kind != "measurement" or anchor.arms:
        raise DataError(CASE_FILE, "eta_disk_implied reads one arm's decode back into η_disk: kind "
                        "\"measurement\", no arms", anchor=anchor.id, field="kind" if anchor.arms == {} else "arms")
