"""The generic cpu profile's quick run turns red, naming the anchor, when a planted fault breaks a
claim it makes — through a real `--llama-dir`: the real llama.cpp build behind a wrapper llama-bench.

- decode of one Q4_0 model reported 40 % slower than it ran: the within-format anchor (L-15) on that
  model leaves L-01's ±25 % and FAILs;
- CPU_REPACK forced off (llama-bench --repack 0 appended): the repack census FAILs;
- the same wrapper with nothing planted changes nothing (the control: the reds are the faults').

A slowdown of every Q4_0 file alike is not such a fault on this profile: L-15 makes η the format's,
and the cpu profile calibrates it in the run, so it cancels in every within-format ratio (shown, so
that nobody mistakes it for coverage).

Only the census is run here. The rest is read from the real nights of tests/test_nightly_gate.py
(test_the_planted_faults_of_the_quick_run_turn_it_red_and_nothing_else_does), which run this
profile's quick anchors through the same wrapper: night 1 unplanted, night 2 every Q4_0 file
slower, night 3 the one slow model. One real run of the L-15 anchor costs a minute or two, so a
verdict is not bought twice.
"""
import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

from _engine_fixtures import llama  # noqa: F401  (the real cached build)
from standin.planted_llama_bench import make_wrapper

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def wrapped(llama, tmp_path_factory):  # noqa: F811
    """A --llama-dir folder: the real build's tools, llama-bench behind the planting stand-in
    (tests/standin/planted_llama_bench.py; what it plants is written to planted.json per test)."""
    return make_wrapper(tmp_path_factory.mktemp("wrapped-llama"), Path(llama.bin_dir))


def _plant(wrapped, planted: dict) -> None:
    (wrapped / "planted.json").write_text(json.dumps(planted), encoding="utf-8")


def _run(args, env, cwd):
    p = run_cli(["run", "--profile", "cpu", "--no-history", *args], env, cwd)
    record = json.loads((cwd / "out" / "run.json").read_text(encoding="utf-8")) if (cwd / "out" / "run.json").is_file() else None
    return p, record


def _verdicts(record):
    return {r["anchor_id"]: r["verdict"] for r in record["results"] if not r["retired"]}


def _env(tmp_path):
    env = dict(os.environ)
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def test_repack_forced_off_fails_the_census(wrapped, tmp_path):
    _plant(wrapped, {"args": ["--repack", "0"]})
    p, record = _run(["-k", "census.q4_0-repack", "--llama-dir", str(wrapped), "--out", "out"], _env(tmp_path), tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert _verdicts(record) == {"law4.cpu.census.q4_0-repack": "FAIL"}
    reason = next(r["reason"] for r in record["results"] if r["anchor_id"] == "law4.cpu.census.q4_0-repack")
    assert "repacked_tensors" in reason


def test_the_wrapper_plants_a_k_quant_by_the_name_llama_bench_gives_it(wrapped, llama):  # noqa: F811
    """A plant keyed "Q4_K_M" slows the Q4_K_M file (llama-bench types it "Q4_K - Medium") and no
    other: before the fix a Q4_K_M plant matched nothing, and planted GPU nights ran unplanted."""
    import subprocess

    from lawbench.core.laws.resources import Resources

    res = Resources(llama_dir=llama.bin_dir)
    try:
        files = {fmt: res.model(f"syn-25m-{fmt.lower()}") for fmt in ("Q4_K_M", "Q4_0")}
    finally:
        res.close()

    def tok_s(fmt: str, planted: dict) -> tuple[str, float]:
        _plant(wrapped, planted)
        out = subprocess.run([str(wrapped / "llama-bench"), "-m", str(files[fmt]), "-p", "0", "-n", "16", "-r", "2",
                              "-t", "1", "-o", "json"], capture_output=True, text=True, timeout=300, check=True).stdout
        rec = json.loads(out)[0]
        return rec["model_type"], rec["avg_ts"]

    kind, plain = tok_s("Q4_K_M", {})
    assert "Q4_K - Medium" in kind
    _, planted = tok_s("Q4_K_M", {"slow": {"Q4_K_M": 0.1}})
    _, other_plain = tok_s("Q4_0", {})
    _, other = tok_s("Q4_0", {"slow": {"Q4_K_M": 0.1}})
    _plant(wrapped, {})
    assert planted < 0.3 * plain  # 10x slower as reported, far outside the box's run-to-run scatter
    assert other > 0.3 * other_plain  # another format in the same plant is untouched
