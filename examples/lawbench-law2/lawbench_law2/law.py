"""Law 2 of seed 000: quantized weights sit at the Gaussian rate-distortion floor.

predict(): rel-MSE = 2^(-2R) at the case's rate (lawbench_law2.theory states the assumptions).
sampler(): one sample per real tensor — the codec's rel-MSE on it (or its coding gain over the same
weights shuffled); on a routed-expert model one sample per layer's expert tensor, its worst expert
(lawbench_law2.experts), so "identical across all 64" is judged on every expert; or a header read.
"""
from __future__ import annotations

from typing import Any

import lawbench
from lawbench.store import check_model_ref, model_file
from lawbench_law2.case import FFN_DOWN, Law2Case
from lawbench_law2.theory import bits_per_weight, gaussian_floor


# The measures that quantize real tensors with case.codec.
QUANTIZING = ("rel-mse", "rel-mse-vs-gaussian", "coding-gain", "expert-rel-mse-vs-gaussian")


class RateDistortion(lawbench.Law):
    name = "law2"
    title = "Law 2 (seed 000): quantized weights at the Gaussian rate-distortion floor"
    anchors_package = "lawbench_law2.anchors"
    case_model = Law2Case

    def check_anchor(self, anchor: lawbench.Anchor) -> None:
        case = self.case(anchor)
        if case.measure in QUANTIZING and anchor.kind != "prediction" and case.codec is None:
            raise lawbench.DataError(lawbench.ANCHOR_FILE, f"case.measure = {case.measure!r} quantizes "
                                     "real tensors: name the ggml type in case.codec", anchor=anchor.id,
                                     field="case.codec")
        if case.measure == "expert-rel-mse-vs-gaussian" and case.tensors == FFN_DOWN:
            raise lawbench.DataError(lawbench.ANCHOR_FILE, "an expert census reads 3-D expert tensors: "
                                     "name them in case.tensors (e.g. 'blk\\.\\d+\\.ffn_(gate|up)_exps\\.weight')",
                                     anchor=anchor.id, field="case.tensors")
        if case.measure == "bits-per-weight-ratio":
            self._check_ratio(anchor, case)
        elif anchor.kind == "prediction" and case.codec is None and case.rate_bits is None:
            raise lawbench.DataError(lawbench.ANCHOR_FILE, "a prediction needs a rate: case.rate_bits "
                                     "or case.codec", anchor=anchor.id, field="case.rate_bits")
        if anchor.kind in ("measurement", "agreement") and case.model is None:
            raise lawbench.DataError(lawbench.ANCHOR_FILE, "a measurement needs case.model "
                                     "('gguf:<catalogue id>')", anchor=anchor.id, field="case.model")
        for field, model in (("case.model", case.model), ("case.over_model", case.over_model)):
            if model is None:
                continue
            try:
                if check_model_ref(model).kind == "manifest":  # or a gguf: id not in the catalogue
                    raise ValueError(f"model {model!r} is a manifest: law2 reads real tensors and headers, "
                                     "name a gguf:<catalogue id> or path:<file> model")
            except ValueError as exc:
                raise lawbench.DataError(lawbench.ANCHOR_FILE, str(exc), anchor=anchor.id,
                                         field=field) from None
        if anchor.kind == "agreement" and case.measure != "rel-mse":
            raise lawbench.DataError(lawbench.ANCHOR_FILE, "only case.measure = 'rel-mse' has a "
                                     "prediction to agree with", anchor=anchor.id, field="case.measure")

    @staticmethod
    def _check_ratio(anchor: lawbench.Anchor, case: Law2Case) -> None:
        if anchor.kind == "prediction":
            for field in ("rate_bits", "over_rate_bits"):
                if getattr(case, field) is None:
                    raise lawbench.DataError(lawbench.ANCHOR_FILE, "a predicted ratio of bits per weight "
                                             "needs both published rates: case.rate_bits over "
                                             "case.over_rate_bits", anchor=anchor.id, field=f"case.{field}")
        elif case.over_model is None:
            raise lawbench.DataError(lawbench.ANCHOR_FILE, "a measured ratio of bits per weight reads two "
                                     "files: case.model over case.over_model", anchor=anchor.id,
                                     field="case.over_model")

    def predict(self, anchor: lawbench.Anchor, profile: lawbench.HardwareProfile,
                resources: Any = None) -> lawbench.Prediction:
        case = self.case(anchor)
        if case.measure == "bits-per-weight-ratio" and case.rate_bits is not None and case.over_rate_bits:
            return lawbench.Prediction(case.rate_bits / case.over_rate_bits, {
                "rate_bits": case.rate_bits, "over_rate_bits": case.over_rate_bits,
                "source": "the ratio of two published rates: case.rate_bits / case.over_rate_bits"})
        if case.measure != "rel-mse":
            raise lawbench.NotApplicable(f"law2 predicts rel-MSE and a ratio of published rates only, "
                                         f"not {case.measure!r}")
        rate = case.rate_bits if case.rate_bits is not None else bits_per_weight(case.codec)
        detail = {"rate_bits": rate, "rate_from": "case.rate_bits" if case.rate_bits is not None
                  else f"{case.codec} stores {rate:g} bits per weight, scales included",
                  "source": "memoryless Gaussian, squared error: D(R)/sigma^2 = 2^(-2R)"}
        return lawbench.Prediction(gaussian_floor(rate), detail)

    def sampler(self, anchor: lawbench.Anchor, profile: lawbench.HardwareProfile, resources: Any):
        case = self.case(anchor)
        if resources is None:
            raise lawbench.NotApplicable("law2 measures real model files: it needs a run's resources")
        # the verified file, fetched once into the cache; NotApplicable where a runner's own file is
        # absent (a SKIP, a FAIL on its runner)
        path = model_file(case.model, resources)
        # numpy and gguf come with the sampler, not with the law: every `lawbench` command loads the law
        from lawbench_law2.sampler import HeaderReading, TensorSampler

        if case.measure in ("bits-per-weight", "file-gb"):
            return HeaderReading(path, case.measure)
        if case.measure == "bits-per-weight-ratio":
            return HeaderReading(path, case.measure, over=model_file(case.over_model, resources))
        from lawbench_law2.codecs import Ggml

        if case.measure == "expert-rel-mse-vs-gaussian":
            from lawbench_law2.experts import ExpertCensus

            return ExpertCensus(path, case, Ggml(resources.llama().bin_dir))

        return TensorSampler(path, case, Ggml(resources.llama().bin_dir))
