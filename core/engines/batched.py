"""Run llama.cpp's llama-batched-bench: decode over parallel slots, and the common arguments
llama-bench lacks (``--override-kv``, hence the MoE expert count k).

One process loads the model once and times every (prompt, generated, slots) cell it is given,
printing one JSON line per finished cell with ``--output-format jsonl`` (batched-bench.cpp at
b11434): ``pp``, ``tg``, ``pl`` (slots), ``t_pp`` / ``speed_pp`` (prefill), ``t_tg`` /
``speed_tg`` (decode, aggregate over the slots: pl·tg / t_tg) and the context it ran with. There
is no repetition count: a test repeated r times is the same ``-ntg`` value listed r times, each a
record of its own. At one slot, decode after a prompt of d tokens is llama-bench's ``tg n @ d``.

llama.cpp's common logger writes every line (the JSON records too) from a worker thread that is
never joined at exit (common/log.cpp: "this design may cause logs to be lost if not flushed before
the program exits", ggml-org/llama.cpp#22142), so the last lines of a run can be lost: measured
here at b11434, 16 of 40 tiny runs lost a record. So every run ends with one more copy of its last
cell, whose own line may be lost and is never a reading: the records are the first r cells. A run
that lost more than that (now and then every line: 2 of 200) exited 0 and is run again, up to
three runs in all (lawbench.core.engines.tool_run.run_logged); ``BatchedRun.lost_runs`` counts them.

What the tool does quietly is made loud here:
- a cell whose KV need (pl·(pp + tg)) exceeds the context is skipped without a word, so the
  context is sized from the cells, and a cell without its record is an EngineError;
- a speed of a cell that timed nothing prints as ``-nan`` (not JSON): read as None, and a
  reading the law needs that is missing, zero or not finite is an EngineError;
- ``--override-kv <arch>.expert_used_count=int:K`` must be seen in the load log
  (``print_info: n_expert_used = K``, so the run is verbose), or the run is an EngineError —
  never a run at the file's default k passed off as one at K.
Faults (tool missing, exit code, signal, timeout, interrupt) are one-line EngineErrors naming the
model and the command, through the process-group runner of lawbench.core.engines.bench.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from lawbench.core.engines.tool_run import _reason, engine_error, log_tail, process_fault, run_logged
from lawbench.core.errors import EngineError

if TYPE_CHECKING:
    from lawbench.core.engines.llamacpp import LlamaCpp

TOOL = "llama-batched-bench"
LOAD_MODES = ("auto", "none", "mmap", "mlock", "mmap+mlock", "dio")  # -lm at b11434
_NAN = re.compile(r"(?<=[:\[,\s])-?(nan|inf)\b", re.IGNORECASE)  # printf's %f of NaN / ±inf
_EXPERTS_USED = re.compile(r"print_info:\s+n_expert_used\s*=\s*(\d+)")


def tool_path(llama: LlamaCpp) -> Path:
    """llama-batched-bench beside the build's llama-bench.

    :raises EngineError: the build has none (an older build, or a runner's own without it).
    """
    from lawbench.core.engines.tools import require_tool

    return require_tool(llama, TOOL)  # compiled into a lawbench build the first time a run needs it


def expert_override(architecture: str, k: int) -> str:
    """The ``--override-kv`` value that sets the experts each token routes to."""
    return f"{architecture}.expert_used_count=int:{int(k)}"


TRAILING_CELLS = 1  # per slot count: the copy of the last cell whose line the logger may lose
WARMUP_TOKENS = 16  # the tool's warm-up decodes 16 tokens first; a smaller context aborts it


def context_for(n_prompt: int, n_gen: int, slots: Sequence[int]) -> int:
    """The smallest -c that holds every cell (pl·(pp + tg) positions, unshared prompts) and
    the tool's warm-up."""
    return max(WARMUP_TOKENS, *(pl * (n_prompt + n_gen) for pl in slots))


def batched_command(llama: LlamaCpp, model: Path, *, n_prompt: int = 0, n_gen: int = 32,
                    slots: Sequence[int] = (1,), repetitions: int = 1, ctx: Optional[int] = None,
                    n_gpu_layers: Optional[int] = None, flash_attn: Optional[str] = None,
                    cache_type_k: Optional[str] = None, cache_type_v: Optional[str] = None,
                    batch: Optional[int] = None, ubatch: Optional[int] = None,
                    threads: Optional[int] = None, n_cpu_moe: Optional[int] = None,
                    override_tensor: Optional[str] = None, override_kv: Sequence[str] = (),
                    load_mode: Optional[str] = None, kv_offload: bool = True,
                    verbose: bool = False, extra_args: Sequence[str] = ()) -> list[str]:
    """The llama-batched-bench command line: one cell per (slots, repetition)."""
    if repetitions < 1 or not slots or min(slots) < 1:
        raise EngineError(f"{TOOL}: repetitions ({repetitions}) and every slot count ({list(slots)}) "
                          f"must be at least 1")
    if load_mode is not None and load_mode not in LOAD_MODES:
        raise EngineError(f"{TOOL}: load mode {load_mode!r} is not one of {', '.join(LOAD_MODES)}")
    # A prefill cell repeats through -npp, a decode cell through -ntg (a prefill cell has tg 0);
    # one more copy at the end is the trailing cell (module docstring), never a reading.
    def reps_of(n: int) -> str:
        return ",".join([str(n)] * (repetitions + TRAILING_CELLS))

    cmd = [str(tool_path(llama)), "-m", str(model), "--output-format", "jsonl",
           "-npp", reps_of(n_prompt) if n_gen == 0 else str(n_prompt),
           "-ntg", str(n_gen) if n_gen == 0 else reps_of(n_gen),
           "-npl", ",".join(str(int(s)) for s in slots),
           "-c", str(ctx or context_for(n_prompt, n_gen, slots))]
    optional = [("-ngl", n_gpu_layers), ("-fa", flash_attn), ("-ctk", cache_type_k),
                ("-ctv", cache_type_v), ("-b", batch), ("-ub", ubatch), ("-t", threads),
                ("--n-cpu-moe", n_cpu_moe), ("-ot", override_tensor), ("-lm", load_mode)]
    cmd += [str(x) for flag, value in optional if value is not None for x in (flag, value)]
    for kv in override_kv:
        cmd += ["--override-kv", kv]
    if not kv_offload:
        cmd.append("-nkvo")
    if verbose or override_kv:  # the load log is the proof that an override took hold
        cmd.append("-v")
    return cmd + [str(a) for a in extra_args]


def parse_jsonl(text: str) -> list[dict[str, Any]]:
    """The records of ``--output-format jsonl``; a ``nan``/``inf`` speed becomes None.

    Lines that are not JSON objects (a verbose run's log, when stderr and stdout are mixed) are
    skipped; an unfinished last line of a killed run is dropped.
    """
    records = []
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(_NAN.sub("null", line))
        except ValueError:
            continue
        if isinstance(obj, dict) and "pl" in obj:
            records.append(obj)
    return records


def record_speed(record: dict[str, Any]) -> float:
    """The reading of one cell: aggregate decode tok/s (speed_tg), or prefill (speed_pp) when
    the cell generated nothing.

    :raises EngineError: the speed is missing, not a finite number, or not above 0.
    """
    field = "speed_tg" if int(record.get("tg") or 0) else "speed_pp"
    v = record.get(field)
    if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
        raise EngineError(f"{TOOL} reported {field} = {v!r} for cell {record_label(record)}: tokens/s "
                          f"must be a finite number above 0 (an engine fault, not a sample)")
    return float(v)


def record_label(record: dict[str, Any]) -> str:
    """pp<n>, tg<n>@d<pp>, with x<slots> beyond one slot."""
    pp, tg, pl = (int(record.get(k) or 0) for k in ("pp", "tg", "pl"))
    name = f"tg{tg}@d{pp}" if tg and pp else f"tg{tg}" if tg else f"pp{pp}"
    return f"{name}x{pl}" if pl > 1 else name


def experts_used_in_log(log: str) -> Optional[int]:
    """k as the loaded model reports it (``print_info: n_expert_used = K``; verbose runs)."""
    found = _EXPERTS_USED.findall(log)
    return int(found[-1]) if found else None


@dataclass
class BatchedRun:
    """One llama-batched-bench process: its records, their readings, what it left behind."""

    records: list[dict[str, Any]]
    speeds: list[float]  # one reading per record, in record order
    cmd: list[str]
    wall_s: float
    stderr_tail: str
    returncode: Optional[int]
    log: str = ""
    lost_runs: int = 0  # clean runs of the same command before this one whose records were lost

    def speeds_at(self, slots: int) -> list[float]:
        return [v for r, v in zip(self.records, self.speeds) if int(r.get("pl") or 0) == slots]


def run_batched(llama: LlamaCpp, model: Union[Path, str], *, timeout_s: float = 600,
                env: Optional[dict] = None, experts_used: Optional[int] = None,
                architecture: Optional[str] = None, **params: Any) -> BatchedRun:
    """Run llama-batched-bench once; every asked cell must come back with a reading.

    :param experts_used: k, set through ``--override-kv <architecture>.expert_used_count``
        and checked in the load log (then ``architecture`` is needed: the GGUF's own).
    :param params: see :func:`batched_command`.
    :raises EngineError: missing model or tool, fault, a missing or bad cell, an override that
        did not take hold.
    """
    model = Path(model)
    if not model.is_file():
        raise EngineError(f"model file {model} does not exist")
    if experts_used is not None:
        if not architecture:
            raise EngineError(f"{TOOL}: setting experts_used = {experts_used} needs the model's "
                              f"architecture (the override key is <arch>.expert_used_count)")
        params["override_kv"] = [*params.get("override_kv", ()), expert_override(architecture, experts_used)]
    cmd = batched_command(llama, model, **params)
    n_slots, reps = len(params.get("slots", (1,))), int(params.get("repetitions", 1))
    want = n_slots * reps
    p = run_logged(cmd, timeout_s, env, complete=lambda out, _: len(parse_jsonl(out)) >= want)
    # The first r cells of each slot count (slot count innermost: pp, tg, then pl); the rest
    # are the trailing cells, never readings.
    records, speeds, bad = parse_jsonl(p.stdout)[:want], [], None
    for record in records:
        try:
            speeds.append(record_speed(record))
        except EngineError as exc:
            bad = bad or str(exc)
    run = BatchedRun(records=records, speeds=speeds, cmd=cmd, wall_s=round(p.wall_s, 3),
                     stderr_tail=log_tail(p.stderr), returncode=p.returncode, log=p.stderr,
                     lost_runs=p.lost_runs)
    fault = process_fault(p, TOOL, f"model {model.name}", cmd, timeout_s)
    command = shlex.join(cmd)
    if fault is None and bad:
        fault = f"{bad}; model {model.name}; command: {command}"
    if fault is None and len(records) != want:
        runs = f" in each of {p.lost_runs + 1} runs" if p.lost_runs else ""
        fault = (f"{TOOL} on model {model.name} printed {len(records)} of {want} cells{runs} (a cell "
                 f"larger than the context is skipped silently, and the tool can lose its last lines "
                 f"at exit): {_reason(p.stderr)}; command: {command}")
    if fault is None and experts_used is not None:
        seen = experts_used_in_log(p.stderr)
        if seen != experts_used:
            fault = (f"{TOOL} on model {model.name} was asked for experts_used = {experts_used} but "
                     f"the loaded model reports n_expert_used = {seen}; command: {command}")
    if fault:
        err = engine_error(p, fault, log=run.stderr_tail)
        err.run = run  # type: ignore[attr-defined]
        raise err
    return run
