"""Law 1 at model level: what a rotation does to perplexity, not to a tensor's error.

The issue's step 3. Chosen tensors of a real model are fake-quantized twice (fakequant.py): once
in the native basis, once in a gauge (rotate, quantize, rotate back, store F32), every other tensor
copied byte for byte. Both files are scored by the real llama-perplexity on the same disjoint
slices of a shipped text (lawbench.core.engines.perplexity), one slice a round, so a sample is the
paired per-slice ratio exp(nll_gauge - nll_native): < 1 the rotation helps the model, > 1 it hurts.

    case = { model = "smollm2-135m-q4_1", role = "ffn_up", layers = "all", bits = 2, group = 64,
             gauge = "hadamard", ctx = 128, chunks = 3 }

The two files are cached under the model's own cache folder, named by a key over their content's
inputs (the source's sha256, the tensors, bits, group, gauge, seeds and FORMAT): a second run, or a
second anchor on the same tensors, reuses them. A sidecar JSON keeps what building them measured
(each tensor's effective rank and relative MSE in both bases), so a cached run still reports it.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lawbench import ANCHOR_FILE, Anchor, DataError, InterleavedSampler, LawbenchError, Visit
from lawbench.engines import DEFAULT_TEXT, SliceVisits, shipped_text, text_sha256, text_slices
from lawbench.plugins.law1.case import GAUGES, ROLES, Group, catalogue_id
from lawbench.store import ModelReference

QUANTITY = "gauge/native perplexity ratio"
# Bump when what a fake-quantized file holds for the same inputs changes (gauges.py arithmetic,
# fakequant.py layout): the cache key includes it, so stale files are never reused.
FORMAT = 1
MAX_SLICES = 64  # more slices than any budget asks for; each is scored once at most


class Law1PerplexityCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelReference  # a catalogue model (anchors/models*.toml): "gguf:<id>"
    role: Literal[ROLES]  # type: ignore[valid-type]
    layers: Literal["all"] | list[int] = "all"  # "all": every block of the model
    bits: int = Field(ge=1, le=8)
    group: Group = 64
    gauge: Literal[GAUGES[1:]] = "hadamard"  # type: ignore[valid-type]  # against native
    seed: int = Field(default=0, ge=0)  # layer N's rotation seed is seed + N
    text: str = DEFAULT_TEXT
    slice_chars: int = Field(default=3000, ge=500)
    first_slice: int = Field(default=0, ge=0)
    ctx: int = Field(default=128, ge=32)
    chunks: int = Field(default=3, ge=1)
    threads: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)

    @field_validator("layers")
    @classmethod
    def _distinct(cls, v):
        if isinstance(v, list) and (not v or any(x < 0 for x in v) or len(set(v)) != len(v)):
            raise ValueError("layers: \"all\" or distinct block indices, 0 or more")
        return v


def parse_case(anchor: Anchor) -> Law1PerplexityCase:
    """The case of a model-level anchor, or a DataError naming the anchor and the field."""
    from lawbench import validation_error

    if anchor.kind != "measurement" or anchor.arms:
        raise DataError(ANCHOR_FILE, "a law1 perplexity anchor is a measurement without arms (both "
                        "files, native and gauge, are built from its one case)", anchor=anchor.id,
                        field="kind")
    try:
        case = Law1PerplexityCase.model_validate(anchor.case)
    except ValidationError as exc:
        raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix="case") from None
    catalogue_id(case.model, anchor.id)
    return case


# --------------------------------------------------------------------------- the two files


def file_key(source_sha256: str, names: list[str], case: Law1PerplexityCase, gauge: str) -> str:
    basis = json.dumps({"format": FORMAT, "source": source_sha256, "tensors": names, "bits": case.bits,
                        "group": case.group, "gauge": gauge,
                        "seed": case.seed if gauge != "native" else None}, sort_keys=True)
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def fake_quantized_file(src: Path, source_sha256: str, names: list[str], case: Law1PerplexityCase,
                        gauge: str, folder: Path, shared: dict[str, Any] | None = None
                        ) -> tuple[Path, dict[str, Any]]:
    """The fake-quantized copy of ``src`` (built once, then reused) and its build record.

    ``shared``: one dict that both arms of an anchor pass, so that what depends on the source only
    is made once for the two copies: the source opened (its metadata decoded) and each source
    tensor's effective rank (the same number in both records).
    """
    from gguf import GGUFReader

    from lawbench.plugins.law1.fakequant import write_fake_quantized
    from lawbench.plugins.law1.gauges import effective_rank, quantize_in_gauge, rel_mse
    from lawbench.plugins.law1.tensors import TensorFile

    key = file_key(source_sha256, names, case, gauge)
    dst = folder / f"{src.stem}.{case.role}.{gauge}-{case.bits}bit-g{case.group}-{key}.gguf"
    sidecar = dst.with_name(dst.name + ".json")
    if dst.is_file() and sidecar.is_file():
        return dst, {**json.loads(sidecar.read_text(encoding="utf-8")), "cached": True}
    folder.mkdir(parents=True, exist_ok=True)
    shared = {} if shared is None else shared
    if "reader" not in shared:
        shared["reader"], shared["tensors"], shared["erank"] = GGUFReader(src), TensorFile(src), {}
    tf, eranks = shared["tensors"], shared["erank"]
    stats: dict[str, dict[str, float]] = {}

    def fake(name: str):
        layer = int(name.split(".")[1])

        def apply(w):
            wq = quantize_in_gauge(w, case.bits, case.group, gauge, seed=case.seed + layer)
            if name not in eranks:
                eranks[name] = round(effective_rank(w), 2)
            stats[name] = {"erank": eranks[name], "rel_mse": rel_mse(w, wq)}
            return wq
        return apply

    t0 = time.monotonic()
    part = dst.with_suffix(".part")
    write_fake_quantized(src, part, {n: fake(n) for n in names}, lambda n: tf.read(n).weights,
                         reader=shared["reader"])
    record = {"file": dst.name, "key": key, "gauge": gauge, "source": src.name,
              "source_sha256": source_sha256, "source_type": tf.read(names[0]).source_type,
              "build_wall_s": round(time.monotonic() - t0, 2), "tensors": stats}
    part.rename(dst)
    sidecar.write_text(json.dumps(record, indent=1), encoding="utf-8")
    return dst, {**record, "cached": False}


# --------------------------------------------------------------------------- the sampler
# lawbench.InterleavedSampler: per round one slice, both files scored on it (order alternating,
# gauge first in round 0), one sample gauge/native.


def _ratio(visits: dict[str, Visit]) -> float:
    """One round's sample: the perplexity ratio gauge/native on the slice both files scored."""
    return math.exp(visits["gauge"].raw["nll"] - visits["native"].raw["nll"])


def _round_raw(visits: dict[str, Visit]) -> dict[str, Any]:
    return {"slice": visits["gauge"].raw["slice"], "ppl_gauge": visits["gauge"].raw["ppl"],
            "ppl_native": visits["native"].raw["ppl"]}


def sampler(anchor: Anchor, profile: Any, resources: Any) -> InterleavedSampler:
    from lawbench.plugins.law1.tensors import TensorFile
    from lawbench.store import cache_root, load_catalog, model_file, sha256_of

    case = parse_case(anchor)
    model = catalogue_id(case.model, anchor.id)
    src = model_file(case.model, resources)
    blocks = TensorFile(src).layers()
    layers = list(range(blocks)) if case.layers == "all" else case.layers
    beyond = [n for n in layers if n >= blocks]
    if beyond:
        raise DataError(ANCHOR_FILE, f"layers {beyond} do not exist: {src.name} has {blocks} "
                        f"(blk.0 to blk.{blocks - 1})", anchor=anchor.id, field="case.layers")
    try:
        text = shipped_text(case.text)
    except LawbenchError as exc:
        raise DataError(ANCHOR_FILE, str(exc), anchor=anchor.id, field="case.text") from None
    slices = text_slices(text, case.first_slice + MAX_SLICES, case.slice_chars)[case.first_slice:]
    if len(slices) < anchor.budget.max_samples:
        raise DataError(ANCHOR_FILE, f"text {case.text} gives {len(slices)} slices of {case.slice_chars} "
                        f"characters from slice {case.first_slice} on, fewer than budget.max_samples "
                        f"{anchor.budget.max_samples}", anchor=anchor.id, field="budget.max_samples")
    entry = load_catalog().get(model)
    # The store verified the file against the catalogue's sha256; a runner's own file without one
    # is hashed here, so the key always names the content the copies were made from.
    source_sha = getattr(entry, "sha256", None) or sha256_of(src)
    names = [f"blk.{n}.{case.role}.weight" for n in layers]
    folder = cache_root() / "models" / model / "law1-fakequant"
    files, builds, shared = {}, {}, {}
    for arm, gauge in (("native", "native"), ("gauge", case.gauge)):
        files[arm], builds[arm] = fake_quantized_file(src, source_sha, names, case, gauge, folder, shared)
    tsha = text_sha256(text)
    threads = case.threads or (profile.engine_threads() if profile is not None else None)
    info = {"model": src.name, "role": case.role, "layers": layers, "bits": case.bits,
            "group": case.group, "gauge": case.gauge, "text": case.text, "text_sha256": tsha,
            "slice_chars": case.slice_chars, "first_slice": case.first_slice, "ctx": case.ctx,
            "chunks_per_slice": case.chunks, "threads": threads,
            "files": {arm: {k: v for k, v in b.items() if k != "tensors"} for arm, b in builds.items()},
            "tensors": {n: {"erank": builds["native"]["tensors"][n]["erank"],
                            "rel_mse_native": builds["native"]["tensors"][n]["rel_mse"],
                            "rel_mse_gauge": builds["gauge"]["tensors"][n]["rel_mse"]} for n in names}}
    workdir = cache_root() / "law1" / "slices" / f"{tsha[:12]}-{case.slice_chars}-from{case.first_slice}"
    llama = resources.llama()
    # one slice a round, both files scored on it: both arms walk the same slices in step
    arms = {arm: SliceVisits(llama, f, slices, workdir=workdir, ctx=case.ctx, chunks=case.chunks,
                             threads=threads, timeout_s=case.timeout_s) for arm, f in files.items()}
    return InterleavedSampler(arms, _ratio, raw=_round_raw, log_raw=("slice", "nll", "ppl"), protocol={
        "sampling_unit": "one disjoint slice of the shipped text, the native and the gauge file each "
                         "scored on it by one llama-perplexity process",
        "statistic": "perplexity ratio gauge/native on the slice, exp(nll_gauge - nll_native)", **info})
