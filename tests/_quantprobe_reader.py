"""Law 4 beside the register's own planner: quantprobe (PyPI, pinned) prices the same inputs.

The reader behind tests/test_quantprobe_crosscheck.py, and nothing else: it imports the installed
quantprobe (the `test` extra pins quantprobe==1.37.0) and keeps no copy of its code, so it lives
beside its one test rather than in the package (issue 21).

`lawbench predict FILE --profile P --ctx N` and `quantprobe plan --gguf FILE --machine M --ctx N`
answer the same question on one file: a model (GGUF header, header dump or manifest) is written as
a *sparse GGUF* — the header, then a hole as long as the tensor data — which lawbench reads with
its header scanner and quantprobe with gguf.GGUFReader. Each side comes back as a `Side`: the
inputs the tool priced with (rates per tier, bytes per token, kv-bytes/pos, capacity budgets),
each read off its own priced rows, and per placement tok/s, fit and seconds per tier.

quantprobe's numbers are its own: `quantprobe.plan.build_rows` (all that `quantprobe plan`
computes) and its counterfactual closure `ev(**overrides)`. `align()` re-prices it with some
inputs taken from lawbench, which is how tests/test_quantprobe_crosscheck.py proves that a listed
cause explains a difference; the few quantprobe literals below serve that alone.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import numpy as np

from lawbench import HardwareProfile
from lawbench.plugins.law4 import pricing as P
from lawbench.plugins.law4.shape import ModelShape

QUANTPROBE_VERSION = "1.37.0"  # the wheel this adapter was written against (test extra pins it)

# The profile's box as quantprobe names it: the register's desktop, RAM overclocked (XMP on,
# DDR4-3000 = the profile's 48 GB/s spec). No other profile has a quantprobe preset.
MACHINE_FOR_PROFILE = {"gtx1060": "2016-xmp"}

# `lawbench predict`'s default placements, and the quantprobe rows that run the same llama.cpp
# flags (-ngl 99 / -ngl 99 -ot exps=CPU / -ngl 0), in order of preference.
PLACEMENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gpu": ("all on GPU", ("all in VRAM",)),
    "experts-cpu": ("experts on CPU", ("hybrid: attention->VRAM, experts->RAM",)),
    "cpu": ("pure CPU (-ngl 0)", ("pure CPU (GPU idle)", "stream from disk (cold experts)")),
}

# Literals inside quantprobe 1.37.0's plan.evaluate (not named constants there); align() needs
# them to undo one convention at a time. plan.py line numbers of the 1.37.0 wheel.
BYTE_FACTOR = 1.15  # act = params × bits/8 × 1.15 (plan.py:1479-1480)
PROTECTED_BITS = 4.5  # always-active params priced at max(bits, 4.5) (plan.py:1452)
VRAM_BUDGET_SHARE = 0.90  # all in VRAM iff size + KV <= 0.90 × vc (plan.py:1506)
RAM_RESERVE_GB = 4.0  # RAM budget ra = max(rc - 4, 1) (plan.py:1485)
CACHE_SHARE = 0.90  # disk row: the page cache holds 0.9 × (ra − KV) of the file (plan.py:1659)
DISK_ROW_FACTOR = 0.95  # disk rows: tok/s = 0.95 / Σ seconds (plan.py:1665)
_LIFT = 1e6  # GB: a capacity nothing reaches, to price a placement that does not fit

SECONDS_KEYS = ("vram", "ram", "io", "cpu")
# The inputs both sides report, in the units of the comparison table: rates in GB/s (η × BW),
# k in µs per position per CPU layer, bytes in B, budgets (capacity less reserves) in B.
INPUTS = ("rate.vram", "rate.ram", "rate.kv", "rate.disk", "k_us.cpu", "bw.vram", "bw.ram",
          "budget.vram", "budget.ram", "kv_bytes_per_pos", "weight_bytes", "model_bytes")
_QP_RESOURCE = {"vram_bw": "vram", "ram_bw": "ram", "io": "io", "cpu_compute": "cpu"}


class NotComparable(RuntimeError):
    """The inputs cannot be put to both tools (no quantprobe preset for the profile, no shapes)."""


def require_quantprobe() -> None:
    import quantprobe

    if quantprobe.__version__ != QUANTPROBE_VERSION:
        raise NotComparable(f"quantprobe {quantprobe.__version__} is installed; this cross-check is "
                            f"written against {QUANTPROBE_VERSION} (pip install quantprobe=={QUANTPROBE_VERSION})")


# --------------------------------------------------------------------------- one file for both


def write_sparse_gguf(path: Path, architecture: str, metadata: Mapping[str, Any],
                      tensors: Iterable[tuple[str, tuple[int, ...], str, int]],
                      file_size: Optional[int] = None, file_type: Optional[Any] = None) -> Path:
    """A GGUF whose tensor data is a hole: header and tensor table real, data all zeros, taking
    no disk space. `metadata` keys are without the architecture prefix; tensors are (name, shape
    in GGUF order, ggml type, bytes); `file_type` the llama.cpp ftype (15 or its name "Q4_K_M"),
    written as general.file_type. `file_size` pads the metadata so the file is exactly as long as
    the one it stands for (quantprobe reads bits/weight off the file size, lawbench the header)."""
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, LlamaFileType

    tensors = list(tensors)
    ftype = file_type
    if isinstance(file_type, str):
        ftype = getattr(LlamaFileType, f"MOSTLY_{file_type}", None) or getattr(LlamaFileType, f"ALL_{file_type}", None)
        if ftype is None:
            raise NotComparable(f"{path}: unknown llama.cpp file type {file_type!r}")

    def build(padding: int) -> GGUFWriter:
        w = GGUFWriter(str(path), architecture)
        if ftype is not None:
            w.add_file_type(int(ftype))
        for key, value in metadata.items():
            add = {bool: w.add_bool, int: w.add_uint32, float: w.add_float32, str: w.add_string,
                   list: w.add_array, tuple: w.add_array}.get(type(value))
            if add is None:
                raise NotComparable(f"metadata {architecture}.{key}: cannot write a {type(value).__name__}")
            add(f"{architecture}.{key}", list(value) if isinstance(value, tuple) else value)
        if padding:
            w.add_key_value("lawbench.padding", " " * padding, GGUFValueType.STRING)
        for name, shape, type_name, n_bytes in tensors:
            w.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), n_bytes,
                              raw_dtype=GGMLQuantizationType[type_name])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        return w

    data = sum(GGUFWriter.ggml_pad(n, 32) for *_, n in tensors)
    padding = 0
    for _ in range(2):  # the second pass adds the padding string that lands the data at its offset
        w = build(padding)
        fout = w.fout[0]
        header_end = fout.tell()
        w.write_padding(fout, header_end)
        start = fout.tell()
        w.close()
        if file_size is None or start + data == file_size:
            break
        overhead = 8 + len("lawbench.padding") + 4 + 8  # key, value type, string length
        padding = file_size - data - header_end - overhead
        if padding < 0 or (file_size - data) % 32:
            raise NotComparable(f"{path}: cannot pad the header to a {file_size}-byte file")
    os.truncate(path, start + data)
    return path


def sparse_from_shape(shape: ModelShape, path: Path) -> Path:
    """A manifest (or any ModelShape with tensor shapes) as a sparse GGUF."""
    missing = [t.name for t in shape.tensors if not t.shape or not t.type_name]
    if missing or not shape.tensors:
        raise NotComparable(f"{shape.source}: no tensor shapes ({missing[0] if missing else 'no tensors'}); "
                            "a GGUF needs every tensor's shape and type")
    return write_sparse_gguf(path, shape.architecture, shape.metadata,
                             ((t.name, t.shape, t.type_name, t.n_bytes) for t in shape.tensors),
                             file_type=getattr(shape, "file_type", None))


def sparse_from_dump(dump: Mapping[str, Any], path: Path) -> Path:
    """A header dump ({architecture, metadata, tensors: [[name, shape, type]], file_size,
    file_type}) as a sparse GGUF as long as the file it was read from."""
    from lawbench.plugins.law4.shape import tensor_bytes

    tensors = [(n, tuple(shape), ty, tensor_bytes(ty, tuple(shape), f"{path}: {n}: "))
               for n, shape, ty in dump["tensors"]]
    return write_sparse_gguf(path, dump["architecture"], dump["metadata"], tensors,
                             file_size=dump.get("file_size"), file_type=dump.get("file_type"))


def read_shape(path: Path) -> ModelShape:
    """What `lawbench predict` reads from the file: the header, through lawbench's scanner."""
    from lawbench import read_gguf_header as read_header

    return ModelShape.from_header(read_header(path, use_cache=False))


# --------------------------------------------------------------------------- what each side says


@dataclass
class Price:
    """One placement as one tool prices it. `lifted`: the tool says it does not fit, and this is
    its price as if it did. Bytes are lawbench's (quantprobe does not split its bytes by tier)."""

    tok_s: Optional[float]
    fits: Optional[bool]
    seconds: dict[str, float] = field(default_factory=dict)  # vram / ram / io / cpu, per token
    weight_bytes: dict[str, float] = field(default_factory=dict)  # read per token, per tier
    kv_bytes: float = 0.0  # read per token at ctx
    row: str = ""  # the tool's name for the placement
    lifted: bool = False
    error: Optional[str] = None


@dataclass
class Side:
    inputs: dict[str, Optional[float]]
    prices: dict[str, Price]
    routed_bytes: float = 0.0  # lawbench: routed-expert bytes a token reads (align's MoE split)


def lawbench_side(shape: Optional[ModelShape], profile: HardwareProfile, ctx: int,
                  placements: Iterable[str]) -> Side:
    """What `lawbench predict --ctx N` prints for these placements (cli.price_rows), and the
    inputs it priced with, read off its own rows as quantprobe's are: a tier's rate (η·BW, GB/s)
    is the bytes it priced there over the seconds it gave them; k is the CPU term per layer."""
    from lawbench.plugins.law4.case import Law4Case
    from lawbench.plugins.law4.tiers import resolve_tiers

    tiers = resolve_tiers(Law4Case(quantity="kv_bytes_per_pos", model="manifest:any"), profile,
                          bool(shape and shape.is_moe))
    kind = {t.name: t.kind for t in tiers.values()}
    tier = {t.kind: t for t in tiers.values()}
    disk = tier.get("disk")
    inputs: dict[str, Optional[float]] = dict.fromkeys(INPUTS)
    inputs.update({"bw.vram": getattr(tier.get("vram"), "bandwidth_gbs", None),
                   "bw.ram": getattr(tier.get("ram"), "bandwidth_gbs", None),
                   "rate.disk": disk.eta * disk.bandwidth_gbs if disk is not None and disk.eta else None,
                   "budget.vram": _budget(tier.get("vram")), "budget.ram": _budget(tier.get("ram"))})
    if shape is not None:
        with contextlib.suppress(ValueError):  # a ShapeError: no KV geometry in the metadata
            inputs["kv_bytes_per_pos"] = P.kv_bytes_per_pos(shape)
    if shape is None or not shape.has_tensors:
        why = f"{shape.source if shape else 'the model'} has no tensors: lawbench cannot price it"
        return Side(inputs, {p: Price(None, None, row=PLACEMENTS[p][0], error=why) for p in placements})
    inputs.update(weight_bytes=P.active_bytes(shape), model_bytes=float(sum(t.n_bytes for t in shape.tensors)))
    probe = _lawbench_rows(shape, profile, 1)  # one position: CPU attention is layers × k
    gpu, cpu = probe.get(PLACEMENTS["gpu"][0]), probe.get(PLACEMENTS["cpu"][0])
    if gpu and "error" not in gpu:
        inputs["rate.vram"] = _rate(gpu, "weights", "vram", kind)
        inputs["rate.kv"] = _rate(gpu, "kv", "vram", kind)
    if cpu and "error" not in cpu:
        inputs["rate.ram"] = _rate(cpu, "weights", "ram", kind)
        if cpu.get("cpu_attention_layers"):
            inputs["k_us.cpu"] = cpu["seconds"].get("cpu_attention", 0.0) / cpu["cpu_attention_layers"] * 1e6
    rows = _lawbench_rows(shape, profile, ctx)
    prices = {p: _lawbench_price(rows.get(PLACEMENTS[p][0]), PLACEMENTS[p][0], kind) for p in placements}
    return Side(inputs, prices, P.bytes_by_role(shape).get("routed_expert", 0.0))


def _lawbench_rows(shape: ModelShape, profile: HardwareProfile, ctx: int) -> dict[str, dict]:
    from lawbench.plugins.law4.cli import price_rows

    args = argparse.Namespace(ngl=None, cpu_layers=None, experts_on_cpu=False, ctx=ctx, kv_type="f16")
    return {r["placement"]: r for r in price_rows(args, shape, profile)}


def _where(tier: str, kind: Mapping[str, str]) -> str:
    k = kind.get(tier, tier)
    return {"disk": "io", "unified": "vram"}.get(k, k)


def _lawbench_price(r: Optional[dict], label: str, kind: Mapping[str, str]) -> Price:
    if r is None or "error" in r:
        return Price(None, None, row=label, error=(r or {}).get("error", "not offered"))
    seconds = dict.fromkeys(SECONDS_KEYS, 0.0)
    for term, s in r["seconds"].items():
        seconds["cpu" if term == "cpu_attention" else _where(term.split("@", 1)[-1], kind)] += s
    held: dict[str, float] = {}
    for tier, b in r["weight_bytes"].items():
        held[_where(tier, kind)] = held.get(_where(tier, kind), 0.0) + b
    # fits: every tier holds what is placed on it and nothing streams from disk
    fits = not r.get("does_not_fit") and not any(v is False for v in r["fits"].values())
    tok_s, lifted = r["tok_s"], False
    if tok_s is None and sum(seconds.values()) > 0:  # "does not fit": its price as if it did
        tok_s, lifted = 1.0 / sum(seconds.values()), True
    return Price(tok_s, fits, seconds, held, sum(r["kv_bytes"].values()), label, lifted)


def _rate(row: dict, what: str, want: str, kind: Mapping[str, str]) -> Optional[float]:
    """GB/s a row gives `what` (weights, kv) on the tiers of kind `want`: bytes over seconds."""
    held = row["weight_bytes" if what == "weights" else "kv_bytes"]
    b = sum(v for t, v in held.items() if kind.get(t) == want)
    s = sum(v for t, v in row["seconds"].items()
            if t.startswith(f"{what}@") and kind.get(t.split("@", 1)[1]) == want)
    return b / s / 1e9 if b and s else None


def _budget(tier: Optional[P.TierRate]) -> Optional[float]:
    """Bytes a tier holds for the model: capacity less what the law reserves (if it reserves)."""
    if tier is None or tier.capacity_gb is None:
        return None
    return (tier.capacity_gb - (getattr(tier, "reserve_gb", 0.0) or 0.0)) * 1e9


@dataclass
class Planner:
    """quantprobe's plan of one file (or preset) on one machine: build_rows' output and its `ev`."""

    plan: dict[str, Any]
    ctx: int

    def rows(self, **over: Any) -> list[Any]:
        return self.plan["ev"](**{"ctx": self.ctx, **over})


def quantprobe_plan(machine: str, ctx: int, gguf: Optional[Path] = None,
                    preset: Optional[Mapping[str, Any]] = None) -> Planner:
    """`quantprobe plan --gguf FILE --machine M --ctx N --no-anchors` (or a preset's flags), as
    quantprobe's own build_rows computes it; its banner lines are swallowed."""
    require_quantprobe()
    from quantprobe import plan

    args = argparse.Namespace(model=None, machine=machine, bits=None, total=None, active=None,
                              always_active=None, vram=None, vram_bw=None, ram=None, ram_bw=None,
                              disk_bw=None, gguf=str(gguf) if gguf else None, ctx=ctx,
                              kv_per_pos=None, no_anchors=True)
    for key, value in (preset or {}).items():
        setattr(args, key, value)
    with contextlib.redirect_stdout(io.StringIO()):
        return Planner(plan.build_rows(args), ctx)


def _row(rows: list[Any], prefixes: tuple[str, ...]) -> Optional[Any]:
    return next((r for p in prefixes for r in rows if r[0].startswith(p)), None)


def _price(row: Any, fits: bool, lifted: bool = False) -> Price:
    seconds = dict.fromkeys(SECONDS_KEYS, 0.0)
    for resource, s in row.terms.items():
        seconds[_QP_RESOURCE[resource]] += s / row.eff  # tok/s = eff / Σ terms
    return Price(row[1], fits, seconds, row=row[0], lifted=lifted)


def quantprobe_prices(planner: Planner, placements: Iterable[str], **over: Any) -> dict[str, Price]:
    """Each placement's row at the machine's capacities. It fits when its first row exists (for
    -ngl 0: pure CPU, not the disk-streaming row that replaces it); a placement with no row at
    all is priced with the capacities lifted, and marked `lifted`."""
    rows, lifted, out = planner.rows(**over), None, {}
    for key in placements:
        prefixes = PLACEMENTS[key][1]
        row = _row(rows, prefixes)
        if row is not None:
            out[key] = _price(row, fits=row[0].startswith(prefixes[0]))
            continue
        lifted = lifted or planner.rows(**{**over, "vc": _LIFT, "rc": _LIFT})
        row = _row(lifted, prefixes)
        out[key] = _price(row, False, lifted=True) if row is not None else Price(None, False, error="no row")
    return out


def quantprobe_side(planner: Planner, placements: Iterable[str]) -> Side:
    """quantprobe's prices and the inputs it priced with, read off its own rows: a tier's rate
    is active bytes over that tier's seconds on a ctx-0 row (capacity lifted, so the row exists);
    the KV rate is 1024 positions' bytes over what they add; k the CPU term per layer·position."""
    inp, hw, act = planner.plan["inputs"], planner.plan["hw"], planner.plan["act"] * 1e9
    at0, at1k = (planner.rows(ctx=c, vc=_LIFT, rc=_LIFT) for c in (0, 1024))
    gpu0, gpu1k = _row(at0, PLACEMENTS["gpu"][1]), _row(at1k, PLACEMENTS["gpu"][1])
    cpu0, cpu1k = _row(at0, ("pure CPU",)), _row(at1k, ("pure CPU",))
    kv_s = gpu1k.terms["vram_bw"] - gpu0.terms["vram_bw"] if gpu0 is not None and gpu1k is not None else 0
    inputs: dict[str, Optional[float]] = {
        "rate.vram": act / gpu0.terms["vram_bw"] / 1e9 if gpu0 is not None else None,
        "rate.ram": act / cpu0.terms["ram_bw"] / 1e9 if cpu0 is not None else None,
        "rate.kv": 1024 * inp["kvp"] / kv_s / 1e9 if kv_s else None,
        "rate.disk": hw["db"] * DISK_ROW_FACTOR,
        "k_us.cpu": cpu1k.terms["cpu_compute"] / ((inp["nlay"] or 32) * 1024) * 1e6 if cpu1k is not None else None,
        "bw.vram": float(hw["vb"]) if hw["vb"] else None,
        "bw.ram": float(hw["rb"]),
        "budget.vram": VRAM_BUDGET_SHARE * hw["vc"] * 1e9 if hw["vc"] else None,
        "budget.ram": max(hw["rc"] - RAM_RESERVE_GB, 1.0) * 1e9,
        "kv_bytes_per_pos": float(inp["kvp"]),
        "weight_bytes": act,
        "model_bytes": planner.plan["size"] * 1e9,
    }
    return Side(inputs, quantprobe_prices(planner, placements))


# --------------------------------------------------------------------------- alignment


# Each cause in tests/data/quantprobe/explained.toml names one of these: what to hand quantprobe
# so that it prices that one input lawbench's way. "none": nothing quantprobe takes can carry it.
ALIGNMENTS = ("rate-vram", "rate-ram", "rate-kv", "kv-bytes", "cpu-attention", "byte-factor",
              "weight-bytes", "capacity-reserve", "disk-model", "none")


def align(planner: Planner, lb: Side, placement: str, alignments: Iterable[str]) -> Price:
    """quantprobe's price of one placement with the named inputs replaced by lawbench's, through
    evaluate's own keyword arguments (its counterfactual closure) and, for the three constants
    it has no argument for (ETA_R_*, ETA_KV, CPU_ATTN_S_PER_POS_LAYER), a patch undone after."""
    from quantprobe import plan

    names = set(alignments)
    if names - set(ALIGNMENTS):
        raise ValueError(f"unknown alignment {sorted(names - set(ALIGNMENTS))}; one of {ALIGNMENTS}")
    inp, hw, li, mine = planner.plan["inputs"], planner.plan["hw"], lb.inputs, lb.prices[placement]
    over: dict[str, Any] = {}
    patch: dict[str, float] = {}
    if "rate-vram" in names and li["rate.vram"] and hw["vb"]:
        over["geta"] = li["rate.vram"] / hw["vb"]
    if "rate-ram" in names and li["rate.ram"]:
        patch["ETA_R_MOE" if inp["moe"] else "ETA_R_DENSE"] = li["rate.ram"] / hw["rb"]
    if "rate-kv" in names and li["rate.kv"] and hw["vb"]:
        patch["ETA_KV"] = li["rate.kv"] / hw["vb"]
    if "kv-bytes" in names and li["kv_bytes_per_pos"] is not None:
        # what lawbench reads per token at this depth, per position (a sliding layer stops at its window)
        over["kvp"] = mine.kv_bytes / planner.ctx if planner.ctx and mine.kv_bytes else li["kv_bytes_per_pos"]
    if "cpu-attention" in names and mine.tok_s is not None and planner.ctx:
        patch["CPU_ATTN_S_PER_POS_LAYER"] = mine.seconds["cpu"] / ((inp["nlay"] or 32) * planner.ctx)
    if "byte-factor" in names:
        over["act_scale"] = 1.0 / BYTE_FACTOR
    if "weight-bytes" in names and mine.weight_bytes:
        # Params that, at PROTECTED_BITS throughout, are the bytes lawbench priced here; its
        # always-active set is everything but the routed experts (the hybrid's GPU share).
        total = sum(mine.weight_bytes.values())
        over.update(bits=PROTECTED_BITS, a=total * 8 / PROTECTED_BITS / 1e9,
                    ne=(total - lb.routed_bytes if inp["moe"] else total) * 8 / PROTECTED_BITS / 1e9)
    if "capacity-reserve" in names:
        if li["budget.vram"] is not None and hw["vc"]:
            over["vc"] = li["budget.vram"] / 1e9 / VRAM_BUDGET_SHARE
        if li["budget.ram"] is not None:
            over["rc"] = li["budget.ram"] / 1e9 + RAM_RESERVE_GB
    if "disk-model" in names:
        _disk_model(planner, mine, li, over, patch)
    saved = {k: getattr(plan, k) for k in patch}
    try:
        for k, v in patch.items():
            setattr(plan, k, v)
        return quantprobe_prices(planner, [placement], **over)[placement]
    finally:
        for k, v in saved.items():
            setattr(plan, k, v)


def _disk_model(planner: Planner, mine: Price, li: Mapping[str, Optional[float]],
                over: dict[str, Any], patch: dict[str, float]) -> None:
    """quantprobe's disk row streaming what lawbench streams: the same share of the read off disk
    (lawbench: RAM-tier reads × the page-cache miss; quantprobe: 1 − 0.9·(ra − KV)/size of the
    non-hot bytes), no hot set, disk at lawbench's η·BW, and the row's 0.95 undone."""
    from quantprobe import plan

    io_b, ram_b = mine.weight_bytes.get("io", 0.0), mine.weight_bytes.get("ram", 0.0)
    if not io_b or not li["rate.disk"]:
        over["rc"] = _LIFT  # lawbench holds it all in RAM: quantprobe's pure-CPU row
        return
    inp, hw = planner.plan["inputs"], planner.plan["hw"]
    miss = io_b / (io_b + ram_b)
    if miss <= 1 - CACHE_SHARE:
        return  # quantprobe's disk row never streams less than 10 %: nothing to hand it
    kv_gb = planner.ctx * over.get("kvp", inp["kvp"]) / 1e9
    over["rc"] = planner.plan["size"] * (1 - miss) / CACHE_SHARE + kv_gb + RAM_RESERVE_GB
    over["ne"] = 0.0  # every byte streams in proportion: no always-hot set
    over["db"] = li["rate.disk"] / DISK_ROW_FACTOR
    over["rb"] = hw["rb"] / DISK_ROW_FACTOR  # the RAM and KV terms, with the row's 0.95 undone
    k = patch.get("CPU_ATTN_S_PER_POS_LAYER", plan.CPU_ATTN_S_PER_POS_LAYER)
    patch["CPU_ATTN_S_PER_POS_LAYER"] = k * DISK_ROW_FACTOR
