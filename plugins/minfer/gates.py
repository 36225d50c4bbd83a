"""A gate's switch semantics as a census: r60's "default-on + 0 opt-out" (seed 002, 64-r60 record).

Three passes of the engine command, each with lawbench's kernel tracer loaded (docs/minfer-contract.md
§9): the gate unset, set to its explicit on value, and set to "0". Each pass's kernel census is
the executed count of every kernel by base name (lawbench.engines.kernel_labels, "kernel:<name>").
The counts are how many kernels' counts differ between two passes:

  kernels differing, unset vs on   0 when unset means on (default-on)
  kernels differing, unset vs 0    at least 1 when "0" takes another path (0 opts out)

Names no kernel, so it holds for any gate whose paths run different kernels; a gate read the
pre-r60 way (opt-in: unset = off) makes the first count non-zero, a "0" nobody reads the second 0.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Optional

from lawbench import Census
from lawbench.engines import build_tracer, kernel_labels, read_trace, traced_env
from lawbench.store import cache_root
from lawbench.plugins.minfer.case import Case
from lawbench.plugins.minfer.engine import child_env, run_engine

UNSET_VS_ON = "kernels differing, unset vs on"
UNSET_VS_OFF = "kernels differing, unset vs 0"


def differing(a: dict[str, int], b: dict[str, int]) -> list[str]:
    """The kernel labels whose counts differ between two censuses (absent counts as 0)."""
    return sorted(k for k in set(a) | set(b) if a.get(k, 0) != b.get(k, 0))


def gate_census(argv: list[str], case: Case, revision: Optional[str]) -> Census:
    assert case.gate is not None  # check_case
    gate = case.gate.name
    tracer = build_tracer(cache_root())  # no toolkit with CUPTI: NotApplicable before any pass
    passes: dict[str, dict[str, int]] = {}
    logs = []
    with tempfile.TemporaryDirectory(prefix="lawbench-minfer-gate-") as tmp:
        for arm, value in (("unset", None), ("on", case.gate.on), ("0", "0")):
            env = child_env({**case.env, **({gate: value} if value is not None else {})},
                            [*case.unset_env, *([gate] if value is None else [])])
            trace_file = Path(tmp) / f"trace-{arm}.tsv"
            what = f"minfer engine ({case.command}, {gate} {'unset' if value is None else '= ' + repr(value)})"
            done = run_engine(argv, {**env, **traced_env(tracer, trace_file)}, case.timeout_s, what=what)
            labels = kernel_labels(read_trace(trace_file, what))
            passes[arm] = {k: v for k, v in labels.items() if k.startswith("kernel:")}
            logs.append(f"=== {what}\n{done.log()}")
    on, off = differing(passes["unset"], passes["on"]), differing(passes["unset"], passes["0"])
    environment: dict[str, Any] = {"command": argv, "gate": gate, "on_value": case.gate.on, "env": case.env,
                                   "unset_env": case.unset_env, "engine_revision": revision,
                                   "differing_unset_vs_on": on, "differing_unset_vs_0": off,
                                   "kernels": passes}
    return Census(counts={UNSET_VS_ON: len(on), UNSET_VS_OFF: len(off)}, log="\n".join(logs)[-16000:],
                  environment=environment)
