"""Law 1 (seed 000): incoherence rotation helps full-rank tensors and destroys low-rank bottlenecks.

predict.py holds the model (effective rank and bits -> the sign, and the rotated side's error
exactly); measure.py the tensor-level measurement on real GGUF tensors; fakequant.py writes a
fake-quantized GGUF and model_level.py scores it against the native-basis copy with the real
llama-perplexity (quantity "gauge/native perplexity ratio").

Anchors are `measurement` anchors with a half-open band on the gauge/native error ratio (the sign
the seed states) and `ratio` anchors (arm a's ratio over arm b's on the same tensors: the
ordering by effective rank).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lawbench import (
    ANCHOR_FILE,
    Anchor,
    DataError,
    HardwareProfile,
    Law,
    NotApplicable,
    Prediction,
    validation_error,
)
from lawbench.plugins.law1 import model_level, rank
from lawbench.plugins.law1.case import Law1Case, catalogue_id

QUANTITY = "gauge/native error ratio"


def anchor_cases(anchor: Anchor) -> dict[str, Law1Case]:
    """The case, or for a ratio anchor each arm laid over it; DataError names the field."""
    if anchor.kind not in ("measurement", "ratio"):
        raise DataError(ANCHOR_FILE, f"a law1 anchor is a measurement or a ratio, not {anchor.kind!r}",
                        anchor=anchor.id, field="kind")
    if anchor.kind == "measurement" and anchor.arms:
        raise DataError(ANCHOR_FILE, "only a ratio anchor has arms", anchor=anchor.id, field="arms")
    arms = anchor.arms if anchor.kind == "ratio" else {"main": {}}
    out: dict[str, Law1Case] = {}
    for arm, patch in arms.items():
        for key in ("layers", "seed", "model"):
            if key in patch:  # both arms must read the same tensors with the same rotations
                raise DataError(ANCHOR_FILE, f"an arm may not change {key!r}: both arms read the same "
                                             "tensors with the same seeds", anchor=anchor.id,
                                field=f"arms.{arm}.{key}")
        prefix = "case" if arm == "main" else f"arms.{arm}"
        try:
            out[arm] = Law1Case.model_validate({**anchor.case, **patch})
        except ValidationError as exc:
            raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix=prefix) from None
    case = next(iter(out.values()))
    catalogue_id(case.model, anchor.id)
    if anchor.budget.max_samples > len(case.layers):
        raise DataError(ANCHOR_FILE, f"max_samples {anchor.budget.max_samples} exceeds the "
                                     f"{len(case.layers)} layers listed (one sample per tensor)",
                        anchor=anchor.id, field="budget.max_samples")
    if anchor.quantity != QUANTITY:
        raise DataError(ANCHOR_FILE, f"quantity must be {QUANTITY!r} (tensor level), "
                        f"{model_level.QUANTITY!r} (model level) or {rank.QUANTITY!r} (the state variable)",
                        anchor=anchor.id, field="quantity")
    return out


class Law1(Law):
    name = "law1"
    title = "Incoherence rotation helps full-rank tensors and destroys low-rank bottlenecks"
    anchors_package = "lawbench.anchors.law1"
    case_model = Law1Case

    def check_anchor(self, anchor: Anchor) -> None:
        if anchor.quantity == model_level.QUANTITY:
            model_level.parse_case(anchor)
        elif anchor.quantity == rank.QUANTITY:
            rank.parse_case(anchor)
        else:
            anchor_cases(anchor)

    def predict(self, anchor: Anchor, profile: HardwareProfile, resources: Any = None) -> Prediction:
        # The sign needs the tensor's effective rank, which needs its data: measure() records
        # the forecast beside every sample (raw.forecast); a point prediction is not offered.
        raise NotApplicable("law1 forecasts per tensor from its effective rank (recorded with "
                            "every sample), not per anchor")

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Any:
        from lawbench.plugins.law1 import erank, measure  # numpy: not at the law's import

        if anchor.quantity == model_level.QUANTITY:
            return model_level.sampler(anchor, profile, resources)
        if anchor.quantity == rank.QUANTITY:
            return erank.sampler(anchor, resources)
        from lawbench.store import model_file

        cases = anchor_cases(anchor)
        ref = next(iter(cases.values())).model
        model, path = catalogue_id(ref, anchor.id), model_file(ref, resources)
        imatrix = None
        if measure.needs_imatrix(cases):
            if resources is None:
                raise NotApplicable("activations = 'imatrix' runs llama-imatrix: it needs the run's "
                                    "llama.cpp (resources)")
            imatrix = model_imatrix(model, Path(path), resources.llama(),
                                    profile.engine_threads() if profile is not None else None)
        return measure.TensorSampler(anchor, cases, str(path), imatrix)


def model_imatrix(model: str, path: Path, llama: Any, threads: Any) -> Any:
    """The model's real input activations (core.engines.imatrix, cached by content and settings)."""
    from lawbench.engines import cached_imatrix, shipped_text
    from lawbench.store import load_catalog, sha256_of
    from lawbench.plugins.law1.measure import IMATRIX_CHUNKS, IMATRIX_CTX

    # The store verified the file against the catalogue's sha256; a runner's own file is hashed.
    sha = getattr(load_catalog().get(model), "sha256", None) or sha256_of(path)
    return cached_imatrix(llama, path, sha, shipped_text(), ctx=IMATRIX_CTX, chunks=IMATRIX_CHUNKS,
                          threads=threads)
