"""Nsight Compute's warp-state counters of an engine's kernels: run ``ncu`` around the engine, read
its CSV, give each profiled launch its two metrics and the long_scoreboard share.

The share is what Nsight Compute's Warp State section draws: of the average cycles a warp spends
per issued instruction (``smsp__average_warp_latency_per_inst_issued``), the cycles booked to
waiting on an L1TEX result (``smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active``,
the section's long_scoreboard bar). The stall bars add up to the cycles per instruction, so their
ratio is the fraction of warp time lost to L1TEX latency.

The engine runs as an argv list under ncu through ``run_process`` (a process group of its own,
ended whole on a timeout). Counters are read by kernel replay, so a profiled pass is slow; only
launches whose kernel matches the regex are replayed. What can go wrong is said in words, naming
the tool: no ncu (NotApplicable: install Nsight Compute or set LAWBENCH_NCU), counters the driver
refuses (ERR_NVGPUCTRPERM, 'Failed to initialize the profiler'), no launch matched, a CSV without
the metrics (EngineError).
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from lawbench.core.engines.kernels import base_name
from lawbench.core.errors import EngineError, NotApplicable
from lawbench.core.engines.tool_run import engine_error, log_tail, process_fault, run_process

NCU_ENV = "LAWBENCH_NCU"  # a runner's ncu when it is not on PATH
STALL_METRIC = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
LATENCY_METRIC = "smsp__average_warp_latency_per_inst_issued.ratio"
METRICS = (STALL_METRIC, LATENCY_METRIC)
# What ncu prints when the driver keeps the SM counters from this user, or cannot attach at all.
REFUSED = ("ERR_NVGPUCTRPERM", "Failed to initialize the profiler")
_HEADER_START = '"ID","Process ID"'
_COLUMNS = ("ID", "Kernel Name", "Grid Size", "Block Size", "Metric Name", "Metric Unit", "Metric Value")
# ncu scales a unit when --print-units is not "base" (e.g. Kcycle); the reader brings it back.
_SCALE = {"K": 1e3, "M": 1e6, "G": 1e9}
_BASE_UNITS = {"", "cycle", "inst", "warp", "inst/warp", "ratio"}


@dataclass
class CounterLaunch:
    """One profiled launch: ncu's launch ID, the kernel, its grid and block, and each metric's value
    in its base unit."""

    launch: int
    kernel: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def share(self, where: str) -> float:
        """long_scoreboard cycles over cycles per issued instruction; EngineError when either is absent."""
        missing = [m for m in METRICS if m not in self.metrics]
        if missing:
            raise EngineError(f"{where}: launch {self.launch} ({self.kernel[:80]}) has no {', '.join(missing)}; "
                              f"run ncu with --metrics {','.join(METRICS)}")
        latency = self.metrics[LATENCY_METRIC]
        if latency <= 0:
            raise EngineError(f"{where}: launch {self.launch} reports {LATENCY_METRIC} = {latency:g}, "
                              "no cycles to divide by")
        return self.metrics[STALL_METRIC] / latency


def _triple(text: str, where: str) -> tuple[int, ...]:
    try:
        out = tuple(int(part) for part in text.strip().strip("()").split(","))
    except ValueError:
        out = ()
    if len(out) != 3:
        raise EngineError(f"{where}: {text!r} is not a launch dimension like (132, 1, 1)")
    return out


def _number(value: str, unit: str, where: str) -> float:
    """ncu's printed value (thousands separators allowed) in the base unit."""
    text = value.strip().replace(",", "")
    try:
        number = float(text)
    except ValueError:
        raise EngineError(f"{where}: metric value {value!r} is not a number (ncu prints 'n/a' for a metric "
                          "this GPU cannot collect)") from None
    if unit not in _BASE_UNITS and unit[:1] in _SCALE and unit[1:] in _BASE_UNITS:
        number *= _SCALE[unit[:1]]
    return number


def parse_ncu_csv(text: str, source: str) -> list[CounterLaunch]:
    """Every launch in ncu's ``--csv`` page output, in launch order.

    The engine's own output and ncu's ``==PROF==`` lines come before the header (and may follow the
    rows); lines that are not rows of the header's shape are passed over. A text with no header, or
    a header without the columns read here, is an EngineError naming ``source``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(_HEADER_START)), None)
    if start is None:
        refused = [r for r in REFUSED if r in text]
        hint = (f"; ncu says {refused[0]}: the driver refuses its performance counters" if refused
                else "; was ncu run with --csv, and did any launch match the kernel filter?")
        raise EngineError(f"{source}: no Nsight Compute CSV header ({_HEADER_START},…) in "
                          f"{len(lines)} lines{hint}")
    header = next(csv.reader([lines[start]]))
    absent = [c for c in _COLUMNS if c not in header]
    if absent:
        raise EngineError(f"{source}: ncu's CSV header lacks {', '.join(absent)} (line {start + 1}); "
                          "run ncu with --csv and --metrics, not --page details with sections only")
    col = {name: header.index(name) for name in _COLUMNS}
    launches: dict[int, CounterLaunch] = {}
    for number, row in enumerate(csv.reader(lines[start + 1:]), start=start + 2):
        if len(row) < len(header) or not row[col["ID"]].strip().isdigit():
            continue  # the engine's output after ncu's, or a ==PROF== line
        where = f"{source} line {number}"
        launch_id = int(row[col["ID"]])
        launch = launches.get(launch_id)
        if launch is None:
            launch = launches[launch_id] = CounterLaunch(
                launch_id, row[col["Kernel Name"]], _triple(row[col["Grid Size"]], where),
                _triple(row[col["Block Size"]], where))
        name, unit = row[col["Metric Name"]], row[col["Metric Unit"]]
        if name in METRICS:
            launch.metrics[name] = _number(row[col["Metric Value"]], unit, where)
            launch.units[name] = unit
    if not launches:
        raise EngineError(f"{source}: ncu's CSV header (line {start + 1}) is followed by no launch row")
    return [launches[k] for k in sorted(launches)]


def long_scoreboard_share(launches: Sequence[CounterLaunch], kernel: str,
                          grid: tuple[Optional[int], Optional[int], Optional[int]], where: str
                          ) -> tuple[float, dict[str, Any]]:
    """The median, over the launches of ``kernel`` (base name) at ``grid`` (None: any), of each
    launch's long_scoreboard share, in % — and what it was read from. No matching launch is an
    EngineError naming the kernels and grids that were profiled (never a share of 0)."""
    def fits(launch: CounterLaunch) -> bool:
        return (base_name(launch.kernel)[0] == kernel
                and all(want is None or want == got for want, got in zip(grid, launch.grid)))

    chosen = [launch for launch in launches if fits(launch)]
    if not chosen:
        seen = sorted({f"{base_name(x.kernel)[0]} at {'x'.join(map(str, x.grid))}" for x in launches})
        wanted = "x".join("*" if g is None else str(g) for g in grid)
        raise EngineError(f"{where}: ncu profiled no launch of {kernel} at grid {wanted} "
                          f"(profiled: {', '.join(seen) or 'none'})")
    shares = [100.0 * launch.share(where) for launch in chosen]
    return statistics.median(shares), {
        "launches": len(chosen), "shares_pct": [round(s, 3) for s in shares],
        "stall_cycles": [launch.metrics[STALL_METRIC] for launch in chosen],
        "cycles_per_issued_inst": [launch.metrics[LATENCY_METRIC] for launch in chosen],
        "grids": sorted({"x".join(map(str, launch.grid)) for launch in chosen})}


def find_ncu(environ: Mapping[str, str] = os.environ) -> str:
    """ncu from LAWBENCH_NCU, PATH or the CUDA toolkit; NotApplicable naming Nsight Compute if none."""
    named = environ.get(NCU_ENV, "").strip()
    if named:
        if not Path(named).is_file():
            raise NotApplicable(f"{NCU_ENV}={named!r} names no file: point it at Nsight Compute's ncu")
        return named
    found = shutil.which("ncu")
    cuda = Path(environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "ncu"
    if found:
        return found
    if cuda.is_file():
        return str(cuda)
    raise NotApplicable(f"Nsight Compute (ncu) not found on PATH or in {cuda.parent}: install it, or set "
                        f"{NCU_ENV} to its ncu; the warp-state counters are read with it")


def ncu_argv(ncu: str, argv: Sequence[str], kernel_regex: str, launch_count: Optional[int] = None) -> list[str]:
    """The ncu command line: CSV, base units, the two metrics, launches whose kernel matches."""
    out = [ncu, "--csv", "--print-units", "base", "-k", f"regex:{kernel_regex}", "--metrics", ",".join(METRICS)]
    if launch_count is not None:
        out += ["--launch-count", str(launch_count)]
    return out + list(argv)


def read_counters(argv: Sequence[str], env: Mapping[str, str], kernel_regex: str, timeout_s: float,
                  what: str, launch_count: Optional[int] = None, ncu: Optional[str] = None
                  ) -> list[CounterLaunch]:
    """Run ``argv`` once under ncu with ``env`` as its whole environment and return its launches.

    :param what: the engine in words; every fault names it and ncu
    """
    tool = ncu or find_ncu()
    cmd = ncu_argv(tool, argv, kernel_regex, launch_count)
    p = run_process(cmd, timeout_s, env=dict(env), inherit_env=False)
    if p.missing:
        raise NotApplicable(f"Nsight Compute (ncu) cannot be started ({p.missing}): {tool}")
    printed = p.stdout + "\n" + p.stderr
    refused = [r for r in REFUSED if r in printed]
    if refused:
        raise engine_error(p, f"ncu (Nsight Compute) could not read the GPU's performance counters for {what}: "
                              f"it printed {refused[0]} (the driver keeps them from this user: load the driver "
                              "with NVreg_RestrictProfilingToAdminUsers=0, or run the job with the counters "
                              "allowed)", log=log_tail(printed))
    fault = process_fault(p, "ncu", what, cmd, timeout_s)
    if fault:
        raise engine_error(p, fault, log=log_tail(printed))
    try:
        return parse_ncu_csv(p.stdout, f"ncu's output for {what} (kernels matching {kernel_regex!r})")
    except EngineError as exc:
        raise EngineError(str(exc), log=log_tail(printed)) from None


def kernel_regex(name: str) -> str:
    """ncu's -k filter for a kernel's base name. Unanchored, since how ncu spells a name (template
    arguments, a return type) varies by version; long_scoreboard_share keeps the exact base name."""
    return re.escape(name)
