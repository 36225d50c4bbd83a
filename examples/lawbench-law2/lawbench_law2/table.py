"""`lawbench rd-table`: the rate-distortion table — bits, rel-MSE per codec, the Gaussian floor.

For each catalogue model and each ggml codec: the median rel-MSE over the model's FFN down
projections (the same tensors and rows the anchors read), the same codec on i.i.d. Gaussian rows
of the same shape (what the codec does on the law's ideal source), and D(R) = 2^(-2R) at the
codec's stored rate.
"""
from __future__ import annotations

import argparse
import statistics
import time

import lawbench
from lawbench_law2.case import FFN_DOWN
from lawbench_law2.theory import bits_per_weight, gaussian_floor

# The ggml types nearest 1, 2, 3 and 4 bits per weight, and Q8_0 as a check of the pipeline.
CODECS = ("Q1_0", "IQ1_S", "TQ1_0", "IQ1_M", "IQ2_XXS", "TQ2_0", "IQ2_XS", "IQ2_S", "Q2_K",
          "IQ3_XXS", "Q3_K", "IQ3_S", "IQ4_XS", "Q4_0", "Q4_K", "Q8_0")
# Sources clean enough to re-quantize: Gemma's Q6_K half of its ffn_down; SmolLM2's are all Q4_1
# (so its rows at >= 4 bits measure the overlap of two 4-bit grids and are marked).
MODELS = {"smollm2-135m-q4_1": (), "gemma3-270m-q4_k_m": ("Q6_K",)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", choices=sorted(MODELS),
                        help="catalogue model (repeatable; default: both)")
    parser.add_argument("--codec", action="append", help=f"ggml type (repeatable; default: {' '.join(CODECS)})")
    parser.add_argument("--tensors", type=lawbench.whole_number(1), default=3,
                        help="FFN down projections per model, spread over depth (default 3)")
    parser.add_argument("--rows", type=lawbench.whole_number(1), default=64,
                        help="rows read per tensor, evenly spaced (default 64)")


def run(args: argparse.Namespace) -> int:
    # numpy and gguf are imported by the command that reads tensors, not by every `lawbench` that lists it
    import numpy as np

    from lawbench_law2 import tensors
    from lawbench_law2.codecs import Ggml
    from lawbench_law2.sampler import rel_mse
    from lawbench_law2.theory import codec_type

    codecs = args.codec or list(CODECS)
    for name in codecs:
        try:
            codec_type(name)
        except ValueError as exc:
            raise lawbench.UsageError(f"--codec: {exc}") from None
    resources = lawbench.Resources()
    try:
        ggml = Ggml(resources.llama().bin_dir)
        sources = {}
        for model in args.model or list(MODELS):
            path = resources.model(model)
            picked = tensors.select(path, FFN_DOWN, MODELS[model])[: args.tensors]
            sources[model] = [tensors.read_rows(path, info, args.rows) for info in picked]
    finally:
        resources.close()
    print(f"ggml: {ggml.path}")
    for model, rows in sources.items():
        print(f"{model}: {', '.join(f'{t.name} ({t.stored_as})' for t in rows)}; {args.rows} rows each")
    head = ["codec", "bits/weight", "D(R)=2^-2R"] + [f"{m} rel-MSE" for m in sources] + ["gaussian rel-MSE", "s"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    rng = np.random.default_rng(0)
    for codec in codecs:
        t0 = time.monotonic()
        rate = bits_per_weight(codec)
        cells = [codec, f"{rate:.4g}", f"{gaussian_floor(rate):.4g}"]
        shape = None
        for model, rows in sources.items():
            got = [rel_mse(t.rows, ggml.roundtrip(t.rows, codec)) for t in rows]
            shape = rows[0].rows.shape
            mark = " *" if rate >= 4 and any(t.stored_as == "Q4_1" for t in rows) else ""
            cells.append(f"{statistics.median(got):.4g} ({min(got):.4g}-{max(got):.4g}){mark}")
        gauss = rng.standard_normal(shape or (args.rows, 2048)).astype(np.float32)
        cells.append(f"{rel_mse(gauss, ggml.roundtrip(gauss, codec)):.4g}")
        cells.append(f"{time.monotonic() - t0:.1f}")
        print("| " + " | ".join(cells) + " |", flush=True)
    print("rel-MSE: median (min-max) over the tensors; * the source is stored at Q4_1, so the codec "
          "re-quantizes a 4-bit grid")
    return 0


class RdTable(lawbench.Command):
    def __init__(self) -> None:
        super().__init__(name="rd-table", help="law2: rel-MSE of ggml's codecs on real FFN tensors against D(R)",
                         add_arguments=add_arguments, run=run)
