"""The expert union of a verify batch: how many distinct experts a mixture-of-experts model reads
when it decodes B = K+1 tokens at once, as speculative verification does (seed 000: "verify-batches
union ~40 experts vs 8").

llama.cpp's tools print no router decision. lawbench's reader (expert_union.cpp) is a small
program built against the run's own llama.cpp build (its headers and libraries): it decodes a
text in batches of B tokens, every token asking for logits as a verify batch does, and an eval
callback (llama_context_params.cb_eval) reads each ``ffn_moe_topk-<layer>`` tensor — the router's
top-k selection — and counts the distinct ids per layer per batch. The engine's code is unchanged;
only the graph's own named tensors are read.

Built once per llama.cpp build and reader source (a cache key of both), with the C++ compiler on
PATH; compiling takes about a second. Run through run_process like every engine tool (a process
group, a timeout, its output kept), and its fault worded by process_fault.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from lawbench.core.engines.llamacpp import LlamaCpp
from lawbench.core.engines.tool_run import engine_error, log_tail, process_fault, run_process
from lawbench.core.errors import EngineError, NotApplicable
from lawbench.core.paths import cache_root

SOURCE = Path(__file__).with_name("expert_union.cpp")
BINARY = "lawbench-expert-union"
FORMAT = 1
NOT_MOE_EXIT = 3  # expert_union.cpp: no ffn_moe_topk tensor was computed
LIBS = ("llama", "ggml", "ggml-base")


class NotMixture(EngineError):
    """The model's graph selects no experts: it is not a mixture of experts (bad input, named by
    the caller with the anchor and field that chose the model)."""


@dataclass
class UnionRun:
    """One reader run: per verify batch, per MoE layer, the distinct experts its tokens selected."""

    model: str
    n_expert: int
    n_expert_used: int
    batch_tokens: int
    text_tokens: int
    layers: list[int]
    unions: list[list[int]]  # [batch][layer]
    wall_s: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict)

    def batch_means(self) -> list[float]:
        """Each batch's union, averaged over the layers: one reading per verify batch."""
        return [sum(u) / len(u) for u in self.unions]


def _headers(bin_dir: Path) -> list[Path]:
    """The include folders of llama.h and ggml.h for a build whose libraries are in ``bin_dir``:
    a lawbench build keeps its source beside the build (``<key>/src/llama.cpp``); a runner's own
    build usually sits inside its source tree (``<src>/build/bin``)."""
    tops = [bin_dir.parent.parent / "src" / "llama.cpp", bin_dir.parent.parent, bin_dir.parent.parent.parent]
    for top in tops:
        if (top / "include" / "llama.h").is_file() and (top / "ggml" / "include" / "ggml.h").is_file():
            return [top / "include", top / "ggml" / "include"]
    raise NotApplicable(f"the expert-union reader is built against the llama.cpp build's headers, and none "
                        f"was found for {bin_dir} (looked for include/llama.h and ggml/include/ggml.h in "
                        f"{', '.join(str(t) for t in tops)})")


def _key(bin_dir: Path) -> str:
    """The cache key: the reader's source and the build it links (its folder and libllama's stamp)."""
    lib = next(iter(sorted(bin_dir.glob("libllama.so*")) + sorted(bin_dir.glob("libllama.dylib"))), None)
    if lib is None:
        raise NotApplicable(f"the llama.cpp build at {bin_dir} has no shared libllama (the reader links it; "
                            "a static build cannot host it)")
    st = lib.stat()
    basis = SOURCE.read_bytes() + f"|{bin_dir.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    return hashlib.sha256(basis).hexdigest()[:16]


def build_reader(llama: LlamaCpp, cache: Path, timeout_s: float = 300) -> Path:
    """The reader for ``llama``'s build, compiled once into ``<cache>/expert-union/<key>/``.

    :raises NotApplicable: no C++ compiler, no headers or no shared libllama for the build.
    :raises EngineError: the compile failed (its command and the compiler's last words).
    """
    bin_dir = Path(llama.bin_dir)
    out = Path(cache) / "expert-union" / _key(bin_dir) / BINARY
    if out.is_file():
        return out
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise NotApplicable("the expert-union reader is compiled with a C++ compiler: g++ is not on PATH")
    includes = _headers(bin_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{BINARY}.{os.getpid()}.tmp")
    cmd = [cxx, "-O2", "-std=c++17", *(f"-I{d}" for d in includes), str(SOURCE), "-o", str(tmp),
           f"-L{bin_dir}", *(f"-l{lib}" for lib in LIBS), f"-Wl,-rpath,{bin_dir.resolve()}"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"building the expert-union reader failed: {exc}; command: {' '.join(cmd)}") from None
    if p.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise EngineError(f"building the expert-union reader failed (exit {p.returncode}): "
                          f"{(p.stderr or p.stdout).strip()[-600:]}; command: {' '.join(cmd)}")
    os.replace(tmp, out)
    return out


def reader_command(reader: Path, model: Path, text: Path, batch_tokens: int, threads: int,
                   n_gpu_layers: int = 0, max_batches: int = 0) -> list[str]:
    cmd = [str(reader), "-m", str(model), "-f", str(text), "-b", str(batch_tokens), "-t", str(threads),
           "-ngl", str(n_gpu_layers)]
    return cmd + (["--max-batches", str(max_batches)] if max_batches else [])


def parse_reader(stdout: str, where: str) -> UnionRun:
    """The reader's JSON (format 1) as a UnionRun; anything else is an EngineError naming ``where``."""
    try:
        doc = json.loads(stdout)
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, not {FORMAT}")
        batches = doc["batches"]
        layers = batches[0]["layers"] if batches else []
        unions = [[int(u) for u in b["union"]] for b in batches]
        if any(b["layers"] != layers for b in batches) or any(len(u) != len(layers) for u in unions):
            raise ValueError("the batches do not report the same layers")
        return UnionRun(model=str(doc["model"]), n_expert=int(doc["n_expert"]), n_expert_used=int(doc["n_expert_used"]),
                        batch_tokens=int(doc["batch_tokens"]), text_tokens=int(doc["text_tokens"]),
                        layers=[int(x) for x in layers], unions=unions,
                        raw={k: doc[k] for k in ("architecture", "batches_decoded", "topk_tensors") if k in doc})
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise EngineError(f"{where}: the expert-union reader printed no readable result ({exc}); "
                          f"output: {stdout.strip()[-300:]!r}") from None


def read_union(llama: LlamaCpp, model: Path, text: str, batch_tokens: int, *, threads: int = 1,
               n_gpu_layers: int = 0, max_batches: int = 0, timeout_s: float = 600,
               cache: Optional[Path] = None) -> UnionRun:
    """Decode ``text`` on ``model`` in verify batches of ``batch_tokens`` (K+1) and count, per
    batch and MoE layer, the distinct experts selected.

    :raises NotMixture: the model selects no experts (a dense model).
    :raises EngineError: the reader failed, timed out or printed no result (names the command).
    """
    reader = build_reader(llama, cache or cache_root())
    with tempfile.TemporaryDirectory(prefix="lawbench-union-") as tmp:
        text_file = Path(tmp) / "text.txt"
        text_file.write_text(text, encoding="utf-8")
        cmd = reader_command(reader, model, text_file, batch_tokens, threads, n_gpu_layers, max_batches)
        p = run_process(cmd, timeout_s)
    subject = f"model {model.name}"
    if p.returncode == NOT_MOE_EXIT and not (p.interrupted or p.timed_out):
        raise NotMixture(f"{model.name} selects no experts (llama.cpp computed no ffn_moe_topk tensor): "
                         f"it is not a mixture-of-experts model", log=log_tail(p.stderr))
    fault = process_fault(p, BINARY, subject, cmd, timeout_s)
    if fault:
        raise engine_error(p, fault, log=log_tail(p.stderr))
    run = parse_reader(p.stdout, f"{BINARY} on {subject}")
    run.wall_s = p.wall_s
    return run
