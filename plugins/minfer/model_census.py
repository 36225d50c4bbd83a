"""The q6_K tensors of the model file the engine loads, counted from its GGUF header.

Seed 002: "On 7B q4_k_m the tensors that go through q6_K are 14 attn_v + 14 ffn_down +
output.weight" — the set the W_exp plane is built for. The seed names no file, so a runner points
LAWBENCH_MINFER_MODEL at the GGUF its engine command loads; only the header is read (a partial
download will do), with lawbench's header scanner.

Labels are the seed's names: a per-layer tensor by its role ("blk.5.attn_v.weight" -> "attn_v"),
any other by its full name ("output.weight"); TOTAL counts every q6_K tensor, so a census can say
"these and nothing else".
"""
from __future__ import annotations

import os
import re
from typing import Mapping

from lawbench import NotApplicable

Q6_K = "Q6_K"
TOTAL = "q6_K tensors"
_LAYER = re.compile(r"^blk\.\d+\.(?P<role>.+?)(?:\.weight)?$")


def role(tensor_name: str) -> str:
    m = _LAYER.match(tensor_name)
    return m.group("role") if m else tensor_name


def count_q6k(tensors) -> dict[str, int]:
    counts = {TOTAL: 0}
    for t in tensors:
        if t.type_name == Q6_K:
            counts[TOTAL] += 1
            counts[role(t.name)] = counts.get(role(t.name), 0) + 1
    return counts


def model_path(model_env: str, environ: Mapping[str, str] = os.environ) -> str:
    path = environ.get(model_env, "").strip()
    if not path:
        raise NotApplicable(f"the model file the engine loads is not named: set {model_env} to its GGUF path")
    if not os.path.isfile(path):
        raise NotApplicable(f"{model_env} names {path!r}, which is not a file here")
    return path


def q6k_census(model_env: str) -> tuple[dict[str, int], dict]:
    """({label: count}, environment) for the file named by ``model_env``; a header fault is a DataError."""
    path = model_path(model_env)
    from lawbench import read_gguf_header  # on first use: gguf (and numpy) are not loaded with the law

    header = read_gguf_header(path)
    return count_q6k(header.tensors), {"model_file": path, "architecture": header.architecture,
                                       "block_count": header.arch("block_count", None),
                                       "tensors": len(header.tensors), "complete": header.complete}
