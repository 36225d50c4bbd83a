"""A case's tiers and placement: the profile's Law 4 table ([laws.law4]), with the case's overrides
laid over them.

Each tier gets the η the law version prices with (the format's own η from L-15 on, where the
profile publishes one for the model's format; else the tier average, or the MoE scatter figure),
the bandwidth that η multiplies (its basis: spec or measured), the bytes that η was fitted on
(active or whole-file), and the capacity reserves the general form's fit-check subtracts.
"""
from __future__ import annotations

from typing import Any, Optional

from lawbench import DataError, HardwareProfile
from lawbench.plugins.law4 import pricing as P
from lawbench.plugins.law4.case import CASE_FILE, Law4Case
from lawbench.plugins.law4.profile import Law4Profile, law4_profile
from lawbench.plugins.law4.versions import CURRENT, FORMAT_ETA, LawVersion

# llama.cpp's default physical batch (common/common.h `n_ubatch = 512`; llama-bench's default
# -ub 512 at b11434): what sizes the CUDA compute buffer when a case names no -ub.
DEFAULT_UBATCH = 512

# The bytes each kind of η was fitted on, where the profile's fact does not say
# (Efficiency.bytes; docs/law4.md "Which bytes an η multiplies").
#  - a tier's η is the law's own "η(tier) × bandwidth ÷ active-bytes-per-token" (seed 000, v1.0);
#  - a per-format η (L-15) reproduces the seed's 26.87 vs 22.72 tok/s only on whole-file bytes
#    (0.553 × 192 GB/s ÷ 4.68 GB = 22.7; on the 4.37 GB without the embedding it would be 24.3).
DEFAULT_BYTES = {"eta": "active", "eta_format": "file"}


def _bytes_basis(fact: Any, kind: str) -> str:
    return fact.bytes or DEFAULT_BYTES[kind]


def _eta(table: Law4Profile, name: str, moe: bool, fmt: Optional[str],
         version: LawVersion) -> tuple[Any, str, Optional[str]]:
    """The η Fact a tier prices with, the bytes it was fitted on, and the format it belongs to."""
    if version.has(FORMAT_ETA) and fmt is not None and fmt in table.eta_format.get(name, {}):
        return table.eta_format[name][fmt], _bytes_basis(table.eta_format[name][fmt], "eta_format"), fmt
    moe_eta = table.constants.get(f"eta_{name}_moe") if moe else None  # the MoE scatter penalty
    if moe_eta is not None:
        return moe_eta, _bytes_basis(moe_eta, "eta"), None
    fact = table.eta.get(name)
    return fact, (_bytes_basis(fact, "eta") if fact is not None else "active"), None


def _reserve_gb(case: Law4Case, table: Law4Profile, name: str, kind: str) -> float:
    """What the tier keeps for others: the case's figure, else the profile's <tier>_reserve_gb,
    plus on a GPU tier llama.cpp's compute buffer at the case's -ub (register L-08's slope)."""
    over = case.tiers.get(name)
    if over is not None and over.reserve_gb is not None:
        return over.reserve_gb
    reserve = table.constant(f"{name}_reserve_gb") or 0.0
    slope = table.constant("compute_buffer_mib_per_ubatch_token")
    if kind in ("vram", "unified") and slope:
        ubatch = case.ubatch or (case.bench.ubatch if case.bench and case.bench.ubatch else DEFAULT_UBATCH)
        reserve += ubatch * slope * 2 ** 20 / 1e9
    return reserve


def resolve_tiers(case: Law4Case, profile: HardwareProfile, moe: bool, fmt: Optional[str] = None,
                  version: LawVersion = CURRENT) -> dict[str, P.TierRate]:
    """The profile's tiers with the case's overrides laid over them.

    η and bandwidth are taken as a pair: each η in a profile names its basis (the spec figure or a
    measured one), and the tier's bandwidth of that basis is the one it multiplies. A case that
    overrides the bandwidth states the figure its published number was priced with.

    :param fmt: the model's weight format ("Q4_K_M"); the case's weight_format wins over it.
    """
    fmt = case.weight_format or fmt
    table = law4_profile(profile)
    out: dict[str, P.TierRate] = {}
    names = [t.name for t in profile.tiers] + [n for n in case.tiers if n not in {t.name for t in profile.tiers}]
    for name in names:
        over = case.tiers.get(name)
        prof = next((t for t in profile.tiers if t.name == name), None)
        kind = (over.kind if over and over.kind else None) or (prof.kind if prof else None)
        if kind is None:
            raise DataError(CASE_FILE, f"tier {name!r} is not in profile {profile.id!r}; give its kind",
                            field=f"case.tiers.{name}.kind")
        eta_fact, basis, eta_fmt = (None, "active", None)
        if prof is not None and not (over and over.eta is not None):
            eta_fact, basis, eta_fmt = _eta(table, name, moe, fmt, version)
        eta = over.eta if over and over.eta is not None else (eta_fact.value if eta_fact else None)
        bw = over.bandwidth() if over else None
        if bw is None and prof is not None:
            fact = _bandwidth_fact(prof, eta_fact.basis if eta_fact else None)
            bw = fact.value if fact else None
        cap = over.capacity_gb if over and over.capacity_gb else None
        if cap is None and prof is not None and prof.capacity_gb is not None:
            cap = prof.capacity_gb.value
        if bw is not None:
            out[name] = P.TierRate(name, kind, bw, eta, cap, bytes_basis=basis,
                                   reserve_gb=_reserve_gb(case, table, name, kind), eta_format=eta_fmt)
    return out


def _bandwidth_fact(tier: Any, basis: Optional[str]) -> Any:
    """The bandwidth an η multiplies: of its basis; without an η, the spec figure, else measured."""
    if basis == "measured":
        return tier.bandwidth_measured_gbs
    if basis == "spec":
        return tier.bandwidth_spec_gbs
    return tier.bandwidth_spec_gbs or tier.bandwidth_measured_gbs


def resolve_placement(case: Law4Case, tiers: dict[str, P.TierRate], n_layer: Optional[int]) -> P.Placement:
    pc = case.placement
    gpu = pc.gpu_tier or next((t.name for t in tiers.values() if t.kind in ("vram", "unified")), None)
    cpu = pc.cpu_tier or next((t.name for t in tiers.values() if t.kind == "ram"), None) \
        or next((t.name for t in tiers.values() if t.kind == "unified"), None)
    for field, name in (("gpu_tier", pc.gpu_tier), ("cpu_tier", pc.cpu_tier)):
        if name is not None and name not in tiers:
            raise DataError(CASE_FILE, f"tier {name!r} has no bandwidth here (known: {', '.join(tiers)})",
                            field=f"case.placement.{field}")
    ngl = pc.ngl
    if pc.cpu_layers is not None:
        if n_layer is None:
            raise DataError(CASE_FILE, "cpu_layers needs a model", field="case.placement.cpu_layers")
        ngl = max(n_layer - pc.cpu_layers, 0) + 1  # the output head stays on the GPU
    return P.Placement(gpu_tier=gpu, cpu_tier=cpu, gpu_layers=ngl, experts_on_cpu=pc.experts_on_cpu,
                       n_cpu_moe=pc.n_cpu_moe, kv_on_cpu=pc.kv_on_cpu)


def k_seconds(case: Law4Case, profile: HardwareProfile) -> Optional[float]:
    """L-19's k per position per CPU layer: the case's, else the profile's cpu_attention_k_us.

    Every placement, pure CPU included, prices with the seed's formula constant ("k = 1.55 µs (this
    box, 4 threads)"); the register's pure-CPU arm (1.10 µs, constants.cpu_attention_k_us_pure_cpu)
    is a measurement of that arm, not the law's constant — an anchor that means it says so in its
    case (cpu_attention_k_us).
    """
    if case.cpu_attention_k_us is not None:
        return case.cpu_attention_k_us * 1e-6
    k = law4_profile(profile).constant("cpu_attention_k_us")
    return None if k is None else k * 1e-6
