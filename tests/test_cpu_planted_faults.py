"""The generic cpu profile's quick run turns red, naming the anchor, when a planted fault breaks a
claim it makes — through a real `--llama-dir`: the real llama.cpp build behind a wrapper llama-bench.

- decode of one Q4_0 model reported 40 % slower than it ran: the within-format anchor (L-15) on that
  model leaves L-01's ±25 % and FAILs;
- CPU_REPACK forced off (llama-bench --repack 0 appended): the repack census FAILs.

A slowdown of every Q4_0 file alike is not such a fault on this profile: L-15 makes η the format's,
and the cpu profile calibrates it in the run, so it cancels in every within-format ratio (the last
test shows that, so that nobody mistakes it for coverage).
"""
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli

from _engine_fixtures import llama  # noqa: F401  (the real cached build)

pytestmark = pytest.mark.integration

WRAPPER = textwrap.dedent('''\
    #!{python}
    """llama-bench, then its JSON records rewritten: decode of files named in $SLOW_MODELS at 0.6 x."""
    import json, os, subprocess, sys
    real = {real!r}
    args = sys.argv[1:] + os.environ.get("EXTRA_BENCH_ARGS", "").split()
    slow = [s for s in os.environ.get("SLOW_MODELS", "").split(":") if s]
    p = subprocess.run([real, *args], stdout=subprocess.PIPE)
    for line in p.stdout.decode().splitlines(keepends=True):
        try:
            rec = json.loads(line)
        except ValueError:
            sys.stdout.write(line)
            continue
        if isinstance(rec, dict) and rec.get("n_gen") and any(s in rec.get("model_filename", "") for s in slow):
            rec["samples_ts"] = [v * 0.6 for v in rec["samples_ts"]]
            rec["avg_ts"] *= 0.6
            rec["stddev_ts"] *= 0.6
            rec["samples_ns"] = [v / 0.6 for v in rec["samples_ns"]]
            rec["avg_ns"] /= 0.6
        sys.stdout.write(json.dumps(rec) + "\\n")
    sys.exit(p.returncode)
    ''')


@pytest.fixture(scope="module")
def wrapped(llama, tmp_path_factory):  # noqa: F811
    """A --llama-dir folder: the real build's tools, llama-bench behind the rewriting wrapper."""
    folder = tmp_path_factory.mktemp("wrapped-llama")
    for tool in Path(llama.bin_dir).iterdir():
        if tool.name != "llama-bench":
            (folder / tool.name).symlink_to(tool)
    bench = folder / "llama-bench"
    bench.write_text(WRAPPER.format(python=sys.executable, real=str(llama.llama_bench)))
    bench.chmod(0o755)
    return folder


def _run(args, env, cwd):
    p = run_cli(["run", "--profile", "cpu", "--no-history", *args], env, cwd)
    record = json.loads((cwd / "out" / "run.json").read_text()) if (cwd / "out" / "run.json").is_file() else None
    return p, record


def _verdicts(record):
    return {r["anchor_id"]: r["verdict"] for r in record["results"] if not r["detail"].get("history")}


def _env(tmp_path, **extra):
    env = dict(os.environ, **extra)
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def test_one_q4_0_model_reported_40_percent_slower_fails_its_l15_anchor(wrapped, tmp_path):
    from lawbench.core.store.real import ModelStore

    held_out = ModelStore().path("syn-100m-q4_0").name
    env = _env(tmp_path, SLOW_MODELS=held_out)
    p, record = _run(["-k", "l15.syn-100m-q4_0", "--llama-dir", str(wrapped), "--out", "out"], env, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert _verdicts(record) == {"law4.cpu.l15.syn-100m-q4_0": "FAIL"}
    assert "law4.cpu.l15.syn-100m-q4_0" in p.stdout


def test_repack_forced_off_fails_the_census(wrapped, tmp_path):
    env = _env(tmp_path, EXTRA_BENCH_ARGS="--repack 0")
    p, record = _run(["-k", "census.q4_0-repack", "--llama-dir", str(wrapped), "--out", "out"], env, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert _verdicts(record) == {"law4.cpu.census.q4_0-repack": "FAIL"}
    reason = next(r["reason"] for r in record["results"] if r["anchor_id"] == "law4.cpu.census.q4_0-repack")
    assert "repacked_tensors" in reason


def test_the_same_wrapper_unplanted_passes(wrapped, tmp_path):
    # The control: the wrapper itself changes nothing, so the red above is the planted fault's.
    p, record = _run(["-k", "census.q4_0-repack or l15.syn-100m-q4_0", "--llama-dir", str(wrapped),
                      "--out", "out"], _env(tmp_path), tmp_path)
    assert _verdicts(record) == {"law4.cpu.census.q4_0-repack": "PASS", "law4.cpu.l15.syn-100m-q4_0": "PASS"}, \
        p.stdout + p.stderr


def test_every_q4_0_file_alike_40_percent_slower_cancels_under_l15(wrapped, tmp_path):
    # Both arms are Q4_0: a format-wide slowdown is a different η for Q4_0 on this machine, which
    # L-15 allows and the run calibrates. The within-format claim still holds; a baseline gate
    # (the runner's last accepted night) or the census is what sees a lost fast path.
    from lawbench.core.store.real import ModelStore

    both = ":".join(ModelStore().path(m).name for m in ("syn-100m-q4_0", "syn-400m-q4_0"))
    p, record = _run(["-k", "l15.syn-100m-q4_0", "--llama-dir", str(wrapped), "--out", "out"],
                     _env(tmp_path, SLOW_MODELS=both), tmp_path)
    assert _verdicts(record) == {"law4.cpu.l15.syn-100m-q4_0": "PASS"}, p.stdout + p.stderr
