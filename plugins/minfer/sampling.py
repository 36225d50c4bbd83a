"""Readings for minfer's measurement and paired anchors: one engine pass per reading.

Two readings, both from a real run of the engine command:
  prefill_tok_s       the command's {"prefill_tok_s": …} stdout line (see engine.py)
  per_pid_memory_mib  the peak per-PID GPU memory of the engine's process tree during the run
                      (seed 002 reads GB10 memory per PID; the aggregate field is [N/A] there)
  kernel_time_ms      the mean GPU time per launch of case.kernel at its grid, from lawbench's CUPTI
                      kernel tracer (lawbench.engines.build_tracer) loaded into the engine through
                      CUDA_INJECTION64_PATH: one pass, one trace (docs/minfer-contract.md §9)
  long_scoreboard_pct the median over case.kernel's launches at its grid of Nsight Compute's Warp
                      State long_scoreboard share, ncu run around one pass (contract §11)

Pairing, alternating order and predecessors are core's protocol (lawbench.core.stats.protocol.ArmSampler):
a paired sample is a/b (ratio anchors) or a − b ("difference") within one round.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Optional

from lawbench import ArmSampler, EngineError, Visit
from lawbench.engines import (build_tracer, find_ncu, kernel_regex, kernel_time, long_scoreboard_share,
                              read_counters, read_trace, traced_env)
from lawbench.hardware import PerPidMemory
from lawbench.store import cache_root
from lawbench.plugins.minfer.case import Case, Run
from lawbench.plugins.minfer.engine import child_env, engine_argv, prefill_tok_s, run_engine


class EngineReader:
    """Runs one arm of the engine once and returns its reading."""

    def __init__(self, case: Case, arms: dict[str, Run], memory: Optional[PerPidMemory] = None,
                 revisions: Optional[dict[str, str]] = None):
        self.case, self.arms, self.memory = case, arms, memory
        self.revisions = revisions or {}  # arm -> the revision its engine reported (minfer arms)
        # Resolve every command now: a missing one is a SKIP before any engine runs.
        self.argv = {name: engine_argv(run.command) for name, run in arms.items()}
        self.tracer: Optional[Path] = None
        if case.measure == "kernel_time_ms":  # no toolkit with CUPTI: NotApplicable, before any run
            self.tracer = build_tracer(cache_root())
        self.ncu: Optional[str] = None
        if case.measure == "long_scoreboard_pct":  # no Nsight Compute: NotApplicable, before any run
            self.ncu = find_ncu()

    def label(self, arm: str) -> str:
        return self.arms[arm].label or ("default" if arm == "main" else arm)

    def read(self, arm: str) -> tuple[float, dict[str, Any]]:
        run = self.arms[arm]
        env = child_env(run.env, run.unset_env)
        what = f"engine ({run.command}, {self.label(arm)})"
        if self.case.measure == "per_pid_memory_mib":
            assert self.memory is not None
            peak: list[float] = []

            def poll(pids: set[int]) -> None:
                mib = self.memory.used_by(pids)
                if mib is not None:
                    peak.append(mib)

            done = run_engine(self.argv[arm], env, self.case.timeout_s, poll=poll, what=what)
            if not peak:
                raise EngineError(f"{what} ran {done.duration_s:.1f} s but never appeared in the per-process "
                                  f"GPU memory list with a number ({self.memory.instrument})", log=done.log())
            return max(peak), {"readings": len(peak), "instrument": self.memory.instrument,
                               "duration_s": round(done.duration_s, 3)}
        if self.case.measure == "kernel_time_ms":
            return self._kernel_time(arm, env, what)
        if self.case.measure == "long_scoreboard_pct":
            return self._long_scoreboard(arm, env, what)
        done = run_engine(self.argv[arm], env, self.case.timeout_s, what=what)
        return prefill_tok_s(done, what), {"duration_s": round(done.duration_s, 3)}

    def _kernel_time(self, arm: str, env: dict[str, str], what: str) -> tuple[float, dict[str, Any]]:
        assert self.tracer is not None and self.case.kernel is not None
        with tempfile.TemporaryDirectory(prefix="lawbench-minfer-trace-") as tmp:
            trace_file = Path(tmp) / "trace.tsv"
            done = run_engine(self.argv[arm], {**env, **traced_env(self.tracer, trace_file)}, self.case.timeout_s,
                              what=what)
            try:
                trace = read_trace(trace_file, what)
            except EngineError as exc:
                raise EngineError(str(exc), log=done.log()) from None
        ms, detail = kernel_time(trace, self.case.kernel.name, self.case.kernel.grid, what)
        return ms, {**detail, "duration_s": round(done.duration_s, 3)}

    def _long_scoreboard(self, arm: str, env: dict[str, str], what: str) -> tuple[float, dict[str, Any]]:
        assert self.ncu is not None and self.case.kernel is not None
        name = self.case.kernel.name
        launches = read_counters(self.argv[arm], env, kernel_regex(name), self.case.timeout_s, what, ncu=self.ncu)
        pct, detail = long_scoreboard_share(launches, name, self.case.kernel.grid, what)
        return pct, {**detail, "ncu": self.ncu}

    def visit(self, arm: str):
        def one(reps: int) -> Visit:
            readings = [self.read(arm) for _ in range(reps)]
            return Visit(values=[v for v, _ in readings], raw=readings[-1][1])
        return one

    def sampler(self, combine: str) -> ArmSampler:
        """No warm-up visit: one whole-prefill pass is the engine's unit of work, as in the seed."""
        return ArmSampler({arm: self.visit(arm) for arm in self.arms},
                          labels={arm: self.label(arm) for arm in self.arms},
                          warmup=False, combine=combine,
                          protocol={"reading": self.case.measure, "timeout_s": self.case.timeout_s,
                                    "engine": {self.label(a): {"command": self.argv[a], "command_env": r.command,
                                                                "engine": r.engine, "revision": self.revisions.get(a),
                                                                "env": r.env, "unset_env": r.unset_env}
                                               for a, r in self.arms.items()},
                                    "memory_instrument": self.memory.instrument if self.memory else None,
                                    "kernel": self.case.kernel.model_dump() if self.case.kernel else None,
                                    "memory": "peak per-PID MiB over the engine's process tree, polled every 0.2 s"
                                    if self.case.measure == "per_pid_memory_mib" else None})
