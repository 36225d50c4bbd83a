"""The `case` table of a Law 4 anchor: which model, which quantity, which placement and constants.

    [anchor.case]
    model = "manifest:qwen3-30b-a3b"      # or "path:/models/x.gguf", "gguf:<catalogue id>"
    quantity = "decode_change"
    ctx = 16384
    baseline_tok_s = 8.0                  # a published ctx-0 speed replaces the weight term
    placement = { ngl = 0 }               # llama.cpp's -ngl; pure CPU
    tiers.ram = { kind = "ram", bandwidth_gbs = 45.0 }   # the bandwidth the source priced with
    eta_kv = 0.70
    vs = { ctx = 0 }                      # ratio quantities: the reference arm, as overrides
    weight_mix = "Q4_K_M"                 # price a manifest at the quant mix the claim measured

`weight_mix` re-types the model's matrices at a stated mix (plugins/law4/quantmix.py): an ftype
name applies llama.cpp's own per-tensor rules at the pinned build, exactly as llama-quantize would
("Q4_K_M": attn_v and half the ffn_down at Q6_K, the output head at Q6_K, the rest Q4_K), and names
the format the profile's per-format η is looked up by (L-15); a per-role table states a recipe
(`weight_mix = { routed_expert = "Q2_K", attention = "Q4_K", dense_ffn = "Q4_K" }`), whose
format is unnamed (the tier's format-averaged η prices it, unless weight_format names one).

A measured anchor (agreement, measurement, ratio) adds a `bench` table: how llama-bench runs the
case. The placement and KV type above drive -ngl / --n-cpu-moe / -ctk / -ctv, so the law prices
exactly what is measured; with `bench`, the priced context is the generated tokens' average KV
length (depth + (n_gen + 1) / 2), so `ctx` stays out.

    bench = { n_gen = 32, depth = 4096, reps = 2, timeout_s = 120 }

Constants the case leaves out come from the anchor's profile (tier bandwidth and η, η_kv, the
CPU-attention k). Every field is checked here, so a typo names its field ("case.placement.ngl").
"""
from __future__ import annotations

import copy
from typing import Any, Literal, Optional, Union

from pydantic import Field, ValidationError, model_validator

from lawbench import ANCHOR_FILE, DataError, FiniteFloat, Strict, validation_error

# The bench table of a measured case (bench_case.py).
from lawbench.plugins.law4.bench_case import BenchCase
from lawbench.plugins.law4.pricing import KV_TYPES
from lawbench.plugins.law4.spread_case import ORDERED_KINDS, SPREAD_KINDS, SpreadCase
from lawbench.plugins.law4.union_case import UnionCase
from lawbench.store import ModelReference

CASE_FILE = ANCHOR_FILE  # a law does not know the anchor's file; core fills it in

Quantity = Literal[
    "kv_bytes_per_pos",  # the depth slope, from architecture metadata
    "kv_bytes_ratio",  # kv-bytes/pos of this case over the `vs` arm's (kv_type, model, layout)
    "kv_reference_ratio",  # a published kv-bytes/pos (reference_kv_bytes) over the computed one
    "kv_compression_needed",  # kv-bytes/pos over a state budget per position (state_budget_gb / ctx)
    "active_bytes_per_token",  # weight bytes one token reads (ctx 0)
    "active_params",  # parameters a token touches, model-card convention (embedding counted)
    "total_params",
    "routed_share",  # routed experts' share of the active bytes
    "always_active_share",  # 1 − routed_share, at experts_used
    "expert_ceiling",  # L-30: speedup at experts_used = k of the model's K (or vs.experts_used)
    "decode_tok_s",
    "decode_ratio",  # decode_tok_s of this case over the `vs` arm's
    "decode_change",  # decode_ratio − 1 ("−29 %" is −0.29)
    "kv_slope_share",  # share of a measured depth slope the context terms explain
    "eta_kv_implied",  # η_kv that makes the KV bandwidth term explain the whole slope
    "cpu_attention_k_implied",  # L-19's k implied by a measured slope (after the KV term)
    "cpu_attention_k_from_layer_cost",  # L-19's k from a published per-layer cost at one depth
    "scale_density_ratio",  # scale+min chains per quant byte, weight_type over vs.weight_type (L-16)
    "fits",  # 1 when the placement's tiers hold what is placed on them (reserves, KV), else 0
    "fit_margin_gb",  # the tightest tier's usable capacity minus what it holds (< 0: does not fit)
    # Accepted over drafted tokens of a llama-server request (timings.draft_n_accepted / draft_n):
    # measured only; the law has no speculation term to price it (plugins/law4/speculative.py).
    "draft_acceptance",
    # Prompt time of a server session's first request over its last's, every request on the same
    # document with cache_prompt (register V-10): measured only, in llama-server (speculative.py).
    "prefix_cache_speedup",
    # Spreads (plugins/law4/spread.py), measured only: one sample is a statistic over several readings.
    "decode_spread",  # (max − min) / mean of the arm's decode tok/s over spread.visits consecutive visits
    "eta_range",  # per round of one visit per arm: the min or max over the arms of each arm's implied η
    # Order effects (plugins/law4/order_effect.py, register L-31): per schedule of passes through the arms,
    "order_spread",  # (max − min) / 2 / mean of an arm's readings with one predecessor: min or max over groups
    "order_span",  # max / min of an arm's readings over the schedule (every predecessor, or one side)
    "step_change",  # per round of one visit per arm: the largest fall (min) or rise (max) between neighbours (L-08)
    # The disk tier's η read back from a decode streamed past RAM (plugins/law4/eta_disk.py): the
    # bytes the page cache missed (measured residency) over BW_disk × the seconds the other terms leave.
    "eta_disk_implied",
    "eta_population_spread",  # largest over smallest η of published members (L-18; plugins/law4/population.py)
    # A compute ceiling (L-12; plugins/law4/compute_ceiling.py): 2 FLOPs per active parameter, and
    # the FP32 peak over that: tokens per second at 100 % of the peak.
    "flops_per_token",
    "compute_ceiling_tok_s",
    # A published prediction against its measurement (plugins/law4/misses.py):
    "prediction_error",  # predicted / measured − 1 (prereg #73's "−22.9%")
    "error_cut",  # |superseded − measured| / |predicted − measured| (prereg #74's "11×")
    # Distinct experts a verify batch of K+1 tokens reads per MoE layer (plugins/law4/union.py,
    # seed 000's "verify-batches union ~40 experts vs 8"): measured only, by lawbench's reader.
    "expert_union",
]

# Unit scales per quantity: predict() returns the value in the anchor's own unit.
UNITS: dict[str, dict[str, float]] = {
    "kv_bytes_per_pos": {"B/pos": 1.0, "KB/pos": 1e3, "KiB/pos": 1024.0},
    "active_bytes_per_token": {"B": 1.0, "MB": 1e6, "GB": 1e9, "GiB": 2.0 ** 30},
    "active_params": {"params": 1.0, "B params": 1e9},
    "total_params": {"params": 1.0, "B params": 1e9},
    "decode_tok_s": {"tok/s": 1.0},
    "cpu_attention_k_implied": {"us/pos/layer": 1e-6, "s/pos/layer": 1.0},
    "cpu_attention_k_from_layer_cost": {"us/pos/layer": 1e-6, "s/pos/layer": 1.0},
    "fit_margin_gb": {"GB": 1e9, "GiB": 2.0 ** 30, "B": 1.0},
    "flops_per_token": {"FLOP": 1.0, "GFLOP": 1e9},
    "compute_ceiling_tok_s": {"tok/s": 1.0},
    "expert_union": {"experts": 1.0},
}
DIMENSIONLESS = {"x": 1.0, "fraction": 1.0, "%": 0.01}

# What each quantity cannot do without; a missing one is a DataError naming "case.<field>".
NEEDS: dict[str, tuple[str, ...]] = {
    "kv_bytes_per_pos": ("model",),
    "kv_bytes_ratio": ("model", "vs"),
    "kv_reference_ratio": ("model", "reference_kv_bytes"),
    "kv_compression_needed": ("model", "state_budget_gb", "ctx"),
    "active_bytes_per_token": ("model",),
    "active_params": ("model",),
    "total_params": ("model",),
    "routed_share": ("model",),
    "always_active_share": ("model",),
    "expert_ceiling": ("model", "experts_used"),
    "decode_tok_s": (),
    "decode_ratio": ("vs",),
    "decode_change": ("vs",),
    "kv_slope_share": ("model", "ctx", "baseline_tok_s", "measured_tok_s"),
    "eta_kv_implied": ("model", "ctx", "baseline_tok_s", "measured_tok_s"),
    "cpu_attention_k_implied": ("ctx", "baseline_tok_s", "measured_tok_s"),
    "cpu_attention_k_from_layer_cost": ("layer_cost_ms", "ctx"),
    "scale_density_ratio": ("weight_type", "vs"),
    "fits": ("model",),
    "fit_margin_gb": ("model",),
    "draft_acceptance": ("model", "bench"),
    "prefix_cache_speedup": ("model", "bench"),
    "decode_spread": ("model", "bench", "spread"),
    "eta_range": ("spread",),
    "order_spread": ("spread",),
    "order_span": ("spread",),
    "step_change": ("spread",),
    "eta_disk_implied": ("model", "bench"),
    "eta_population_spread": ("population",),
    "flops_per_token": (),  # active_params_b or a model: compute_ceiling.py names the missing one
    "compute_ceiling_tok_s": (),
    "prediction_error": ("predicted_tok_s", "measured_tok_s"),
    "error_cut": ("predicted_tok_s", "superseded_tok_s", "measured_tok_s"),
    "expert_union": ("model", "union"),
}


class TierOverride(Strict):
    """A tier's constants as the published number used them (or a tier the profile lacks)."""

    kind: Optional[Literal["vram", "ram", "disk", "unified"]] = None
    bandwidth_gbs: Optional[FiniteFloat] = Field(default=None, gt=0)
    # DDR bandwidth from its transfer rate: MT/s × 8 bytes × channels (the reference box's
    # 48 GB/s spec is 3000 MT/s × 8 B × 2 channels).
    ddr_mts: Optional[FiniteFloat] = Field(default=None, gt=0)
    ddr_channels: int = Field(default=2, gt=0)
    eta: Optional[FiniteFloat] = Field(default=None, gt=0, le=1.5)
    capacity_gb: Optional[FiniteFloat] = Field(default=None, gt=0)
    # What the tier keeps for others (the OS, the desktop): the published figure the claim's
    # fit-check used; default: the profile's constants.<tier>_reserve_gb.
    reserve_gb: Optional[FiniteFloat] = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_bandwidth(self) -> "TierOverride":
        if self.bandwidth_gbs is not None and self.ddr_mts is not None:
            raise ValueError("give bandwidth_gbs or ddr_mts, not both")
        return self

    def bandwidth(self) -> Optional[float]:
        if self.ddr_mts is not None:
            return self.ddr_mts * 8 * self.ddr_channels / 1000.0
        return self.bandwidth_gbs


class PlacementCase(Strict):
    """llama.cpp's placement flags. Default: everything on the GPU tier (or all on CPU without one)."""

    ngl: Optional[int] = Field(default=None, ge=0)  # -ngl (counts the output layer as one)
    cpu_layers: Optional[int] = Field(default=None, ge=0)  # blocks left on the CPU (dense split)
    experts_on_cpu: bool = False  # --cpu-moe
    n_cpu_moe: int = Field(default=0, ge=0)  # --n-cpu-moe N
    kv_on_cpu: bool = False  # -nkvo
    gpu_tier: Optional[str] = None  # default: the first vram/unified tier
    cpu_tier: Optional[str] = None  # default: the first ram tier (unified where there is none)

    @model_validator(mode="after")
    def _one_split(self) -> "PlacementCase":
        if self.ngl is not None and self.cpu_layers is not None:
            raise ValueError("give ngl or cpu_layers, not both")
        return self


class MeasuredOn(Strict):
    """The machine a figure was measured on, where its source scopes the figure to that machine
    (register L-19: "the constant is thread-count and CPU dependent"). Law 4 runs the anchor there
    only: at exactly these engine threads, on a CPU whose model contains this name; anywhere else the
    run is out of the claim's scope, a SKIP naming both machines (plugins/law4/scope.py), never a
    finding about the claim."""

    threads: Optional[int] = Field(default=None, ge=1, le=4096)  # the source's engine threads
    cpu_model_contains: Optional[str] = Field(default=None, min_length=1)  # e.g. "i5-7600K"
    source: str = Field(min_length=1)  # the source's words that scope the figure to its machine

    @model_validator(mode="after")
    def _something(self) -> "MeasuredOn":
        if self.threads is None and self.cpu_model_contains is None:
            raise ValueError("measured_on: give threads, cpu_model_contains or both (what the source "
                             "scopes its figure to)")
        return self


class Law4Case(Strict):
    quantity: Quantity
    model: Optional[ModelReference] = None  # one form for every law: lawbench.store.ModelRef
    ctx: int = Field(default=0, ge=0)
    kv_type: Literal[KV_TYPES] = "f16"  # type: ignore[valid-type]
    kv_layout: Literal["auto", "expanded"] = "auto"  # expanded: MLA without its compression
    experts_used: Optional[int] = Field(default=None, ge=0)  # k (--override-kv expert_used_count)
    weight_type: Optional[str] = None  # price a manifest's matrices uniformly at this ggml type
    # The quant mix the claim was measured at: an ftype ("Q4_K_M", llama.cpp's own rules) or a
    # per-role table of ggml types (quantmix.py). Sets the format L-15's per-format η is read by.
    weight_mix: Optional[Union[str, dict[str, str]]] = None
    weight_format: Optional[str] = None  # the profile's per-format η key ("Q4_K_M"), L-15
    ubatch: Optional[int] = Field(default=None, gt=0)  # -ub, sizes the VRAM compute buffer (L-08)
    placement: PlacementCase = Field(default_factory=PlacementCase)
    tiers: dict[str, TierOverride] = Field(default_factory=dict)
    eta_kv: Optional[FiniteFloat] = Field(default=None, gt=0, le=1.5)
    cpu_attention_k_us: Optional[FiniteFloat] = Field(default=None, ge=0)  # 0: no CPU-attention term
    n_cpu_layers: Optional[int] = Field(default=None, ge=0)  # CPU-attention layers, without a model
    baseline_tok_s: Optional[FiniteFloat] = Field(default=None, gt=0)  # published ctx-0 speed
    measured_tok_s: Optional[FiniteFloat] = Field(default=None, gt=0)  # published speed at ctx
    # A published CPU-attention cost per CPU layer per token at depth ctx (register U-25's
    # "d16k 23.5 ms/layer"): k = layer_cost / ctx.
    layer_cost_ms: Optional[FiniteFloat] = Field(default=None, gt=0)
    reference_kv_bytes: Optional[FiniteFloat] = Field(default=None, gt=0)  # a published kv-bytes/pos
    state_budget_gb: Optional[FiniteFloat] = Field(default=None, gt=0)
    vs: Optional[dict[str, Any]] = None  # the reference arm: overrides of this case
    bench: Optional[BenchCase] = None  # measured anchors: how llama-bench runs this case
    # The tier's η·BW is not published for this profile: arm b, run interleaved with arm a, is
    # the calibration reference, so the law predicts only the ratio of the arms' bytes per token.
    calibrate: bool = False
    # "cpu-tier": before the anchor runs, its arms must pass Law 4's measured scope rules for a CPU
    # tier (plugins/law4/scope.py: not cache-resident, per-op cost at most 25 % of a token); an arm
    # outside is a SKIP with the figures, never a FAIL.
    scope: Optional[Literal["cpu-tier"]] = None
    measured_on: Optional[MeasuredOn] = None
    spread: Optional[SpreadCase] = None  # decode_spread / eta_range: how one sample is formed
    union: Optional[UnionCase] = None  # expert_union: the verify batches and the text they decode
    # Published figures of machines no runner holds, as the source prints each (L-18's η per architecture)
    population: Optional[dict[str, FiniteFloat]] = Field(default=None, min_length=2)
    # A compute ceiling's inputs as the source printed them (L-12: "~4.4 TFLOPS FP32", "active 3.3B")
    peak_tflops: Optional[FiniteFloat] = Field(default=None, gt=0)  # else the profile's fp32_peak_tflops
    active_params_b: Optional[FiniteFloat] = Field(default=None, gt=0)  # else the model header's
    predicted_tok_s: Optional[FiniteFloat] = Field(default=None, gt=0)  # a published prediction
    superseded_tok_s: Optional[FiniteFloat] = Field(default=None, gt=0)  # the prediction it replaced

    @model_validator(mode="after")
    def _needs(self) -> "Law4Case":
        if self.bench is not None and self.ctx:
            raise ValueError("with a bench table the priced context comes from bench.depth and "
                             "bench.n_gen; leave case.ctx out")
        for name in NEEDS[self.quantity]:
            value = getattr(self, name)
            if value is None or (name == "ctx" and value == 0):
                raise ValueError(f"quantity {self.quantity!r} needs case.{name}")
        if self.weight_mix is not None:
            if self.weight_type is not None:
                raise ValueError("weight_mix: give weight_type (one type for every matrix) or "
                                 "weight_mix, not both")
            from lawbench.plugins.law4.quantmix import check_mix

            try:
                check_mix(self.weight_mix)
            except ValueError as exc:  # "<field>: message" names the field in the DataError
                raise ValueError(f"weight_mix: {exc}") from None
        if self.calibrate and self.bench is None:
            raise ValueError("calibrate = true is a measured design: it needs a bench table")
        if self.measured_on is not None and self.bench is None:
            raise ValueError("measured_on: it scopes a measurement; a case without a bench table measures nothing")
        if (self.measured_on is not None and self.measured_on.threads is not None and self.bench is not None
                and self.bench.threads is not None and self.bench.threads != self.measured_on.threads):
            raise ValueError(f"bench.threads: {self.bench.threads} contradicts measured_on.threads = "
                             f"{self.measured_on.threads} (the anchor runs at the source's threads)")
        if self.scope is not None and self.bench is None:
            raise ValueError("scope: the scope rules are measured; a case without a bench table has nothing to probe")
        if self.spread is not None and self.quantity not in SPREAD_KINDS:
            raise ValueError(f"spread: only a {', '.join(SPREAD_KINDS)} case forms its sample from a "
                             f"spread, not {self.quantity!r}")
        if self.quantity == "order_spread" and self.spread is not None and (
                self.spread.after is None or self.spread.statistic is None):
            raise ValueError("spread.after: an order_spread anchor judges readings split by their predecessor: "
                             "after = \"equal-or-higher\" or \"lower\", and statistic = \"min\" or \"max\"")
        if self.quantity not in ORDERED_KINDS and self.spread is not None and self.spread.order:
            raise ValueError(f"spread.order: an order of the arms belongs to {', '.join(ORDERED_KINDS)}")
        if self.quantity == "step_change" and self.spread is not None and self.spread.statistic is None:
            raise ValueError("spread.statistic: a step_change judges the largest fall (\"min\") or rise (\"max\")")
        if self.quantity == "eta_range" and (self.spread is None or self.spread.statistic is None):
            raise ValueError("spread.statistic: an eta_range anchor judges one end of the range: "
                             "statistic = \"min\" or \"max\"")
        if self.quantity == "decode_spread" and self.spread is not None and self.spread.statistic is not None:
            raise ValueError("spread.statistic: a decode_spread sample is (max − min) / mean; leave statistic out")
        if self.quantity == "eta_disk_implied" and self.bench is not None and self.bench.prime is None:
            raise ValueError("bench.prime: eta_disk_implied reads the page cache's residency, which a visit "
                             "records only with a prime (\"keep\" records it and touches nothing)")
        if self.union is not None and self.quantity != "expert_union":
            raise ValueError(f"union: only an expert_union case decodes verify batches, not {self.quantity!r}")
        if self.quantity == "decode_tok_s" and self.model is None and self.baseline_tok_s is None:
            raise ValueError("decode_tok_s needs a model to price, or a published baseline_tok_s")
        return self


def check_measured(case: Law4Case, kind: str, anchor_id: str, where: str = "case") -> None:
    """What a measured case must not ask of its engine, found at `lawbench check`:
    a run at ``experts_used`` outside llama-batched-bench (llama-bench would run the file's
    default k and call it k), and, on an agreement anchor (measured over the law's price),
    what the law does not price: parallel slots, a V cache other than kv_type."""
    _check_acceptance(case, kind, anchor_id, where)
    _check_prefix_cache(case, kind, anchor_id, where)
    if kind == "prediction":
        return
    b = case.bench
    if case.experts_used is not None and (kind == "census" or b is None or b.tool != "batched-bench"):
        how = ("a census reads llama-bench's load log" if kind == "census"
               else "llama-bench has no --override-kv")
        raise DataError(CASE_FILE, f"a measured case at experts_used = {case.experts_used} must run in "
                        f"llama-batched-bench ({how}, so it would run the file's own k): set "
                        f"bench.tool = \"batched-bench\", or leave experts_used out",
                        anchor=anchor_id, field=f"{where}.experts_used")
    if b is None:
        return
    if kind == "census" and b.tool != "llama-bench":
        raise DataError(CASE_FILE, "a census counts llama-bench's load log; bench.tool must be llama-bench",
                        anchor=anchor_id, field=f"{where}.bench.tool")
    if kind == "agreement" and b.slots > 1:
        raise DataError(CASE_FILE, f"the law prices one sequence's decode, not the aggregate of "
                        f"{b.slots} slots: measure it (kind measurement or ratio)",
                        anchor=anchor_id, field=f"{where}.bench.slots")
    if kind == "agreement" and b.cache_type_v not in (None, case.kv_type):
        raise DataError(CASE_FILE, f"the law prices the V cache at kv_type = {case.kv_type!r}, not "
                        f"{b.cache_type_v!r}: measure it (kind measurement or ratio)",
                        anchor=anchor_id, field=f"{where}.bench.cache_type_v")


def _check_acceptance(case: Law4Case, kind: str, anchor_id: str, where: str) -> None:
    """draft_acceptance is the engine's own count of a speculating server's drafts, so it is
    measured on one arm that speculates; nothing in the law prices it."""
    if case.quantity != "draft_acceptance":
        return
    if kind != "measurement":
        raise DataError(CASE_FILE, f"draft_acceptance is read from llama-server's own counts (draft_n_accepted / "
                        f"draft_n) and the law has no speculation term to price it: kind must be "
                        f"\"measurement\", not {kind!r}", anchor=anchor_id, field="kind")
    b = case.bench
    if b is None or b.tool != "server" or b.server is None or b.server.spec.type == "none":
        raise DataError(CASE_FILE, "draft_acceptance counts a drafter's tokens: the case runs in llama-server "
                        "(bench.tool = \"server\") with a bench.server.spec.type other than \"none\"",
                        anchor=anchor_id, field=f"{where}.bench.server.spec.type")


def _check_prefix_cache(case: Law4Case, kind: str, anchor_id: str, where: str) -> None:
    """prefix_cache_speedup is read from one server session's request sequence: the first request
    is cold only on a fresh server with no warm-up request, and its last must be a later one."""
    b = case.bench
    server = b.server if b is not None and b.tool == "server" else None
    document = server is not None and server.prompt == "document"
    if case.quantity != "prefix_cache_speedup":
        if document:
            raise DataError(CASE_FILE, "a document prompt times prompt processing over a request sequence: "
                            "case.quantity must be \"prefix_cache_speedup\"", anchor=anchor_id,
                            field=f"{where}.bench.server.prompt")
        return
    if kind != "measurement":
        raise DataError(CASE_FILE, f"prefix_cache_speedup is read from llama-server's own prompt timings and the "
                        f"law has no prompt-cache term to price it: kind must be \"measurement\", not {kind!r}",
                        anchor=anchor_id, field="kind")
    if not document or len(server.questions) < 2:  # type: ignore[union-attr]
        raise DataError(CASE_FILE, "prefix_cache_speedup compares a session's first request with its last: the "
                        "case runs in llama-server (bench.tool = \"server\") with server.prompt = \"document\" "
                        "and at least two questions", anchor=anchor_id, field=f"{where}.bench.server.questions")
    if b.warmup or b.reps != 1:  # type: ignore[union-attr]
        raise DataError(CASE_FILE, "the first request must be cold (register V-10: 'a server restart is cold'): "
                        "one session per visit, bench.warmup = false and bench.reps = 1",
                        anchor=anchor_id, field=f"{where}.bench.warmup")
    if server.spec.type != "none":  # type: ignore[union-attr]
        raise DataError(CASE_FILE, "prefix_cache_speedup times prompt processing; leave speculation out "
                        "(spec.type \"none\")", anchor=anchor_id, field=f"{where}.bench.server.spec.type")


def priced_case(case: Law4Case) -> Law4Case:
    """The case the law prices: a measured case at the average KV length of its decode visit."""
    if case.bench is None:
        return case
    return case.model_copy(update={"ctx": case.bench.priced_ctx()})


def calibrated(case: Law4Case, profile_tiers: list[tuple[str, str]]) -> Law4Case:
    """The case priced with every tier at one unit rate (η·BW = 1 GB/s, KV read at the same rate)
    for calibration on a reference arm: byte seconds then scale as 1/c with the calibrated c,
    and the CPU-attention term (the case's k, if any) stays in seconds."""
    unit = {name: TierOverride(kind=kind, bandwidth_gbs=1.0, eta=1.0) for name, kind in profile_tiers}
    return case.model_copy(update={"tiers": unit, "eta_kv": 1.0})


def arm_case(raw: dict[str, Any], overrides: dict[str, Any], anchor_id: str, arm: str) -> Law4Case:
    """One arm of a two-arm anchor: the case with the arm's overrides laid over it."""
    try:
        return Law4Case.model_validate(_deep_merge(raw, overrides))
    except ValidationError as exc:
        # Name the table the bad key was written in: the arm's own, or the shared case.
        loc = exc.errors()[0].get("loc", ())
        where = "case" if loc and loc[0] in raw and loc[0] not in overrides else f"arms.{arm}"
        raise validation_error(CASE_FILE, exc, anchor=anchor_id, prefix=where) from None


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_case(raw: dict[str, Any], anchor_id: str) -> Law4Case:
    """The validated case, or a DataError naming the anchor and the field ("case.placement.ngl")."""
    try:
        return Law4Case.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err.get("loc") and "needs case." in str(err.get("msg", "")):
            # The quantity's own requirements: name the missing field, not the table.
            field = str(err["msg"]).split("needs ")[-1].split()[0]
            raise DataError(CASE_FILE, str(err["msg"]).replace("Value error, ", ""),
                            anchor=anchor_id, field=field) from None
        raise validation_error(CASE_FILE, exc, anchor=anchor_id, prefix="case") from None


def reference_arm(case: Law4Case, raw: dict[str, Any], anchor_id: str) -> Law4Case:
    """The `vs` arm: this case with vs's keys laid over it (nested tables merge)."""
    base = {k: v for k, v in raw.items() if k != "vs"}
    merged = _deep_merge(base, case.vs or {})
    merged["quantity"] = "decode_tok_s" if case.quantity.startswith("decode") else "kv_bytes_per_pos"
    try:
        return Law4Case.model_validate(merged)
    except ValidationError as exc:
        raise validation_error(CASE_FILE, exc, anchor=anchor_id, prefix="case.vs") from None


def unit_scale(quantity: str, unit: str, anchor_id: str) -> float:
    """Divide an SI value by this to express it in the anchor's unit."""
    table = UNITS.get(quantity, DIMENSIONLESS)
    if unit not in table:
        raise DataError(CASE_FILE, f"unit {unit!r} does not fit quantity {quantity!r}; "
                                   f"use one of {', '.join(table)}", anchor=anchor_id, field="unit")
    return table[unit]
