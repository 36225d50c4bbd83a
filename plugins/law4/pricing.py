"""Law 4 as pure functions: the placement identity priced from a model's shape.

    tok/s = [ Σ_i bytes-read-per-token on tier i ÷ (η_i · BW_i) ]⁻¹           (general form)
    bytes-per-token = always-active weights + routed-expert reads (k/K of expert bytes)
                      + ctx · kv-bytes/pos on KV's tier (÷ η_kv instead of η_i)  (v2, seed 000)
    t += n_cpu_layers × ctx × k                                                (v2 amendment, L-19)
    speedup(k of K experts) = 1 / (1 − s + s·k/K), s = routed share of active bytes  (L-30)

The v1.0 form, tok/s = η·BW / active-bytes, is the single-tier, ctx = 0 case of the same sum.
Which terms a price carries is the law version's (versions.py): `price_decode(terms=...)`.

Bytes each η multiplies: an η fitted on "active" bytes prices what a token reads (an untied input
embedding is a one-row lookup); one fitted on "file" bytes (L-15's per-format η: 0.553 × 192 GB/s
÷ 4.68 GB = 22.7 tok/s, the seed's Q4_K_M figure) prices the file's bytes — the embedding table
whole and the GGUF header — on the tier that η belongs to.

Capacity (the general form, "Fit is checked per tier with KV counted"): a tier holds its capacity
less its reserves (the OS, the desktop, the compute buffer); KV is held first. RAM that cannot hold
its weights keeps what fits in the page cache and streams the rest of each token's read from the
disk tier at η_disk · BW_disk; VRAM cannot stream (llama.cpp allocates it up front), so bytes past
it — or KV past RAM — mean the placement does not fit.
Bytes are per token; bandwidths in GB/s (1e9); capacities in GB as the profile states them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from lawbench.plugins.law4.capacity import hold, raw_fit
from lawbench.plugins.law4.shape import ModelShape, TensorEntry
from lawbench.plugins.law4.shape_checks import ShapeError, ggml_sizes
from lawbench.plugins.law4.versions import CAPACITY, CPU_ATTENTION, CURRENT, KV

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")


class TierMissing(ShapeError):
    """The placement needs a tier (or a tier constant) the profile does not have."""


def kv_bytes_per_element(kv_type: str) -> float:
    """Bytes per cached element: f16 = 2, q8_0 = 34/32 (a 2-byte scale per 32), q4_0 = 18/32."""
    if kv_type not in KV_TYPES:
        raise ShapeError(f"unknown KV cache type {kv_type!r}; one of {', '.join(KV_TYPES)}")
    block, size = ggml_sizes(kv_type)
    return size / block


# --------------------------------------------------------------------------- the KV term


def kv_bytes_per_pos(shape: ModelShape, kv_type: str = "f16", layout: str = "auto") -> float:
    """The depth slope: bytes each new position adds to every token's read.

    Only global layers count: a sliding-window layer stops growing at its window (seed 000: "SWA
    models slope on global layers only"), and a recurrent layer keeps a fixed state.
    """
    elements = sum(lk.elements for lk in shape.layer_kv(layout) if lk.window is None)
    return elements * kv_bytes_per_element(kv_type)


def kv_layer_bytes_at(shape: ModelShape, ctx: int, kv_type: str = "f16",
                      layout: str = "auto") -> list[float]:
    """Per layer: KV bytes held, and re-read every token, at depth `ctx`."""
    bpe = kv_bytes_per_element(kv_type)
    return [lk.elements * bpe * (min(ctx, lk.window) if lk.window else ctx)
            for lk in shape.layer_kv(layout)]


# --------------------------------------------------------------------------- bytes by role


def read_fraction(t: TensorEntry, shape: ModelShape, experts_used: Optional[int] = None) -> float:
    """The share of a tensor one decoded token reads."""
    if t.role == "routed_expert":
        k_all = shape.expert_count
        if not k_all:
            raise ShapeError(f"{shape.source}: {t.name} is a routed expert but the metadata has "
                             f"no expert_count")
        k = shape.expert_used_count if experts_used is None else experts_used
        if not 0 <= k <= k_all:
            raise ShapeError(f"{shape.source}: experts_used {k} is outside 0..{k_all}")
        return k / k_all
    if t.role == "embedding" and not shape.tied_embeddings:
        # A row lookup: one row of the table per token. Tied, the table is also the output head.
        rows = t.rows if t.shape else int(shape.meta("vocab_size") or 0)
        if rows <= 0:
            raise ShapeError(f"{shape.source}: {t.name} has no row count (shape or vocab_size)")
        return 1.0 / rows
    return 1.0


def bytes_by_role(shape: ModelShape, experts_used: Optional[int] = None) -> dict[str, float]:
    """Weight bytes read per token, by tensor role (ctx = 0)."""
    out: dict[str, float] = {}
    for t in shape.tensors:
        out[t.role] = out.get(t.role, 0.0) + t.n_bytes * read_fraction(t, shape, experts_used)
    return out


def active_bytes(shape: ModelShape, experts_used: Optional[int] = None) -> float:
    if not shape.tensors:
        raise ShapeError(f"{shape.source}: describes no tensors, so it has no active bytes")
    return sum(bytes_by_role(shape, experts_used).values())


def routed_share(shape: ModelShape, experts_used: Optional[int] = None) -> float:
    """The routed experts' share of the active bytes (L-30's s)."""
    roles = bytes_by_role(shape, experts_used)
    total = sum(roles.values())
    return roles.get("routed_expert", 0.0) / total if total else 0.0


def expert_ceiling(share: float, k: int, k_used: int) -> float:
    """Decode speedup from running k of the model's K_used experts when bytes set the speed (L-30)."""
    if k_used <= 0 or k < 0:
        raise ValueError(f"expert ceiling needs 0 <= k and K_used > 0 (got k={k}, K_used={k_used})")
    return 1.0 / (1.0 - share + share * k / k_used)


def total_params(shape: ModelShape) -> float:
    missing = [t.name for t in shape.tensors if t.n_elements is None]
    if missing or not shape.tensors:
        raise ShapeError(f"{shape.source}: no parameter count for {missing[0] if missing else 'any tensor'}")
    return float(sum(t.n_elements or 0 for t in shape.tensors))


def active_params(shape: ModelShape, experts_used: Optional[int] = None, *,
                  count_embedding: bool = True) -> float:
    """Parameters a token touches. The model-card convention ("A3B") counts the embedding table
    whole; `count_embedding=False` drops it (a gather does no FLOPs — the prefill share)."""
    total = 0.0
    for t in shape.tensors:
        if t.n_elements is None:
            raise ShapeError(f"{shape.source}: {t.name} states no parameter count")
        if t.role == "embedding" and not count_embedding and not shape.tied_embeddings:
            continue
        frac = read_fraction(t, shape, experts_used) if t.role == "routed_expert" else 1.0
        total += t.n_elements * frac
    return total


# --------------------------------------------------------------------------- placement


@dataclass(frozen=True)
class TierRate:
    """One memory tier as Law 4 prices it: η against the bandwidth η was fitted to (the spec)."""

    name: str
    kind: str
    bandwidth_gbs: float
    eta: Optional[float] = None  # None: no η known here (the KV term still prices with η_kv)
    capacity_gb: Optional[float] = None
    bytes_basis: str = "active"  # the bytes η was fitted on: "active" (read per token) or "file"
    reserve_gb: float = 0.0  # kept for others (OS, desktop, compute buffer): not the model's
    eta_format: Optional[str] = None  # the weight format whose η this is (L-15), None: tier average

    @property
    def bytes_per_s(self) -> float:
        if self.eta is None:
            raise TierMissing(f"no η for tier {self.name!r} in this profile: Law 4 prices its bytes at "
                              f"η × bandwidth (give the profile [laws.law4] eta.{self.name}, or pick one that has it)")
        return self.eta * self.bandwidth_gbs * 1e9


@dataclass(frozen=True)
class Placement:
    """Where llama.cpp puts each tensor. `gpu_layers` is -ngl: it counts the output layer as one,
    so -ngl N offloads the output head and the last N−1 blocks; the input embedding stays on CPU."""

    gpu_tier: Optional[str]  # None: a CPU-only box
    cpu_tier: Optional[str]
    gpu_layers: Optional[int] = None  # None: every block and the output
    experts_on_cpu: bool = False  # --cpu-moe / -ot exps=CPU
    n_cpu_moe: int = 0  # --n-cpu-moe N: routed experts of the first N blocks on CPU
    kv_on_cpu: bool = False  # -nkvo

    def devices(self, n_layer: int) -> tuple[list[str], str]:
        """Per block "gpu" / "cpu", and the output head's device."""
        if self.gpu_tier is None:
            return ["cpu"] * n_layer, "cpu"
        ngl = n_layer + 1 if self.gpu_layers is None else self.gpu_layers
        start = max(n_layer + 1 - ngl, 0)
        return ["gpu" if il >= start else "cpu" for il in range(n_layer)], \
            "gpu" if n_layer >= start and ngl > 0 else "cpu"

    def tier_of(self, device: str) -> str:
        tier = self.gpu_tier if device == "gpu" else self.cpu_tier
        if tier is None:
            # resolve_tiers leaves out a tier without a bandwidth, so "none" covers both cases
            raise TierMissing(f"the placement puts bytes on the {device.upper()}, but the profile has "
                              f"no {'GPU' if device == 'gpu' else 'RAM'} tier with a bandwidth to price "
                              f"them (measure one: `lawbench profiles measure`)")
        return tier


@dataclass
class Pricing:
    ctx: int
    weight_bytes: dict[str, float] = field(default_factory=dict)  # per tier, read per token
    kv_bytes: dict[str, float] = field(default_factory=dict)  # per tier, read per token at ctx
    resident_bytes: dict[str, float] = field(default_factory=dict)  # per tier: weights + KV at ctx
    seconds: dict[str, float] = field(default_factory=dict)  # per term: "weights@vram", "kv@ram", …
    fits: dict[str, Optional[bool]] = field(default_factory=dict)
    cpu_attention_layers: int = 0
    warnings: list[str] = field(default_factory=list)
    terms: tuple[str, ...] = ()  # the law version's terms this price carries
    reserve_bytes: dict[str, float] = field(default_factory=dict)  # per tier: kept for others
    usable_bytes: dict[str, float] = field(default_factory=dict)  # per tier: capacity − reserves
    page_cache_bytes: dict[str, float] = field(default_factory=dict)  # RAM: weights the cache holds
    streamed_bytes: dict[str, float] = field(default_factory=dict)  # per token, from disk, by tier
    does_not_fit: list[str] = field(default_factory=list)  # why the placement cannot hold the model
    eta: dict[str, dict] = field(default_factory=dict)  # per tier: η, its format and byte basis

    @property
    def seconds_per_token(self) -> float:
        return sum(self.seconds.values())

    @property
    def tok_s(self) -> float:
        t = self.seconds_per_token
        return 1.0 / t if t > 0 else float("inf")

    def dominant(self) -> tuple[str, float]:
        """The term that takes most of the token, and its share (v1 holds when it nears 1)."""
        term = max(self.seconds, key=self.seconds.__getitem__)
        return term, self.seconds[term] / self.seconds_per_token

    @property
    def fits_all(self) -> bool:
        """Every tier holds what is placed on it (after reserves, KV counted): nothing streams."""
        return not self.does_not_fit and all(ok is not False for ok in self.fits.values())

    def fit_margin(self) -> Optional[float]:
        """Bytes left on the tightest tier with a capacity (negative: over by that much)."""
        margins = [self.usable_bytes[t] - self.resident_bytes.get(t, 0.0) for t in self.usable_bytes]
        return min(margins) if margins else None

    def as_dict(self) -> dict:
        return {"ctx": self.ctx, "tok_s": None if self.does_not_fit else self.tok_s,
                "seconds": dict(self.seconds),
                "weight_bytes": dict(self.weight_bytes), "kv_bytes": dict(self.kv_bytes),
                "resident_bytes": dict(self.resident_bytes), "fits": dict(self.fits),
                "reserve_bytes": dict(self.reserve_bytes), "usable_bytes": dict(self.usable_bytes),
                "page_cache_bytes": dict(self.page_cache_bytes),
                "streamed_bytes": dict(self.streamed_bytes), "does_not_fit": list(self.does_not_fit),
                "eta": dict(self.eta), "terms": list(self.terms),
                "cpu_attention_layers": self.cpu_attention_layers, "warnings": list(self.warnings)}


def _add(d: dict[str, float], key: str, v: float) -> None:
    d[key] = d.get(key, 0.0) + v


def _tensor_device(t: TensorEntry, p: Placement, devs: list[str], out_dev: str) -> str:
    if t.role == "embedding":
        # llama.cpp keeps the input layer on the CPU; a GPU-only profile has nowhere else to put it.
        return "cpu" if p.cpu_tier is not None or p.gpu_tier is None else "gpu"
    if t.layer is None:
        return out_dev
    if t.role == "routed_expert" and (p.experts_on_cpu or t.layer < p.n_cpu_moe):
        return "cpu"
    return devs[t.layer] if t.layer < len(devs) else out_dev


def price_decode(shape: ModelShape, tiers: Mapping[str, TierRate], placement: Placement, *,
                 ctx: int = 0, kv_type: str = "f16", kv_layout: str = "auto",
                 experts_used: Optional[int] = None, eta_kv: Optional[float] = None,
                 cpu_attention_k_s: Optional[float] = None,
                 terms: Optional[frozenset[str]] = None) -> Pricing:
    """Decode tok/s of one placement, with the breakdown behind it.

    :param terms: the law version's terms (versions.py); default: the current version's.
    """
    terms = CURRENT.terms if terms is None else terms
    n_layer = shape.n_layer
    devs, out_dev = placement.devices(n_layer)
    pr = Pricing(ctx=ctx, terms=tuple(sorted(terms)))
    out_tier = placement.tier_of(out_dev)
    # L-15's per-format η was fitted on whole-file bytes: where it prices the output head's tier,
    # the input embedding counts whole there (not as a one-row lookup) and so does the header.
    file_basis = out_tier in tiers and tiers[out_tier].bytes_basis == "file"
    weights_held: dict[str, float] = {}
    for t in shape.tensors:
        dev = _tensor_device(t, placement, devs, out_dev)
        tier = placement.tier_of(dev)
        _add(pr.resident_bytes, tier, t.n_bytes)
        _add(weights_held, tier, t.n_bytes)
        if t.role == "embedding" and shape.tied_embeddings:
            # Tied: the row lookup stays on CPU; the output head reads the table whole on the
            # output's device, and llama.cpp keeps a copy there when that is the GPU.
            _add(pr.weight_bytes, out_tier, float(t.n_bytes))
            if out_tier != tier:
                _add(pr.resident_bytes, out_tier, t.n_bytes)
                _add(weights_held, out_tier, t.n_bytes)
            continue
        if t.role == "embedding" and file_basis:
            _add(pr.weight_bytes, out_tier, float(t.n_bytes))
            continue
        _add(pr.weight_bytes, tier, t.n_bytes * read_fraction(t, shape, experts_used))
    if file_basis and shape.header_bytes:
        _add(pr.weight_bytes, out_tier, float(shape.header_bytes))
    if ctx > 0 and KV in terms:
        kv_tiers, cpu_positions = _context(shape, placement, devs, ctx, kv_type, kv_layout, pr)
        if any(v > 0 for v in kv_tiers.values()) and eta_kv is None:
            raise TierMissing("the KV term needs η_kv (case eta_kv or the profile's [laws.law4] constants.eta_kv)")
        for tier, b in kv_tiers.items():
            _add(pr.kv_bytes, tier, b)
            _add(pr.resident_bytes, tier, b)
            if b:
                pr.seconds[f"kv@{tier}"] = b / ((eta_kv or 1.0) * _rate(tiers, tier).bandwidth_gbs * 1e9)
        if cpu_positions and cpu_attention_k_s and CPU_ATTENTION in terms:
            pr.seconds["cpu_attention"] = cpu_positions * cpu_attention_k_s
    if CAPACITY in terms:
        hold(pr, tiers, weights_held)
    else:
        raw_fit(pr, tiers)
    for tier, b in pr.weight_bytes.items():
        if b:
            rate = _rate(tiers, tier)
            pr.seconds[f"weights@{tier}"] = b / rate.bytes_per_s
            pr.eta[tier] = {"eta": rate.eta, "format": rate.eta_format, "bytes": rate.bytes_basis}
    if placement.kv_on_cpu and ctx > 0:
        pr.warnings.append("KV on the CPU tier (-nkvo): every token re-reads it there (L-25)")
    return pr


def _context(shape: ModelShape, p: Placement, devs: list[str], ctx: int, kv_type: str,
             layout: str, pr: Pricing) -> tuple[dict[str, float], float]:
    """KV bytes per tier at ctx, and the positions attended on CPU (the L-19 term's n × ctx)."""
    per_layer = kv_layer_bytes_at(shape, ctx, kv_type, layout)
    layers = shape.layer_kv(layout)
    kv: dict[str, float] = {}
    cpu_positions = 0.0
    for il, b in enumerate(per_layer):
        dev = "cpu" if p.kv_on_cpu else devs[il]
        _add(kv, p.tier_of(dev), b)
        if devs[il] == "cpu" and layers[il].elements:
            pr.cpu_attention_layers += 1
            cpu_positions += min(ctx, layers[il].window) if layers[il].window else ctx
    return kv, cpu_positions


def _rate(tiers: Mapping[str, TierRate], name: str) -> TierRate:
    if name not in tiers:
        raise TierMissing(f"no bandwidth for tier {name!r} (known: {', '.join(tiers) or 'none'})")
    return tiers[name]
