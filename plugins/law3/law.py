"""Law 3 — depth fragility (seed 000): the same bits hurt more at some depths than at others.

A Law 3 anchor compares two depth recipes of one real model (lawbench.plugins.law3.recipe): each
requantizes some layers to a low-bit type and leaves the rest as shipped. Both are scored by the
real llama-perplexity on the same disjoint slices of the shipped text, one slice per round, so a
sample is a paired per-slice comparison (lawbench.core.engines.perplexity says why that gives an
honest interval):

  ratio anchor, statistic "ppl_ratio"     perplexity of recipe a over recipe b on one slice;
  ratio anchor, statistic "damage_ratio"  a's log-perplexity damage over b's, both against the
                                          unmodified source file scored on the same slice.

The two agreement checks of the law run here as ratio anchors: "the profile is non-uniform beyond
its noise" is a band of depth against another, band lo = 1 (the interval must clear 1); "the
depth-aware recipe beats a uniform one at equal bytes" is the uniform recipe over the depth-aware
one, at byte-identical file sizes (case.bytes = "equal"). The law makes no prediction of *which*
depth is fragile: the seed's point is that nothing static predicts it and the probe measures it.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from lawbench import (
    ANCHOR_FILE,
    Anchor,
    DataError,
    HardwareProfile,
    InterleavedSampler,
    Law,
    LawbenchError,
    NotApplicable,
    Sampler,
    Visit,
)
from lawbench.engines import SliceVisits, resolve_text, text_label, text_sha256, text_slices
from lawbench.plugins.law3.case import Law3Case, Recipe, parse_case

MAX_SLICES = 64  # more slices than any budget asks for; each is scored once at most


def _workdir() -> Path:
    from lawbench.store import cache_root

    return cache_root() / "law3"


def _round_value(statistic: str):
    """One round's sample from the nll each arm scored on the round's slice: recipe a over recipe b
    (ppl_ratio), or a's damage over b's, both against the unmodified source (damage_ratio)."""
    def value(visits: dict[str, Visit]) -> float:
        nll = {arm: v.raw["nll"] for arm, v in visits.items()}
        if statistic == "ppl_ratio":
            return math.exp(nll["a"] - nll["b"])
        da, db = nll["a"] - nll["src"], nll["b"] - nll["src"]
        return da / db if db else math.inf  # a non-finite statistic is an ERROR, never dropped
    return value


def _round_raw(visits: dict[str, Visit]) -> dict[str, Any]:
    return {"slice": visits["a"].raw["slice"], "nll": {arm: v.raw["nll"] for arm, v in visits.items()}}


class Law3(Law):
    name = "law3"
    title = "Law 3: depth fragility — where a model breaks at low bits is measured, not predicted"
    anchors_package = "lawbench.anchors.law3"
    case_model = Law3Case

    def check_anchor(self, anchor: Anchor) -> None:
        parse_case(anchor)

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Sampler:
        from lawbench import read_gguf_header as read_header
        from lawbench.plugins.law3.recipe import build_recipe
        from lawbench.store import model_file

        case, arms = parse_case(anchor)
        src = model_file(case.model, resources)
        layers = read_header(src).arch("block_count")
        for name, recipe in arms.items():
            beyond = [n for n in recipe.layers if n >= layers]
            if beyond:
                raise DataError(ANCHOR_FILE, f"layers {beyond} do not exist: {src.name} has {layers} "
                                f"(blk.0 to blk.{layers - 1})", anchor=anchor.id, field=f"arms.{name}.layers")
        try:
            text = resolve_text(case.text)
        except (NotApplicable, EngineError):
            raise
        except LawbenchError as exc:
            raise DataError(ANCHOR_FILE, str(exc), anchor=anchor.id, field="case.text") from None
        llama = resources.llama()
        threads = case.threads or profile.engine_threads()
        files = {name: build_recipe(llama, src, r.layers, case.low_type, _workdir() / "recipes",
                                    timeout_s=case.timeout_s, threads=threads)
                 for name, r in arms.items()}
        if case.statistic == "damage_ratio":
            files["src"] = src
        sizes = {name: Path(f).stat().st_size for name, f in files.items()}
        if case.bytes == "equal" and sizes["a"] != sizes["b"]:
            raise DataError(ANCHOR_FILE, f"bytes = \"equal\", but recipe a's file is {sizes['a']} B and "
                            f"b's {sizes['b']} B: choose layers whose source tensors have the same types",
                            anchor=anchor.id, field="arms")
        slices = text_slices(text, case.first_slice + MAX_SLICES, case.slice_chars)[case.first_slice:]
        if len(slices) < anchor.budget.max_samples:
            raise DataError(ANCHOR_FILE, f"text {text_label(case.text)} gives {len(slices)} slices of "
                            f"{case.slice_chars} characters from slice {case.first_slice} on, fewer than "
                            f"budget.max_samples {anchor.budget.max_samples}", anchor=anchor.id,
                            field="budget.max_samples")
        info = {"model": src.name, "low_type": case.low_type, "text": text_label(case.text),
                "text_sha256": text_sha256(text), "slice_chars": case.slice_chars,
                "first_slice": case.first_slice, "ctx": case.ctx,
                "chunks_per_slice": case.chunks, "threads": threads,
                "recipes": {n: {"layers": r.layers, "label": r.label, "file": Path(files[n]).name,
                                "bytes": sizes[n]} for n, r in arms.items()},
                "source_bytes": src.stat().st_size}
        # slice files are named by their index in `slices`: the folder names what that index counts from
        work = _workdir() / "slices" / f"{info['text_sha256'][:12]}-{case.slice_chars}-from{case.first_slice}"
        visits = {name: SliceVisits(llama, f, slices, workdir=work, ctx=case.ctx, chunks=case.chunks,
                                    threads=threads, timeout_s=case.timeout_s) for name, f in files.items()}
        # per round one slice, every arm's file scored on it (order rotated), one sample
        return InterleavedSampler(visits, _round_value(case.statistic), arm="a/b", raw=_round_raw,
                                  log_raw=("slice", "nll"), protocol={
            "sampling_unit": "one disjoint slice of the shipped text, every arm scored on it "
                             "(one llama-perplexity process per arm)",
            "statistic": case.statistic, **info})

    def predict(self, anchor: Anchor, profile: HardwareProfile, resources: Any = None):
        raise NotApplicable(f"law 'law3' makes no prediction for anchor {anchor.id!r}: where a model "
                            "is fragile is measured by the probe, not predicted (seed 000)")


__all__ = ["Law3", "Recipe"]
