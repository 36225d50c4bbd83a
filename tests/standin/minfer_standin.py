#!/usr/bin/env python3
"""A stand-in for the minfer engine command that speaks the lawbench minfer contract, version 1
(docs/minfer-contract.md), exactly: nothing on stdout but the contract's JSON lines, nothing on
stderr but free text and, under MINFER_MMQ_RAW_NB_DEBUG=1, one B-path label line per q6_K launch.

It is not minfer and measures nothing. It models the part of seed 002 a liveness census is about:
registration builds a W_exp plane (the q6_K weights expanded once to centered int8) for every
padded q6_K tensor while MINFER_MMQ_Q6K_NB is on and MINFER_MMQ_Q6K_EXP is not "0"; the plane map
is keyed by the padded weight's pointer; each launch looks its plane up and takes the cp.async
path on a hit, the in-kernel expansion on a miss, and names the path with the seed's four-state
rule. Both paths compute the same int8 values, so the greedy tokens are identical whichever path
runs — which is why only the label can tell them apart. The rates printed are the seed's two
published whole-prefill rates (3181.0 tok/s with the plane, 3020.7 without), chosen by the path
taken, not measured — unless MINFER_STANDIN_RATES gives figures of the test's own, so a test
can plant a figure inside or outside an anchor's band and assert the verdict it must give.

Environment (besides the contract's own variables):
  MINFER_STANDIN_REVISION  the revision the probe reports (default r54)
  MINFER_STANDIN_COMMIT    the build commit the probe reports (default: none, the key left out)
  MINFER_STANDIN_HOLD_S    seconds a pass holds its simulated memory, so per-PID polling sees it
  MINFER_STANDIN_READ_MARK with HOLD_S: a path prefix; the stand-in nvidia-smi touches
                           <prefix>.<pid> once it has listed this process, and the hold ends then
                           (HOLD_S is the cap): a loaded box's slow polling is waited for, not raced
  MINFER_STANDIN_PIDFILE   fault "hang": where the hung child's PID is written
  MINFER_STANDIN_FAULT     planted faults, comma-separated (FAULTS below)
  MINFER_STANDIN_RATES     "FAST,SLOW": the prefill tok/s printed with / without the plane (default
                           the seed's 3181.0,3020.7)
  MINFER_STANDIN_MIB       "BASE,PLANE": the MiB a pass holds without the plane and what the plane
                           adds (default the seed's 6182,1454)
  MINFER_STANDIN_TRACE_HARNESS  a build of tests/standin/tracer_harness.cpp (the real tracer
                           compiled in): with it, a traced pass writes a kernel trace (below)
  MINFER_STANDIN_KERNEL_MS "FAST,SLOW": the GPU ms per ffn_down launch with / without the plane
                           (default the seed's 12.76,16.06; attn_v's are the stand-in's own 0.841,1.0)

Kernel time (contract §9): with CUDA_INJECTION64_PATH and LAWBENCH_KERNEL_TRACE_OUT set, a real CUDA
engine has lawbench's tracer loaded by the driver and writes its trace at exit. This stand-in runs
no CUDA: it hands its launches to the harness, which feeds them to the real tracer as CUPTI kernel
records and writes the trace with the tracer's own writer. Launches 0-13 are attn_v (od 512: grid
52x4x1 for a 3325-token prefill), 14-26 ffn_down (od 3584: 52x28x1); each names the kernel its path
ran (mmq_raw_nb_bt_q6k_kernel<2, true> on a plane hit, <2, false> on a miss, the f16 fallback
gemm_f16_nt_kernel_t with MINFER_MMQ_Q6K_NB off) and the time the seed gives that path.

Standard library only, so any python3 runs it; tests/standin/nvidia-smi reads its footprint.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

LAUNCHES = 27  # seed 002: "the liveness census of the 27 q6_K launches"
OD, ID = 4, 256  # each stand-in tensor: 4 rows of 256 (id % 256 == 0: eligible for a plane)
VOCAB = 152064
RATE_FAST, RATE_SLOW = 3181.0, 3020.7  # seed 002's default and MINFER_MMQ_Q6K_EXP=0 rates
# seed 002: "measured per PID: 7636 → 6182 MiB"; r56's W_dsc plane: "another 363 MB" (read as MiB)
BASE_MIB, PLANE_MIB, DSC_MIB = 6182, 7636 - 6182, 363
CONTRACT = 1

FAULTS = {
    "wrong-map-key": "r53's bug: the plane map is keyed by the plane's own pointer, so every lookup "
                     "misses; all 27 launches fall back while the output stays identical",
    "alloc-fail": "the last tensor's plane allocation fails: its map entry stays empty and one loud "
                  "message is printed (seed 002's failure semantics)",
    "exp-ignored": "the registration gate forgets MINFER_MMQ_Q6K_EXP: the plane is built even at EXP=0",
    "unpadded": "the weights are registered raw (210-B blocks, never padded): no plane is ever eligible",
    "bad-math": "the cp.async path forgets the -32 centering: the output changes, the labels do not",
    "crash": "the pass dies after its launches with exit status 3",
    "hang": "the pass starts a child and never finishes",
    "no-rate": "the pass prints no prefill_tok_s line",
    "no-probe": "the command ignores the revision probe and runs a pass instead",
    "future-contract": "the probe states minfer_contract 2, a version this lawbench does not speak",
    "no-trace": "the command does not hand CUDA_INJECTION64_PATH to the engine: no kernel trace is written",
    "opt-in-nb": "MINFER_MMQ_Q6K_NB read the pre-r60 way: only \"1\" turns it on, unset is off",
}
KERNEL_MS_FAST, KERNEL_MS_SLOW = 12.76, 16.06  # seed 002: "ffn_down kernel −20.5%: 16.06 → 12.76 ms"
ATTN_V_MS = (0.841, 1.0)  # the stand-in's own: the seed gives attn_v's gain (−15.9%), not its time
Q6K_FAST, Q6K_SLOW = ("_Z24mmq_raw_nb_bt_q6k_kernelILi2ELb1EEvPKhPfiii",  # mangled <2, true> / <2, false>
                      "_Z24mmq_raw_nb_bt_q6k_kernelILi2ELb0EEvPKhPfiii")
F16_FALLBACK = "_Z20gemm_f16_nt_kernel_tPKhPfiii"
ATTN_V_LAUNCHES = 14


def figures(environ, name: str, default: tuple[float, float]) -> tuple[float, float]:
    """Two figures a test set (``name`` = "A,B"), else the seed's."""
    text = environ.get(name)
    if not text:
        return default
    a, b = (float(x) for x in text.split(","))
    return a, b


def faults(environ) -> set[str]:
    named = {f.strip() for f in environ.get("MINFER_STANDIN_FAULT", "").split(",") if f.strip()}
    unknown = named - set(FAULTS)
    if unknown:
        sys.exit(f"minfer-standin: unknown MINFER_STANDIN_FAULT {', '.join(sorted(unknown))}; "
                 f"known: {', '.join(FAULTS)}")
    return named


def gate_on(environ, name: str) -> bool:
    # seed 002: `std::env::var("MINFER_MMQ_Q6K_EXP").as_deref() != Ok("0")` — unset means on
    return environ.get(name) != "0"


def nb_on(environ, planted: set[str]) -> bool:
    if "opt-in-nb" in planted:  # the pre-r60 opt-in gate
        return environ.get("MINFER_MMQ_Q6K_NB") == "1"
    return gate_on(environ, "MINFER_MMQ_Q6K_NB")


def revision_number(environ) -> int:
    return int(environ.get("MINFER_STANDIN_REVISION", "r54")[1:])


class Weights:
    """The 27 q6_K tensors as ql (4 low bits) and qh (2 high bits) per element, from a fixed seed."""

    def __init__(self):
        rng = random.Random(54)
        self.ql = [[rng.randrange(16) for _ in range(OD * ID)] for _ in range(LAUNCHES)]
        self.qh = [[rng.randrange(4) for _ in range(OD * ID)] for _ in range(LAUNCHES)]

    def expand(self, t: int, center: int = 32) -> list[int]:
        # the seed's v = ((ql >> qsh) & 0xF) | (((qh >> qh_shift) & 3) << 4) - 32, per element
        return [(lo | (hi << 4)) - center for lo, hi in zip(self.ql[t], self.qh[t])]


def register(environ, planted: set[str], loud: bool = True) -> tuple[dict[int, int], set[int], dict[int, bool]]:
    """(the plane map, the pointers of the planes built, padded per tensor), as seed 002 §3.2."""
    padded = {t: "unpadded" not in planted for t in range(LAUNCHES)}
    exp_gate = gate_on(environ, "MINFER_MMQ_Q6K_EXP") or "exp-ignored" in planted
    planes: dict[int, int] = {}
    built: set[int] = set()
    for t in range(LAUNCHES):
        weight_ptr, plane_ptr = 0x1000 + t, 0x9000 + t
        if not (nb_on(environ, planted) and exp_gate and padded[t] and ID % 256 == 0):
            continue
        if "alloc-fail" in planted and t == LAUNCHES - 1:
            if loud:
                print(f"minfer-standin: plane allocation failed for tensor {t} (planted fault alloc-fail); "
                      "its launches take the in-kernel expansion", file=sys.stderr)
            continue
        built.add(plane_ptr)
        planes[plane_ptr if "wrong-map-key" in planted else weight_ptr] = plane_ptr
    return planes, built, padded


def footprint_mib(environ) -> int:
    """The device memory a pass holds, from what registration built (read by tests/standin/nvidia-smi)."""
    _, built, _ = register(environ, faults(environ), loud=False)
    share = len(built) / LAUNCHES
    dsc = DSC_MIB if revision_number(environ) >= 56 else 0  # r56: the W_dsc plane rides the same gate
    base, plane = figures(environ, "MINFER_STANDIN_MIB", (BASE_MIB, PLANE_MIB))
    return round(base + share * (plane + dsc))



def label(w_exp_hit: bool, padded: bool, environ) -> str:
    # seed 002 §3.2, the B path's label, rule for rule
    if w_exp_hit:
        return "W_exp-cp.async"
    if not padded:
        return "in-kernel-expand"
    if environ.get("MINFER_MMQ_Q6K_EXP") == "0":
        return "in-kernel-expand(exp=off)"
    return "in-kernel-expand(fallback!)"


def prefill(environ, planted: set[str]) -> tuple[list[int], bool, list[str]]:
    """One whole prefill: 27 launches; returns (greedy tokens, every launch took the fast path, the
    launches as tracer-harness lines)."""
    weights = Weights()
    planes, _, padded = register(environ, planted)
    plane_data = {0x9000 + t: weights.expand(t, center=0 if "bad-math" in planted else 32)
                  for t in range(LAUNCHES)}
    debug = environ.get("MINFER_MMQ_RAW_NB_DEBUG") == "1"
    x = [(i * 7 + 3) % 17 - 8 for i in range(ID)]
    tokens, all_fast, launches = [], True, []
    nb = nb_on(environ, planted)  # off: another kernel (same values), no q6_K label
    for t in range(LAUNCHES):
        plane = planes.get(0x1000 + t)  # dispatch looks up by the padded weight's pointer
        b = plane_data[plane] if plane is not None else weights.expand(t)
        all_fast &= plane is not None
        launches.append(launch_line(environ, t, plane is not None, nb))  # what a traced pass hands the tracer
        if debug and nb:
            print(f"[mmq_raw_nb] q6_K launch {t}: KDR=2 A-transpose B={label(plane is not None, padded[t], environ)}",
                  file=sys.stderr)
        y = [sum(b[r * ID + c] * x[c] for c in range(ID)) for r in range(OD)]
        best = max(range(OD), key=lambda r: y[r])
        tokens.append((best * 10007 + y[best]) % VOCAB)
        x = x[1:] + [(y[best] % 17) - 8]  # the next launch reads this one's output
    return tokens, all_fast, launches


def launch_line(environ, t: int, hit: bool, nb: bool) -> str:
    """One kernel execution for the tracer harness: name, grid, GPU time in ns."""
    fast, slow = (ATTN_V_MS if t < ATTN_V_LAUNCHES else
                  figures(environ, "MINFER_STANDIN_KERNEL_MS", (KERNEL_MS_FAST, KERNEL_MS_SLOW)))
    grid_y = 4 if t < ATTN_V_LAUNCHES else 28
    name = (Q6K_FAST if hit else Q6K_SLOW) if nb else F16_FALLBACK
    return f"{name} 52 {grid_y} 1 {round((fast if hit else slow) * 1e6)}\n"


def hold(environ) -> None:
    """Hold the simulated memory HOLD_S seconds, or until the stand-in nvidia-smi has read it."""
    deadline = time.monotonic() + float(environ.get("MINFER_STANDIN_HOLD_S", "0"))
    mark = environ.get("MINFER_STANDIN_READ_MARK")
    read = f"{mark}.{os.getpid()}" if mark else None
    while time.monotonic() < deadline:
        if read and os.path.exists(read):
            return
        time.sleep(0.01)


def main() -> int:
    environ = os.environ
    planted = faults(environ)
    if environ.get("LAWBENCH_MINFER_PROBE") == "revision" and "no-probe" not in planted:
        probe = {"minfer_revision": environ.get("MINFER_STANDIN_REVISION", "r54"),
                 "minfer_contract": CONTRACT + ("future-contract" in planted)}
        if environ.get("MINFER_STANDIN_COMMIT"):  # the optional build commit (contract §4)
            probe["minfer_commit"] = environ["MINFER_STANDIN_COMMIT"]
        print(json.dumps(probe))
        return 0
    print("minfer-standin: loading 27 q6_K tensors", file=sys.stderr)
    if "hang" in planted:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        pidfile = environ.get("MINFER_STANDIN_PIDFILE")
        if pidfile:
            with open(pidfile, "w", encoding="utf-8") as f:
                f.write(str(child.pid))
        time.sleep(120)
    tokens, all_fast, launches = prefill(environ, planted)
    hold(environ)
    traced = environ.get("CUDA_INJECTION64_PATH") and environ.get("LAWBENCH_KERNEL_TRACE_OUT")
    harness = environ.get("MINFER_STANDIN_TRACE_HARNESS")
    if traced and harness and "no-trace" not in planted and "crash" not in planted:
        subprocess.run([harness], input="".join(launches), text=True, check=True,
                       env={"LAWBENCH_KERNEL_TRACE_OUT": environ["LAWBENCH_KERNEL_TRACE_OUT"]})
    if "crash" in planted:
        print("minfer-standin: planted fault crash, exiting with status 3", file=sys.stderr)
        return 3
    if "no-rate" not in planted:
        fast, slow = figures(environ, "MINFER_STANDIN_RATES", (RATE_FAST, RATE_SLOW))
        print(json.dumps({"prefill_tok_s": fast if all_fast else slow}))
    print(json.dumps({"greedy_tokens": tokens}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
