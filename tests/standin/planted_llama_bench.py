"""A --llama-dir stand-in that plants faults into a real llama-bench: it runs the real binary (its
path in REAL_LLAMA_BENCH beside this script's wrapper) with the same arguments and rewrites what it
printed, as told by `planted.json` in the wrapper's folder (absent: a faithful pass-through):

  {"slow": {"Q4_0": 0.6}}      every test of a model whose type names Q4_0 ran at 0.6 x its speed
                               (avg_ts / samples_ts scaled, avg_ns / samples_ns divided): a 40 % slowdown.
                               A K-quant with a size letter is matched as llama-bench spells its type:
                               "Q4_K_M" is "Q4_K - Medium"
  {"slow_files": {"NAME": 0.6}}  the same for a model whose file name contains NAME (one model, not a format)
  {"slow_every": [2, 0.6]}     every 2nd invocation that runs a model (counted in `invocations` beside
                               planted.json) ran at 0.6 x its speed: a run-to-run instability
  {"slow_when": [["-ub", "128"], 0.5]}  every run given `-ub 128` ran at 0.5 x its speed (one setting of
                               a case parameter, not a model: a cliff in a sweep)
  {"neighbour": ["Q2_K", 0.6]}  every test of a Q2_K model ran at 0.6 x its speed until a model of another
                               format has run after it (state in `neighbour` beside planted.json): a
                               neighbour on the box beside one anchor, gone when the night moves on
  {"drop": ["repack"]}         stderr lines containing "repack" are not printed: a load-log label is lost
  {"args": ["--repack", "0"]}  appended to the real llama-bench's arguments (an engine switch turned)

make_wrapper(folder, real_bin) builds such a --llama-dir: every real tool and library linked, and
llama-bench replaced by a shell script that runs this file with the real llama-bench.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


_SIZES = {"S": "Small", "M": "Medium", "L": "Large"}


def type_name(fmt: str) -> str:
    """How llama-bench's model_type (llama.cpp's file-type name) spells a format: "Q4_K_M" is
    "Q4_K - Medium". Matching "Q4_K_M" against it as written never matched, and a 2026-12-07
    H100 trial planted Q4_K_M nights that ran unplanted."""
    m = re.fullmatch(r"(Q\d_K)_([SML])", fmt.strip().upper())
    return f"{m[1]} - {_SIZES[m[2]]}" if m else fmt


def _scale(rec: dict, slow: dict, slow_files: dict) -> dict:
    kind, name = str(rec.get("model_type", "")), str(rec.get("model_filename", ""))
    factors = [f for fmt, f in slow.items() if type_name(fmt).lower() in kind.lower()] + \
        [f for part, f in slow_files.items() if part in name]
    for factor in factors:
        for key in ("avg_ts", "stddev_ts"):
            if isinstance(rec.get(key), (int, float)):
                rec[key] = rec[key] * factor
        if isinstance(rec.get("samples_ts"), list):
            rec["samples_ts"] = [v * factor for v in rec["samples_ts"]]
        for key in ("avg_ns", "stddev_ns"):
            if isinstance(rec.get(key), (int, float)):
                rec[key] = int(rec[key] / factor)
        if isinstance(rec.get("samples_ns"), list):
            rec["samples_ns"] = [int(v / factor) for v in rec["samples_ns"]]
    return rec


def main() -> int:
    real, args = sys.argv[1], sys.argv[2:]
    plan_file = Path(os.environ.get("PLANTED_DIR", Path(real).parent)) / "planted.json"
    plan = json.loads(plan_file.read_text(encoding="utf-8")) if plan_file.is_file() else {}
    args = [*args, *(str(a) for a in plan.get("args") or [])]
    proc = subprocess.Popen([real, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    out, err = proc.communicate()
    drop = plan.get("drop") or []
    sys.stderr.write("".join(line for line in err.splitlines(keepends=True)
                             if not any(d.lower() in line.lower() for d in drop)))
    slow, slow_files = plan.get("slow") or {}, plan.get("slow_files") or {}
    if plan.get("slow_every") and ("-m" in args or "--model" in args):
        every, factor = plan["slow_every"]
        counter = plan_file.parent / "invocations"
        n = int(counter.read_text(encoding="utf-8")) + 1 if counter.is_file() else 1
        counter.write_text(str(n), encoding="utf-8")
        if n % int(every) == 0:
            slow = {**slow, "": float(factor)}  # "" is in every model type: this whole run
    if plan.get("slow_when"):
        (flag, value), factor = plan["slow_when"]
        if any(a == flag and b == str(value) for a, b in zip(args, args[1:])):
            slow = {**slow, "": float(factor)}
    if plan.get("neighbour") and out.strip():
        fmt, factor = plan["neighbour"]
        slow = _neighbour(plan_file.parent / "neighbour", type_name(fmt), out, slow, float(factor))
    if (slow or slow_files) and out.strip():
        text = out.strip()
        if text.startswith("["):
            out = json.dumps([_scale(r, slow, slow_files) for r in json.loads(text)]) + "\n"
        else:
            out = "".join(json.dumps(_scale(json.loads(line), slow, slow_files)) + "\n"
                          if line.strip().startswith("{") else line + "\n" for line in text.splitlines())
    sys.stdout.write(out)
    return proc.returncode


def _neighbour(state: Path, kind: str, out: str, slow: dict, factor: float) -> dict:
    """The neighbour plant: this run slowed while the neighbour is there (``state``: "" before the
    format first ran, "seen" while it runs, "left" once another format ran after it)."""
    types = re.findall(r'"model_type"\s*:\s*"([^"]*)"', out)
    if not types:
        return slow
    now = state.read_text(encoding="utf-8") if state.is_file() else ""
    ours = any(kind.lower() in t.lower() for t in types)
    if ours and now != "left":
        state.write_text("seen", encoding="utf-8")
        return {**slow, kind: factor}
    if not ours and now == "seen":
        state.write_text("left", encoding="utf-8")
    return slow


def make_wrapper(folder: Path, real_bin: Path) -> Path:
    """A --llama-dir whose llama-bench plants what folder/planted.json says; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in real_bin.iterdir():
        if tool.name != "llama-bench" and not (folder / tool.name).exists():
            (folder / tool.name).symlink_to(tool)
    script = folder / "llama-bench"
    script.write_text(f'#!/bin/sh\nPLANTED_DIR="{folder}" exec "{sys.executable}" "{Path(__file__).resolve()}" '
                      f'"{real_bin / "llama-bench"}" "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    return folder


if __name__ == "__main__":
    sys.exit(main())
