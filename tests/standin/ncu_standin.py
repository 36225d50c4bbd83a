#!/usr/bin/env python3
"""A stand-in for Nsight Compute's ncu, for machines without a GPU: it takes ncu's options as
lawbench passes them, runs the profiled command for real (a child process with ncu's environment,
its output going where a profiled program's goes), then prints a real ncu CSV page:
results/h200/ncu-2026-12-07/ncu-metrics.csv (ncu 2025.3.1, llama.cpp's mul_mat_q on an H100).

It measures nothing. With NCU_STANDIN_KERNEL set, the recorded mul_mat_q launches are renamed to
that kernel (as `void <name><2, true>(…)`, grid y NCU_STANDIN_GRID_Y or kept) and given the cycles
of NCU_STANDIN_CYCLES "STALL,LATENCY" (default 13.7,16.0: r40's figures in 44-r41; "S,L;S,L;…" gives
each renamed launch its own, in turn): the row shape
stays ncu's own, only the kernel and the values are the test's.

  NCU_STANDIN_FAULT   perm: print ncu's ERR_NVGPUCTRPERM refusal and exit 1
                      empty: print nothing after the program's output
                      no-launch: print ncu's "No kernels were profiled" and no CSV
  NCU_STANDIN_ARGS    a file the stand-in writes its argv to (one JSON list)
"""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

RECORDED = Path(__file__).resolve().parents[2] / "results" / "h200" / "ncu-2026-12-07" / "ncu-metrics.csv"
WITH_VALUE = {"--print-units", "-k", "--kernel-name", "--metrics", "--launch-count", "-c", "--section",
              "--clock-control"}
PERM = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
        "Counters on the target device 0. For instructions on enabling permissions and to get more "
        "information see https://developer.nvidia.com/ERR_NVGPUCTRPERM")
STALL = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"


def program(argv: list[str]) -> list[str]:
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in WITH_VALUE else 1
    return argv[i:]


def page(kernel: str, grid_y: str, cycles: str) -> str:
    text = RECORDED.read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    header, body = rows[0], rows[1:]
    col = {name: header.index(name) for name in header}
    per_launch = [pair.split(",") for pair in cycles.split(";")]
    seen: list[str] = []
    for row in body:
        if not row[col["Kernel Name"]].startswith("void mul_mat_q<"):
            continue
        if row[col["ID"]] not in seen:
            seen.append(row[col["ID"]])
        stall, latency = per_launch[(len(seen) - 1) % len(per_launch)]
        row[col["Kernel Name"]] = f"void {kernel}<2, true>(const unsigned char *, float *, int, int, int)"
        if grid_y:
            x, _, z = row[col["Grid Size"]].strip("()").split(",")
            row[col["Grid Size"]] = f"({x.strip()}, {grid_y}, {z.strip()})"
        row[col["Metric Value"]] = stall if row[col["Metric Name"]] == STALL else latency
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header, *body])
    return out.getvalue()


def main() -> int:
    if os.environ.get("NCU_STANDIN_ARGS"):
        Path(os.environ["NCU_STANDIN_ARGS"]).write_text(json.dumps(sys.argv), encoding="utf-8")
    fault = os.environ.get("NCU_STANDIN_FAULT", "")
    cmd = program(sys.argv)
    print("==PROF== Connected to process (stand-in)", flush=True)
    if fault == "perm":
        print(PERM, flush=True)
        return 1
    done = subprocess.run(cmd, check=False)
    if done.returncode != 0:
        return done.returncode
    print("==PROF== Disconnected from process (stand-in)", flush=True)
    if fault == "empty":
        return 0
    if fault == "no-launch":
        print("==WARNING== No kernels were profiled.", flush=True)
        return 0
    kernel = os.environ.get("NCU_STANDIN_KERNEL")
    if kernel:
        sys.stdout.write(page(kernel, os.environ.get("NCU_STANDIN_GRID_Y", ""),
                              os.environ.get("NCU_STANDIN_CYCLES", "13.7,16.0")))
    else:
        text = RECORDED.read_text(encoding="utf-8")
        sys.stdout.write(text[text.index('"ID","Process ID"'):])
    return 0


if __name__ == "__main__":
    sys.exit(main())
