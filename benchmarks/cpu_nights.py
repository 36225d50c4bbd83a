"""Real unplanted nights of the cpu profile into one history, then the rate gate's proof on them
(issue 31): how often the gate says `slower` / `faster` on a real night nothing was planted on (the
≤ 1 % per runner-night goal), and what `lawbench gate prove` detects when one format's rates are
planted X % slower. Last, one real night whose llama-bench reports one format slower than it ran
(the planting wrapper of the tests, tests/standin/planted_llama_bench.py), judged by the real gate.

    python benchmarks/cpu_nights.py --nights 8 --out /tmp/cpu-nights \\
        [-k "law4.cpu.l15 or law4.cpu.v11 or law4.cpu.agree"] [--plant Q4_K:10] [--llama-dir DIR]

Each night is `lawbench run --profile cpu -k SELECT --gate baseline --baseline OUT/history.sqlite
--no-history --out OUT/night-N` (the first: --first-night), through the wrapper with nothing
planted (a pass-through, so every night and the planted one run the same engine key), then
`lawbench history import --db OUT/history.sqlite OUT/night-N/run.json`, as the collect step files
a night. After the N nights: `lawbench gate prove --profile cpu --baseline OUT/history.sqlite`,
twice (OUT/prove-1.txt, OUT/prove-2.txt: the same history must give the same table). The planted
night (OUT/planted) is judged against the N nights and never imported.

Timed figures: run with nothing else on the machine. OUT/nights.md gets one row per night.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SELECT = "law4.cpu.l15 or law4.cpu.v11 or law4.cpu.agree"


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def night(out: Path, history: Path, select: str, llama_dir: Path, first: bool) -> dict:
    """One night: the run judged against ``history`` (not appended); returns its row."""
    base = ["--first-night"] if first else ["--baseline", str(history)]
    out.mkdir(parents=True)
    t0 = time.monotonic()
    proc = subprocess.run([str(BIN / "lawbench"), "run", "--profile", "cpu", "-k", select, "--llama-dir",
                           str(llama_dir), "--gate", "baseline", *base, "--no-history", "--out", str(out)],
                          capture_output=True, text=True, env=_env(), timeout=3600)
    wall = time.monotonic() - t0
    (out / "stdout.txt").write_text(proc.stdout + proc.stderr)
    if not (out / "run.json").is_file():
        raise SystemExit(f"no record in {out} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    rec = json.loads((out / "run.json").read_text())
    gate = rec.get("gate") or {}
    red = [f"{n['anchor_id']}: {n['kind']}" + (f" {n['size']:+.1%}" if n.get("size") is not None else "")
           for n in gate.get("news", []) if n["acknowledged_until"] is None and n["kind"] not in
           ("void-once", "recovered", "not-run", "faster")]
    rates = [r for res in rec["results"] for r in res.get("rates") or [] if r.get("measured")]
    verdicts: dict[str, int] = {}
    for res in rec["results"]:
        verdicts[res["verdict"]] = verdicts.get(res["verdict"], 0) + 1
    return {"run_id": rec["run_id"], "rc": proc.returncode, "wall_s": round(wall), "gate": gate.get("verdict"),
            "red": red, "faster": [n["why"] for n in gate.get("news", []) if n["kind"] == "faster"],
            "series": len(rates), "unanalysed": len(gate.get("rates_unanalysed") or []),
            "baseline_runs": gate.get("baseline_runs"), "verdicts": verdicts}


def _row(label: str, r: dict) -> str:
    v = ", ".join(f"{k} {n}" for k, n in sorted(r["verdicts"].items()))
    return (f"| {label} | {r['run_id'][:12]} | {r['wall_s']} | {r['rc']} | {r['gate']} | {r['baseline_runs']} | "
            f"{r['series']} | {r['unanalysed']} | {v} | {'; '.join(r['red']) or '-'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=8)
    ap.add_argument("-k", dest="select", default=SELECT)
    ap.add_argument("--out", required=True, help="a new folder")
    ap.add_argument("--llama-dir", help="the real llama.cpp bin folder (default: the cached b11434 build)")
    ap.add_argument("--plant", default="", metavar="FORMAT:PCT",
                    help="after the nights, one night with FORMAT reported PCT %% slower (llama-bench's "
                         "model_type names the format: Q4_K for Q4_K_M)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=False)
    if args.llama_dir:
        real = Path(args.llama_dir)
    else:
        from lawbench.core.engines.build import build_llamacpp

        real = Path(build_llamacpp(progress=None).bin_dir)
    sys.path.insert(0, str(ROOT / "tests"))
    from standin.planted_llama_bench import make_wrapper

    wrapper = make_wrapper(out / "llama", real)
    history = out / "history.sqlite"
    table = out / "nights.md"
    table.write_text(f"select: `{args.select}`; engine {real}\n\n"
                     "| night | run | wall s | exit | gate | accepted before | rate series | cannot analyse | "
                     "verdicts | red |\n|---|---|---|---|---|---|---|---|---|---|\n")
    for n in range(1, args.nights + 1):
        r = night(out / f"night-{n}", history, args.select, wrapper, first=n == 1)
        imp = subprocess.run([str(BIN / "lawbench"), "history", "import", "--db", str(history),
                              str(out / f"night-{n}" / "run.json")], capture_output=True, text=True, env=_env())
        if imp.returncode != 0:
            print(imp.stdout + imp.stderr, file=sys.stderr)
            return 1
        line = _row(str(n), r)
        print(line, flush=True)
        with table.open("a") as fh:
            fh.write(line + "\n")
    for i in (1, 2):
        p = subprocess.run([str(BIN / "lawbench"), "gate", "prove", "--profile", "cpu", "--baseline", str(history)],
                           capture_output=True, text=True, env=_env())
        (out / f"prove-{i}.txt").write_text(p.stdout + p.stderr + f"exit {p.returncode}\n")
        print(p.stdout + p.stderr + f"exit {p.returncode}", flush=True)
    if args.plant:
        fmt, _, pct = args.plant.partition(":")
        (wrapper / "planted.json").write_text(json.dumps({"slow": {fmt: 1.0 - float(pct) / 100.0}}))
        shutil.copy(history, out / "history-before-plant.sqlite")  # judged against, never appended
        r = night(out / "planted", out / "history-before-plant.sqlite", args.select, wrapper, first=False)
        (wrapper / "planted.json").unlink()
        line = _row(f"planted {fmt} -{pct} %", r)
        print(line, flush=True)
        with table.open("a") as fh:
            fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
