"""Samplers for minfer's measurement and ratio anchors: one engine pass per sample.

Two readings, both from a real run of the engine command:
  prefill_tok_s       the command's {"prefill_tok_s": …} stdout line (see engine.py)
  per_pid_memory_mib  the peak per-PID GPU memory of the engine's process tree during the run
                      (seed 002 reads GB10 memory per PID; the aggregate field is [N/A] there)

With two arms a sample is one *pair*, run back to back and in alternating order (a b, b a, …) so
drift falls on both arms alike; the statistic is a/b (ratio anchors) or a − b ("difference").
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from lawbench.core.law import EngineError
from lawbench.core.models import Sample
from lawbench.plugins.minfer.case import Case, Run
from lawbench.plugins.minfer.engine import child_env, engine_argv, prefill_tok_s, run_engine
from lawbench.plugins.minfer.memory import PerPidMemory


class EngineSampler:
    def __init__(self, case: Case, arms: dict[Optional[str], Run], combine: str,
                 memory: Optional[PerPidMemory] = None):
        self.case, self.arms, self.combine, self.memory = case, arms, combine, memory
        # Resolve every command now: a missing one is a SKIP before any engine runs.
        self.argv = {name: engine_argv(run.command_env) for name, run in arms.items()}
        self.pairs = 0
        self.last: Optional[str] = None

    # ----------------------------------------------------------------- one reading
    def _name(self, arm: Optional[str]) -> str:
        run = self.arms[arm]
        return run.label or arm or "default"

    def _read_once(self, arm: Optional[str]) -> tuple[float, dict[str, Any]]:
        run = self.arms[arm]
        env = child_env(run.env, run.unset_env)
        what = f"engine ({run.command_env}, {self._name(arm)})"
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
        done = run_engine(self.argv[arm], env, self.case.timeout_s, what=what)
        return prefill_tok_s(done, what), {"duration_s": round(done.duration_s, 3)}

    # ----------------------------------------------------------------- Sampler protocol
    def draw(self, n: int) -> list[Sample]:
        out: list[Sample] = []
        try:
            for _ in range(max(n, 1)):
                order = list(self.arms)
                if self.pairs % 2:
                    order.reverse()
                for arm in order:
                    value, raw = self._read_once(arm)
                    raw["pair"] = self.pairs
                    out.append(Sample(value=value, arm=arm, predecessor=self.last, raw=raw))
                    self.last = self._name(arm)
                self.pairs += 1
        except EngineError as exc:
            exc.samples = out + exc.samples  # nothing measured is lost
            raise
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        if self.combine == "value":
            return [s.value for s in samples]
        by_pair: dict[int, dict[Optional[str], float]] = {}
        for s in samples:
            by_pair.setdefault(int(s.raw.get("pair", -1)), {})[s.arm] = s.value
        op: Callable[[float, float], float] = (lambda a, b: a / b) if self.combine == "ratio" else \
            (lambda a, b: a - b)
        return [op(p["a"], p["b"]) for _, p in sorted(by_pair.items()) 
                if "a" in p and "b" in p and (p["b"] or self.combine != "ratio")]

    def environment(self) -> dict[str, Any]:
        return {"engine": {self._name(a): {"command": self.argv[a], "command_env": r.command_env,
                                           "env": r.env, "unset_env": r.unset_env}
                           for a, r in self.arms.items()},
                "memory_instrument": self.memory.instrument if self.memory else None}

    def protocol(self) -> dict[str, Any]:
        return {"reading": self.case.measure, "runs_per_sample": 1,
                "arms": [self._name(a) for a in self.arms], "order": "pairs in alternating order (ab, ba, …)",
                "statistic": self.combine, "timeout_s": self.case.timeout_s,
                "memory": "peak per-PID MiB over the engine's process tree, polled every 0.2 s"
                if self.case.measure == "per_pid_memory_mib" else None}
