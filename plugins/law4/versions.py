"""Law 4's versions: every amendment the seed and the register state, and the terms each one prices.

An anchor says which version it tests (`law_version = "v1.1"`); the law then prices exactly that
version's terms, so a superseded prediction is re-computed as it was made and can be scored. An
anchor without `law_version` tests the current version. The versions nest (seed 000: "Every
formulation below NESTS"): each one keeps every term of the one before it and adds its own.

    v1.0     tok/s = η(tier) · BW ÷ active-bytes-per-token, summed over the tiers a placement uses
             (one tier dominating is the seed's v1.0 statement); format-averaged η per tier
    v1.1     + the KV term: every token re-reads ctx · kv-bytes/pos on KV's tier at η_kv
    L-15     + per-format η: within a tier η is a function of the format (2026-07-28)
    v2       + L-19's CPU-attention term: t += n_cpu_layers · ctx · k (2026-07-30)
    L-30     + the expert-count corollary: the knob's ceiling from the routed share of active
             bytes (2026-08-19)
    general  + capacity: each tier holds what fits after its reserves; RAM that cannot hold its
             bytes streams the rest from disk through the page cache; a placement that cannot
             hold the model at all "does not fit" (the general form's "Fit is checked per tier
             with KV counted", priced down to disk as the register's planner does; L-29)

Order is the seed's chronology where it dates an amendment (v1.1 precedes L-15: L-15's 2026-07-28
text amends the law that already carries the KV term; L-19 is dated 2026-07-30, L-30 2026-08-19).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from lawbench import ANCHOR_FILE, DataError

# The terms a version may price. "weights" is every version's.
WEIGHTS, KV, FORMAT_ETA, CPU_ATTENTION, EXPERT_CEILING, CAPACITY = (
    "weights", "kv", "format_eta", "cpu_attention", "expert_ceiling", "capacity")


@dataclass(frozen=True)
class LawVersion:
    id: str
    adds: tuple[str, ...]  # the terms this amendment adds to the one before
    terms: frozenset[str]  # every term this version prices
    stated: str  # where the seed or the register states it
    date: Optional[str] = None  # as the source dates it; None where it gives none

    def has(self, term: str) -> bool:
        return term in self.terms


def _nest(*rows: tuple[str, tuple[str, ...], str, Optional[str]]) -> tuple[LawVersion, ...]:
    out: list[LawVersion] = []
    terms: frozenset[str] = frozenset()
    for vid, adds, stated, date in rows:
        terms = terms | frozenset(adds)
        out.append(LawVersion(vid, adds, terms, stated, date))
    return tuple(out)


VERSIONS: tuple[LawVersion, ...] = _nest(
    ("v1.0", (WEIGHTS,), "seed 000, Law 4: 'tok/s = η(tier) × bandwidth ÷ active-bytes-per-token'", None),
    ("v1.1", (KV,), ("seed 000, Law 4: 'tok/s = η(tier) × BW ÷ (active-bytes + ctx × kv-bytes/pos ÷ "
                     "η_kv-adjusted)' (v1.1; register L-02)"), None),
    ("L-15", (FORMAT_ETA,), ("seed 000, Law 4 'amended 2026-07-28 (L-15): within a tier, η is a function "
                             "of the format's unpack instruction cost'"), "2026-07-28"),
    ("v2", (CPU_ATTENTION,), "seed 000, 'Law 4 v2 amendment — L-19': 't += n_cpu_layers × ctx × k'",
     "2026-07-30"),
    ("L-30", (EXPERT_CEILING,), ("seed 000 / register L-30: 'the ceiling is set by the routed experts' "
                                 "share of active bytes'"), "2026-08-19"),
    ("general", (CAPACITY,), ("seed 000, Law 4 general form: 'Fit is checked per tier with KV counted'; "
                              "L-29: bytes past free RAM come off disk"), None),
)
CURRENT = VERSIONS[-1]
BY_ID = {v.id: v for v in VERSIONS}

# Quantities a version must state before an anchor may ask it for them.
NEEDS_TERM: dict[str, str] = {
    "kv_bytes_per_pos": KV, "kv_bytes_ratio": KV, "kv_reference_ratio": KV,
    "kv_compression_needed": KV, "kv_slope_share": KV, "eta_kv_implied": KV,
    "cpu_attention_k_implied": CPU_ATTENTION,
    "cpu_attention_k_from_layer_cost": CPU_ATTENTION,
    "expert_ceiling": EXPERT_CEILING, "routed_share": EXPERT_CEILING,
    "always_active_share": EXPERT_CEILING,
    "fits": CAPACITY, "fit_margin_gb": CAPACITY,
}


def resolve(version: Optional[str], anchor_id: Optional[str] = None) -> LawVersion:
    """The version an anchor names (None: the current one); an unknown one is a DataError."""
    if version is None:
        return CURRENT
    if version not in BY_ID:
        raise DataError(ANCHOR_FILE, f"law4 has no version {version!r}; its versions are "
                                     f"{', '.join(BY_ID)} (docs/law4.md)",
                        anchor=anchor_id, field="law_version")
    return BY_ID[version]


def check_quantity(version: LawVersion, quantity: str, anchor_id: Optional[str] = None,
                   field: str = "case.quantity") -> None:
    """A quantity the version does not state yet is a DataError naming law_version."""
    term = NEEDS_TERM.get(quantity)
    if term is not None and not version.has(term):
        first = next(v.id for v in VERSIONS if term in v.adds)
        raise DataError(ANCHOR_FILE, f"quantity {quantity!r} is stated from law4 {first} on; "
                                     f"law_version {version.id!r} does not price it",
                        anchor=anchor_id, field="law_version")
