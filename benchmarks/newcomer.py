"""What a newcomer waits for: a fresh clone and an empty cache, `nox -s anchors` cold and again
warm, `nox -s tests` cold and warm — each phase's wall time and where it went.

    python benchmarks/newcomer.py                      # all four phases, in order
    python benchmarks/newcomer.py --only anchors-cold  # one phase (or several, comma-separated)
    python benchmarks/newcomer.py --json out.json      # the figures as data too

The clone is of this repository's committed HEAD (uncommitted edits are not in it) into a temp
folder, with LAWBENCH_CACHE in that folder, so nothing built or fetched before counts; a warm phase
reuses what its cold phase left there (run the cold one first, or both); tests-cold after the
anchors phases finds the llama.cpp build they left, as a newcomer's would. pip's own download cache
is the machine's (a newcomer's would be empty: the first install may take longer than measured).

Where the time went, from what the tools print as they run (every line is timestamped as it
arrives; the full timestamped log is kept beside the clone):
  anchors: nox's setup (virtualenv, install), `lawbench check`, and `lawbench run`, which is split
           into the llama.cpp build ("llama.cpp … built in N s", "added … in N s"), the models
           ("model … ready in N s") and the anchors themselves (the rest; per law from run.json).
  tests:   nox's setup, then pytest; per test file the sum of pytest's --durations (setup, call,
           teardown), asked for through PYTEST_ADDOPTS so the session runs exactly as it does in CI.

Run it on a quiet machine: every figure is wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Optional

PHASES = ("anchors-cold", "anchors-warm", "tests-cold", "tests-warm")
ROOT = Path(__file__).resolve().parent.parent

Line = tuple[float, str]  # seconds since the phase started, the line as printed

_BUILT = re.compile(r"^lawbench: llama\.cpp \S+ \(\w+\) built in (\d+(?:\.\d+)?) s")
_ADDED = re.compile(r"^lawbench: added (.+) to the llama\.cpp build in (\d+(?:\.\d+)?) s")
_MODEL = re.compile(r"^lawbench: model (\S+) ready in (\d+(?:\.\d+)?) s")
_NOX_CMD = re.compile(r"^nox > (\S+)(?: (\S+))?")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S+?)::")
_SUMMARY = re.compile(r"^=* ?(.*\b(?:passed|failed|error|errors|skipped|deselected)\b.*) in [\d.]+s")


@dataclass
class Phase:
    name: str
    wall_s: float
    exit_code: int
    setup_s: float = 0.0  # nox: virtualenv and install, until its first command
    check_s: float = 0.0  # anchors: `lawbench check`
    run_s: float = 0.0  # anchors: `lawbench run`; tests: pytest and the example tests
    build_s: float = 0.0
    built: list[str] = field(default_factory=list)  # what was compiled: "llama.cpp" and added tools
    models_s: float = 0.0
    models: dict[str, float] = field(default_factory=dict)
    anchors_s: float = 0.0
    per_law: dict[str, dict] = field(default_factory=dict)  # law -> {anchors, seconds, verdicts}
    per_file: dict[str, float] = field(default_factory=dict)  # test file -> seconds
    summaries: list[str] = field(default_factory=list)  # pytest's last line, per pytest run


def command_starts(lines: Iterable[Line]) -> list[tuple[float, str]]:
    """When nox started each command, by its program and first argument ("lawbench run")."""
    out = []
    for t, text in lines:
        m = _NOX_CMD.match(text)
        if m and not text.startswith(("nox > Running session", "nox > Session ", "nox > uv ",
                                      "nox > Creating virtual environment", "nox > Re-using existing")):
            out.append((t, " ".join(filter(None, m.groups()))))
    return out


def where_it_went(name: str, lines: list[Line], wall_s: float, exit_code: int) -> Phase:
    """A phase's time, split by what its output says happened when."""
    phase = Phase(name=name, wall_s=round(wall_s, 1), exit_code=exit_code)
    starts = command_starts(lines)
    # Setup is nox's virtualenv and its pip installs: until the first command that is not one.
    work = [t for t, what in starts if not what.startswith(("python -m", "pip"))]
    phase.setup_s = round(work[0] if work else wall_s, 1)
    marks = [t for t, _ in starts] + [wall_s]
    for (t, what), end in zip(starts, marks[1:]):
        if what == "lawbench check":
            phase.check_s += end - t
        elif what.startswith(("lawbench run", "pytest")):
            phase.run_s += end - t
    for _, text in lines:
        if m := _BUILT.match(text):
            phase.build_s += float(m.group(1))
            phase.built.append("llama.cpp")
        elif m := _ADDED.match(text):
            phase.build_s += float(m.group(2))
            phase.built.append(m.group(1))
        elif m := _MODEL.match(text):
            phase.models[m.group(1)] = phase.models.get(m.group(1), 0.0) + float(m.group(2))
        elif m := _DURATION.match(text):
            phase.per_file[m.group(3)] = phase.per_file.get(m.group(3), 0.0) + float(m.group(1))
        elif m := _SUMMARY.match(text):
            phase.summaries.append(m.group(1).strip())
    phase.models_s = sum(phase.models.values())
    if name.startswith("anchors"):
        phase.anchors_s = max(0.0, phase.run_s - phase.build_s - phase.models_s)
    for key in ("check_s", "run_s", "build_s", "models_s", "anchors_s"):
        setattr(phase, key, round(getattr(phase, key), 1))
    phase.per_file = {f: round(s, 2) for f, s in sorted(phase.per_file.items(), key=lambda kv: -kv[1])}
    return phase


def per_law(run_json: dict) -> dict[str, dict]:
    """Per law: how many anchors ran, their summed duration and their verdicts (run.json)."""
    out: dict[str, dict] = defaultdict(lambda: {"anchors": 0, "seconds": 0.0, "verdicts": {}})
    for r in run_json.get("results", []):
        law = out[r.get("law", "?")]
        law["anchors"] += 1
        law["seconds"] = round(law["seconds"] + float(r.get("duration_s") or 0.0), 1)
        v = str(r.get("verdict", "?"))
        if v == "FAIL" and isinstance(r.get("detail"), dict) and r["detail"].get("open_finding"):
            v = "open finding"  # an expected FAIL the build does not fail on (docs: open findings)
        law["verdicts"][v] = law["verdicts"].get(v, 0) + 1
    return dict(sorted(out.items()))


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s" if seconds >= 60 else f"{seconds:.1f} s"


def describe(phase: Phase, top: int = 15) -> str:
    """The phase for people: its total, then where it went."""
    rows = [f"{phase.name}: {minutes(phase.wall_s)} (exit {phase.exit_code})",
            f"  nox setup (virtualenv, install)  {minutes(phase.setup_s)}"]
    if phase.name.startswith("anchors"):
        rows += [f"  lawbench check                   {minutes(phase.check_s)}",
                 f"  lawbench run                     {minutes(phase.run_s)}",
                 f"    llama.cpp build                {minutes(phase.build_s)}"
                 + (f"  ({', '.join(phase.built)})" if phase.built else "  (cached)"),
                 f"    models                         {minutes(phase.models_s)}"
                 + (f"  ({len(phase.models)} made or fetched)" if phase.models else "  (cached)"),
                 f"    anchors                        {minutes(phase.anchors_s)}"]
        for law, d in phase.per_law.items():
            verdicts = ", ".join(f"{n} {v}" for v, n in sorted(d["verdicts"].items()))
            rows.append(f"      {law:<10} {d['anchors']:>3} anchors  {minutes(d['seconds']):>14}  {verdicts}")
    else:
        rows.append(f"  pytest (and the example tests)   {minutes(phase.run_s)}"
                    + (f"  [{' + '.join(phase.summaries)}]" if phase.summaries else ""))
        if phase.build_s:
            rows.append(f"    of which llama.cpp builds      {minutes(phase.build_s)}  ({', '.join(phase.built)})")
        for path, seconds in list(phase.per_file.items())[:top]:
            rows.append(f"    {seconds:8.1f} s  {path}")
        if len(phase.per_file) > top:
            rest = sum(list(phase.per_file.values())[top:])
            rows.append(f"    {rest:8.1f} s  the other {len(phase.per_file) - top} files")
    return "\n".join(rows)


# --------------------------------------------------------------------------- running a phase


def nox_command() -> list[str]:
    try:
        import nox  # noqa: F401

        return [sys.executable, "-m", "nox"]
    except ImportError:
        found = shutil.which("nox")
        if not found:
            sys.exit("newcomer: nox is not installed (python3 -m pip install nox)")
        return [found]


def run_timed(cmd: list[str], cwd: Path, env: dict, log: Path) -> tuple[list[Line], float, int]:
    """Run ``cmd``, stdout and stderr together, each line stamped with its arrival time."""
    lines: list[Line] = []
    started = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
        assert proc.stdout is not None
        for raw in proc.stdout:
            t = time.monotonic() - started
            text = raw.rstrip("\n")
            lines.append((t, text))
            out.write(f"[{t:8.1f}s] {text}\n")
            out.flush()
        code = proc.wait()
    return lines, time.monotonic() - started, code


def run_phase(name: str, clone: Path, env: dict, logs: Path, index: int = 1) -> Phase:
    session = name.split("-")[0]
    env = dict(env)
    if session == "tests":  # per-file durations, without changing the session's own arguments
        env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " --durations=0 --durations-min=0").strip()
    print(f"newcomer: {name}: nox -s {session} in {clone}", file=sys.stderr, flush=True)
    lines, wall, code = run_timed([*nox_command(), "-s", session], clone, env, logs / f"{index}-{name}.log")  # a phase may repeat
    phase = where_it_went(name, lines, wall, code)
    record = clone / "lawbench-out" / "run.json"
    if session == "anchors" and record.is_file():
        phase.per_law = per_law(json.loads(record.read_text(encoding="utf-8")))
    return phase


def fresh_clone(work: Path) -> Path:
    clone = work / "lawbench"
    if not clone.is_dir():
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    return clone


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PHASES),
                        help=f"comma-separated phases, in the order given, repeats allowed (of {', '.join(PHASES)})")
    parser.add_argument("--work", type=Path, default=None,
                        help="the folder for the clone, its cache and the logs (default: a new temp folder; "
                             "pass the same one to run a warm phase after its cold one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    phases = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        parser.error(f"--only: {', '.join(unknown)} not a phase (phases: {', '.join(PHASES)})")
    work = args.work or Path(tempfile.mkdtemp(prefix="lawbench-newcomer-"))
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    clone = fresh_clone(work)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "NOX_", "PYTEST_"))}
    env["LAWBENCH_CACHE"] = str(work / "cache")
    results = []
    for index, name in enumerate(phases, 1):
        phase = run_phase(name, clone, env, logs, index)
        results.append(phase)
        print(describe(phase), flush=True)
    print(f"newcomer: clone, cache and timestamped logs in {work}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in results], indent=2), encoding="utf-8")
    return max((p.exit_code for p in results), default=0)


if __name__ == "__main__":
    sys.exit(main())
