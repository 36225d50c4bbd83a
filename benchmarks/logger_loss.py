"""How often does llama.cpp's common logger lose a tool's last lines at exit, and does lawbench's
re-run cure it? Real llama-batched-bench on a tiny synthetic model, the real cached build.

    python benchmarks/logger_loss.py              # 200 bare runs, then 200 through run_batched
    python benchmarks/logger_loss.py --runs 500 --verbose    # -v: the load log through the logger too

The logger prints from a worker thread that is never joined (common/log.cpp, ggml-org/llama.cpp
#22142), so lines still queued when main returns die with the process, and the process exits 0.
Printed: of the bare runs (run_process, the tool's own command with one reading and its trailing
cell), how many came back with 2, 1 or 0 records; of the runs through
lawbench.core.engines.batched.run_batched, how many needed a re-run and how many still failed.
Exit 0 when no run_batched call failed, else 1.
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

from lawbench.core.engines.batched import batched_command, parse_jsonl, run_batched
from lawbench.core.engines.tool_run import run_process
from lawbench.core.engines.build import build_llamacpp
from lawbench.core.errors import EngineError
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic

TINY = SyntheticSpec(id="tiny", n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2,
                     n_vocab=512, context_length=512)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="runs of each kind (default 200)")
    ap.add_argument("--verbose", action="store_true", help="run the tool with -v (more queued lines)")
    args = ap.parse_args(argv)
    llama = build_llamacpp(progress=None)
    with tempfile.TemporaryDirectory() as tmp:
        model = build_synthetic(TINY, cache_dir=Path(tmp))
        params = dict(n_gen=32, repetitions=1, threads=1, n_gpu_layers=0, verbose=args.verbose)
        cmd = batched_command(llama, model, **params)
        bare: collections.Counter = collections.Counter()
        t0 = time.monotonic()
        for _ in range(args.runs):
            p = run_process(cmd, 60)
            bare["exit %s" % p.returncode if p.returncode else len(parse_jsonl(p.stdout))] += 1
        bare_s = time.monotonic() - t0
        rerun: collections.Counter = collections.Counter()
        failed = []
        t0 = time.monotonic()
        for _ in range(args.runs):
            try:
                rerun[run_batched(llama, model, timeout_s=60, **params).lost_runs] += 1
            except EngineError as exc:
                failed.append(str(exc))
        cured_s = time.monotonic() - t0
    print(f"llama.cpp {llama.version}; model {model.name}; command: {' '.join(cmd[1:])}")
    print(f"bare runs ({bare_s:.1f} s): records printed (2 expected: a reading and its trailing cell)")
    for key, n in sorted(bare.items(), key=lambda kv: str(kv[0]), reverse=True):
        print(f"  {key}: {n} of {args.runs}")
    print(f"run_batched ({cured_s:.1f} s): re-runs needed per call")
    for key, n in sorted(rerun.items()):
        print(f"  {key}: {n} of {args.runs}")
    print(f"  failed: {len(failed)} of {args.runs}")
    for msg in failed[:3]:
        print(f"    {msg[:300]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
