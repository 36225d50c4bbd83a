"""The real input activations of every weight tensor, measured by llama.cpp's own ``llama-imatrix``.

For each weight tensor W (rows = outputs, cols = inputs) llama-imatrix runs the model over a text
and accumulates, per input column j, the sum of x_j^2 over every token that reached W, and the
number of those tokens. Their quotient is the diagonal of the real input second moment E[x x^T]:
what weighting a weight error by its effect on the tensor's outputs needs (Law 1's output error).

Public surface:

    parse_imatrix(path) -> dict[str, ImatrixEntry]
        The GGUF-format imatrix b11434 writes: per weight tensor ``<name>.in_sum2`` (F32, one row per
        expert, ne0 = the tensor's input width) and ``<name>.counts`` (tokens per expert). Returns
        {tensor name: ImatrixEntry(mean_sq, tokens)}; a tensor no token reached is left out.
    run_imatrix(llama, model, text, out, *, ctx, chunks, threads, timeout_s) -> float
        One llama-imatrix process (own process group, killed at timeout_s); returns its wall time.
    cached_imatrix(llama, model, model_sha, text, *, ctx, chunks, threads, timeout_s) -> Imatrix
        The same, once per model content x text content x settings x engine build: kept under
        <cache>/models/imatrix/ and read back without running the tool again.

The text is scored from its start in ``chunks`` chunks of ``ctx`` tokens (--no-ppl: only the
statistics are collected). Faults are one-line EngineErrors naming the model, text and command.
"""
from __future__ import annotations

import json
import os
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from lawbench.core.engines.tool_run import engine_error, log_tail, process_fault, run_process
from lawbench.core.errors import EngineError

if TYPE_CHECKING:
    from lawbench.core.engines.llamacpp import LlamaCpp

TOOL = "llama-imatrix"
SUM2, COUNTS = ".in_sum2", ".counts"


@dataclass
class ImatrixEntry:
    mean_sq: np.ndarray  # per input column: mean of x_j^2 over the tokens (shape (cols,) or (experts, cols))
    tokens: int  # tokens that reached the tensor (the largest expert count for a MoE tensor)


@dataclass
class Imatrix:
    """A model's importance matrix (llama-imatrix's per-tensor activation statistics) and how it was made."""

    entries: dict[str, ImatrixEntry]
    settings: dict[str, Any]  # model, text, their sha256, ctx, chunks, engine build, threads
    wall_s: float  # the tool's run when it was measured (0 for nothing run now: see cached)
    cached: bool = False
    path: Optional[Path] = field(default=None)

    def second_moment(self, tensor: str) -> np.ndarray:
        """diag E[x x^T] of ``tensor``'s real inputs; EngineError when the run did not reach it."""
        e = self.entries.get(tensor)
        if e is None:
            raise EngineError(f"the imatrix of {self.settings.get('model')} ({self.path}) has no "
                              f"activations for {tensor}")
        return e.mean_sq


def parse_imatrix(path: os.PathLike | str) -> dict[str, ImatrixEntry]:
    """Read a GGUF imatrix file; EngineError (naming the file) when it is not one."""
    from gguf import GGUFReader

    path = Path(path)
    try:
        reader = GGUFReader(path)
    except Exception as exc:  # noqa: BLE001 - gguf raises ValueError, struct errors, OSError ...
        raise EngineError(f"{path}: not a readable GGUF imatrix ({exc})") from None
    kind = reader.fields.get("general.type")
    if kind is None or kind.contents() != "imatrix":
        raise EngineError(f"{path}: general.type is {kind.contents() if kind else None!r}, not 'imatrix' "
                          f"(a legacy .dat imatrix, or not an imatrix at all)")
    tensors = {t.name: t for t in reader.tensors}
    out: dict[str, ImatrixEntry] = {}
    for name, t in tensors.items():
        if not name.endswith(SUM2):
            continue
        weight = name[: -len(SUM2)]
        c = tensors.get(weight + COUNTS)
        if c is None:
            raise EngineError(f"{path}: {name} has no {weight + COUNTS} beside it")
        sums = np.asarray(t.data, dtype=np.float64)
        counts = np.asarray(c.data, dtype=np.float64).ravel()
        sums = sums.reshape(counts.size, -1)  # one row per expert (one row for a dense tensor)
        if not (counts > 0).any():
            continue  # no token reached it: nothing measured, nothing to return
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sums / counts[:, None]
        out[weight] = ImatrixEntry(mean[0] if counts.size == 1 else mean, int(counts.max()))
    if not out:
        raise EngineError(f"{path}: no '<tensor>{SUM2}' entries with a token count")
    return out


def imatrix_command(llama: "LlamaCpp", model: Path, text: Path, out: Path, *, ctx: int, chunks: int,
                    threads: Optional[int]) -> list[str]:
    # -b ctx: one sequence per pass, as perplexity.py does; --no-ppl: statistics only, no scoring;
    # -ofreq past the last chunk: the file is written once, at the end.
    cmd = [str(llama.bin_dir / TOOL), "-m", str(model), "-f", str(text), "-o", str(out),
           "-c", str(ctx), "-b", str(ctx), "--chunks", str(chunks), "--no-ppl",
           "--output-format", "gguf", "-ofreq", str(chunks + 1)]
    if threads is not None:
        cmd += ["-t", str(threads)]
    return cmd


def run_imatrix(llama: "LlamaCpp", model: os.PathLike | str, text: os.PathLike | str,
                out: os.PathLike | str, *, ctx: int = 128, chunks: int = 16,
                threads: Optional[int] = None, timeout_s: float = 300) -> float:
    """Run llama-imatrix once, writing ``out``; returns the wall seconds.

    :raises EngineError: tool, model or text missing, non-zero exit, signal, timeout, or a text
        too short for ``chunks`` chunks of ``ctx`` tokens.
    """
    model, text, out = Path(model), Path(text), Path(out)
    from lawbench.core.engines.tools import require_tool

    require_tool(llama, TOOL)  # compiled into a lawbench build the first time a run needs it
    if not model.is_file():
        raise EngineError(f"model file {model} does not exist")
    if not text.is_file():
        raise EngineError(f"text file {text} does not exist ({TOOL} on model {model.name})")
    cmd = imatrix_command(llama, model, text, out, ctx=ctx, chunks=chunks, threads=threads)
    p = run_process(cmd, timeout_s)
    fault = process_fault(p, TOOL, f"model {model.name}, text {text.name}", cmd, timeout_s)
    if fault is None and not out.is_file():
        fault = f"{TOOL} on model {model.name} wrote no {out.name}; command: {shlex.join(cmd)}"
    if fault:
        raise engine_error(p, fault, log=log_tail(p.stderr))
    from gguf import GGUFReader

    done = GGUFReader(out).fields.get("imatrix.chunk_count")
    got = int(done.contents()) if done is not None else None
    if got != chunks:
        raise EngineError(f"{TOOL} on model {model.name} processed {got} chunks, not the {chunks} asked "
                          f"for: text {text.name} is too short for ctx {ctx}; command: {shlex.join(cmd)}",
                          log=log_tail(p.stderr))
    return p.wall_s


def cache_dir() -> Path:
    from lawbench.core.paths import cache_root

    return cache_root() / "models" / "imatrix"


def cached_imatrix(llama: "LlamaCpp", model: os.PathLike | str, model_sha: str, text: os.PathLike | str,
                   *, ctx: int = 128, chunks: int = 16, threads: Optional[int] = None,
                   timeout_s: float = 300, folder: Optional[Path] = None) -> Imatrix:
    """The model's imatrix on ``text``, measured once per model sha x text sha x ctx x chunks x
    engine build (the activations are the engine's arithmetic) and kept with a JSON record."""
    from lawbench.core.engines.perplexity import text_sha256

    model, text = Path(model), Path(text)
    tsha = text_sha256(text)
    build = llama.build_info.get("build_number")
    folder = folder or cache_dir()
    key = f"{model_sha[:16]}-{tsha[:12]}-c{ctx}-n{chunks}-b{build}"
    target, record_file = folder / f"{key}.imatrix.gguf", folder / f"{key}.json"
    if target.is_file() and record_file.is_file():
        settings = json.loads(record_file.read_text(encoding="utf-8"))
        return Imatrix(parse_imatrix(target), settings, 0.0, cached=True, path=target)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".imatrix-") as tmp:
        out = Path(tmp) / target.name
        wall = run_imatrix(llama, model, text, out, ctx=ctx, chunks=chunks, threads=threads,
                           timeout_s=timeout_s)
        entries = parse_imatrix(out)
        settings = {"tool": TOOL, "model": model.name, "model_sha256": model_sha, "text": text.name,
                    "text_sha256": tsha, "ctx": ctx, "chunks": chunks, "tokens": ctx * chunks,
                    "engine_build": build, "threads": threads, "wall_s": round(wall, 2),
                    "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
        os.replace(out, target)  # the data first: a record never names a file that is not there
        tmp_rec = Path(tmp) / record_file.name
        tmp_rec.write_text(json.dumps(settings, indent=2), encoding="utf-8")
        os.replace(tmp_rec, record_file)
    return Imatrix(entries, settings, wall, cached=False, path=target)
