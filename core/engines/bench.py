"""Run llama.cpp's tools: llama-bench (JSON only, never scraped text), llama-quantize, load logs.

llama-bench is run with ``-o jsonl`` when the build supports it: it prints and flushes one JSON
record per finished test, so a run killed at its timeout still keeps every finished test. Older
builds fall back to ``-o json``, whose records are also flushed one by one and are salvaged from a
cut-off array. Every fault (tool missing, non-zero exit, killed by a signal, hang past the timeout)
is an EngineError with a one-line message naming the model and the command; the log tail rides in
``EngineError.log`` and the finished records in ``EngineError.samples`` / ``EngineError.run``.
When lawbench itself is stopped (SIGINT, or SIGTERM through its handler) the tool's process group is
ended and waited for, and the error is an EngineInterrupted that keeps the finished records too.
A record whose tokens/s is missing, zero, negative or not finite is an engine fault too: it is never
handed to a law as a sample.

The model-load log (census source): llama-bench silences llama.cpp's log unless ``-v`` is given;
with ``-v`` it prints the load log ("offloaded N/M layers to GPU" on GPU builds, "<buffer> model
buffer size = X MiB") and, after every test, ``llama_perf_context_print``'s "graphs reused = N".
``capture_load_log`` runs exactly that; see lawbench.core.engines.loadlog for the parser.
"""
from __future__ import annotations

import functools
import json
import math
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

# Running a tool and wording its fault: tool_run.py, which the other tools' modules import too.
from lawbench.core.engines.tool_run import _reason, engine_error, log_tail, process_fault, run_process
from lawbench.core.errors import EngineError
from lawbench.core.models import Sample

if TYPE_CHECKING:  # annotations only
    from lawbench.core.engines.llamacpp import LlamaCpp

Value = Union[int, str, Sequence[Union[int, str]]]


@dataclass
class BenchRun:
    """One llama-bench invocation: its JSON records and what else it left behind."""

    records: list[dict[str, Any]]
    samples_ts: list[list[float]]  # per record: tokens/s of every repetition
    cmd: list[str]
    wall_s: float
    stderr_tail: str
    returncode: Optional[int]
    log: str = ""  # the whole stderr; with verbose=True this is llama.cpp's load log

    def samples(self) -> list[Sample]:
        """Every repetition as a lawbench Sample, labelled with its test (pp512, tg128@d4096)."""
        out = []
        for rec, ts in zip(self.records, self.samples_ts):
            test = record_label(rec)
            out += [Sample(value=v, raw={"test": test, "rep": i, "model": rec.get("model_filename")})
                    for i, v in enumerate(ts)]
        return out


def record_label(record: dict[str, Any]) -> str:
    """llama-bench's own test labels: pp<n>, tg<n>, pp<n>+tg<n>, with @d<depth> when deep."""
    p, g, d = (int(record.get(k, 0) or 0) for k in ("n_prompt", "n_gen", "n_depth"))
    name = "+".join(x for x in (f"pp{p}" if p else "", f"tg{g}" if g else "") if x) or "none"
    return f"{name}@d{d}" if d else name


def record_speeds(record: dict[str, Any]) -> list[float]:
    """Every repetition's tokens/s of one llama-bench record (``samples_ts``).

    :raises EngineError: naming the test, the field and the value, when ``samples_ts`` is missing
        or empty, or it or ``avg_ts`` holds a value that is not a finite number above 0.
    """
    test = record_label(record)
    values = record.get("samples_ts")
    if not isinstance(values, list) or not values:
        raise EngineError(f"llama-bench reported no tokens/s for test {test} (samples_ts = {values!r}): "
                          f"an engine fault, not a sample")
    fields = [("samples_ts", v) for v in values]
    if "avg_ts" in record:
        fields.append(("avg_ts", record["avg_ts"]))
    for name, v in fields:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        if not ok:
            raise EngineError(f"llama-bench reported {name} = {v!r} for test {test}: tokens/s must be "
                              f"a finite number above 0 (an engine fault, not a sample)")
        if not TOK_S_MIN <= v <= TOK_S_MAX:
            raise EngineError(f"llama-bench reported {name} = {v!r} for test {test}: no machine runs "
                              f"between {TOK_S_MIN:g} and {TOK_S_MAX:g} tok/s outside that range (an engine "
                              "fault, not a sample)")
    return [float(v) for v in values]


# What a machine can do: a token in under 12 days, and fewer than 10**9 a second (an H200 runs a
# tiny model's prompt at about 10**5). A figure outside is a broken engine or timer, never a FAIL.
TOK_S_MIN, TOK_S_MAX = 1e-6, 1e9


# --------------------------------------------------------------------------- what this build takes


@functools.lru_cache(maxsize=16)
def _help(tool: str, mtime: float) -> str:
    try:
        proc = subprocess.run([tool, "--help"], capture_output=True, text=True, encoding="utf-8", timeout=30,
                              errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


def bench_help(llama: LlamaCpp) -> str:
    tool = Path(llama.llama_bench)
    try:
        return _help(str(tool), tool.stat().st_mtime)
    except OSError:
        return ""


def supports(llama: LlamaCpp, flag: str) -> bool:
    """Whether this llama-bench lists ``flag`` (e.g. "jsonl", "--n-cpu-moe", "--no-warmup")."""
    return flag in bench_help(llama)


def _join(v: Value) -> str:
    if isinstance(v, (str, int, float)):
        return str(v)
    return ",".join(str(x) for x in v)


def _fa(v: Union[bool, str, Sequence], new_style: bool) -> str:
    def one(x):
        if isinstance(x, bool):
            return ("on" if x else "off") if new_style else str(int(x))
        return str(x)
    return ",".join(one(x) for x in v) if isinstance(v, (list, tuple)) else one(v)


def bench_command(llama: LlamaCpp, model: Path, *, n_prompt: Value = 0, n_gen: Value = 32,
                  depth: Optional[Value] = None, n_gpu_layers: Optional[Value] = None,
                  flash_attn: Optional[Union[bool, str, Sequence]] = None,
                  cache_type_k: Optional[Value] = None, cache_type_v: Optional[Value] = None,
                  ubatch: Optional[Value] = None, threads: Optional[Value] = None,
                  n_cpu_moe: Optional[Value] = None, override_tensor: Optional[str] = None,
                  repetitions: int = 3, warmup: bool = True, verbose: bool = False,
                  extra_args: Sequence[str] = ()) -> list[str]:
    """The llama-bench command line; refuses options this build does not have."""
    fmt = "jsonl" if supports(llama, "jsonl") else "json"
    cmd = [str(llama.llama_bench), "-m", str(model), "-o", fmt, "-p", _join(n_prompt),
           "-n", _join(n_gen), "-r", str(repetitions)]
    optional = [("-d", "--n-depth", depth), ("-ngl", "--n-gpu-layers", n_gpu_layers),
                ("-ctk", "--cache-type-k", cache_type_k), ("-ctv", "--cache-type-v", cache_type_v),
                ("-ub", "--ubatch-size", ubatch), ("-t", "--threads", threads),
                ("-ncmoe", "--n-cpu-moe", n_cpu_moe), ("-ot", "--override-tensor", override_tensor)]
    for short, long, value in optional:
        if value is None:
            continue
        if not supports(llama, long):
            raise EngineError(f"llama-bench {llama.version} at {llama.bin_dir} has no {long} option "
                              f"(asked for {long} {_join(value)}); use a newer llama.cpp")
        cmd += [short, _join(value)]
    if flash_attn is not None:
        cmd += ["-fa", _fa(flash_attn, supports(llama, "<on|off|auto>"))]
    if not warmup:
        if not supports(llama, "--no-warmup"):
            raise EngineError(f"llama-bench {llama.version} at {llama.bin_dir} has no --no-warmup option")
        cmd.append("--no-warmup")
    if verbose:
        cmd.append("-v")
    return cmd + _load_mode_dialect(llama, [str(a) for a in extra_args])


# An older llama-bench (b10103, the register's b10098) says how to load the weights with -mmp and
# -dio, not -lm: the same three ways (mmap, read into memory, direct I/O).
_OLD_LOAD_MODES = {"none": ["-mmp", "0"], "mmap": ["-mmp", "1"], "dio": ["-dio", "1"], "auto": []}


def _load_mode_dialect(llama: LlamaCpp, args: list[str]) -> list[str]:
    """``-lm MODE`` as this llama-bench spells it; an EngineError for a mode it cannot express."""
    if "-lm" not in args[:-1] or supports(llama, "--load-mode"):
        return args
    i = args.index("-lm")
    mode = args[i + 1]
    if mode not in _OLD_LOAD_MODES or not all(supports(llama, f) for f in ("--mmap", "--direct-io")):
        raise EngineError(f"llama-bench {llama.version} at {llama.bin_dir} has no -lm option and no way to "
                          f"load the weights as -lm {mode} asks; use a newer llama.cpp")
    return args[:i] + _OLD_LOAD_MODES[mode] + args[i + 2:]


def parse_records(text: str) -> list[dict[str, Any]]:
    """Records from llama-bench's jsonl or json output, including a json array cut off by a kill."""
    records: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return records
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            return records  # the unfinished record of a killed run
        if isinstance(obj, dict):
            records.append(obj)
        i = end



def run_bench(llama: LlamaCpp, model: Union[Path, str], *, timeout_s: float = 600,
              env: Optional[dict] = None, monitor: Optional[Callable[[int], Callable[[], None]]] = None,
              **params: Any) -> BenchRun:
    """Run llama-bench once and return its records.

    :param params: see :func:`bench_command` (n_prompt, n_gen, depth, n_gpu_layers, flash_attn,
        cache_type_k, cache_type_v, ubatch, threads, n_cpu_moe, override_tensor, repetitions,
        warmup, verbose, extra_args).
    :raises EngineError: missing model or tool, non-zero exit, signal, timeout. Finished records
        are kept in ``.samples`` (lawbench Samples) and ``.run`` (the partial BenchRun).
    """
    model = Path(model)
    if not model.is_file():
        raise EngineError(f"model file {model} does not exist")
    cmd = bench_command(llama, model, **params)
    from lawbench.core.engines.variants import apply_engine_options

    cmd, env = apply_engine_options(llama, cmd, env)  # an A/B engine's +args= / +env= opt-out
    p = run_process(cmd, timeout_s, env, monitor)
    records, samples_ts, bad = [], [], None
    for record in parse_records(p.stdout) if not p.flooded else []:  # a flood is not read as records
        try:
            samples_ts.append(record_speeds(record))
            records.append(record)
        except EngineError as exc:  # kept out of the samples; the run is an engine fault
            bad = bad or str(exc)
    run = BenchRun(records=records, samples_ts=samples_ts,
                   cmd=cmd, wall_s=round(p.wall_s, 3), stderr_tail=log_tail(p.stderr),
                   returncode=p.returncode, log=p.stderr)
    fault = process_fault(p, "llama-bench", f"model {model.name}", cmd, timeout_s)
    if fault is None and bad:
        fault = f"{bad}; model {model.name}; command: {shlex.join(cmd)}"
    if fault is None and not records:
        fault = (f"llama-bench on model {model.name} printed no results: {_reason(p.stderr)}; "
                 f"command: {shlex.join(cmd)}")
    if fault:
        kept = f" ({len(records)} finished tests kept)" if records else ""
        err = engine_error(p, fault + kept, samples=run.samples(), log=run.stderr_tail)
        err.run = run  # type: ignore[attr-defined]
        raise err
    return run


def capture_load_log(llama: LlamaCpp, model: Union[Path, str], *, timeout_s: float = 300,
                     env: Optional[dict] = None, monitor: Optional[Callable[[int], Callable[[], None]]] = None,
                     **params: Any) -> BenchRun:
    """One short verbose llama-bench run (tg1 unless told otherwise); ``.log`` is the load log."""
    params = {"n_prompt": 0, "n_gen": 1, "repetitions": 1, **params, "verbose": True}
    return run_bench(llama, model, timeout_s=timeout_s, env=env, monitor=monitor, **params)


def quantize(llama: LlamaCpp, src: Union[Path, str], dst: Union[Path, str], type_name: str,
             timeout_s: float = 1800, threads: Optional[int] = None,
             extra_args: Sequence[str] = ()) -> None:
    """``llama-quantize src dst TYPE``; raises EngineError naming the model on any fault."""
    src, dst = Path(src), Path(dst)
    if not src.is_file():
        raise EngineError(f"model file {src} does not exist (source for llama-quantize {type_name})")
    cmd = [str(llama.llama_quantize), *map(str, extra_args), str(src), str(dst), type_name]
    if threads:
        cmd.append(str(threads))
    existed = dst.exists()
    p = run_process(cmd, timeout_s)
    fault = process_fault(p, "llama-quantize", f"model {src.name} -> {type_name}", cmd, timeout_s)
    if fault is None and not dst.is_file():
        fault = f"llama-quantize on model {src.name} wrote no {dst}; command: {shlex.join(cmd)}"
    if fault:
        if dst.is_file() and not existed:  # a half-written model must not pass for a whole one
            dst.unlink()
        raise engine_error(p, fault, log=log_tail(p.stdout + "\n" + p.stderr))
