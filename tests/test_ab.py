"""`lawbench ab`: engine specs, bad input, the B/A interval, and real A/Bs of real llama.cpp builds.

Fast tests parse specs and compute intervals on known inputs; the CLI runs in a subprocess; the
second llama.cpp source is exercised end to end on a tiny real cmake project laid out like the
llama-cpp-python sdist. Integration tests run real A/Bs on the cached b11434 build (against itself)
and, when it is cached, against the llama.cpp that llama-cpp-python vendors.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from _engine_fixtures import llama, synth_dir, tiny_f16, write_script  # noqa: F401  (fixtures)
from test_bad_input_runtime import HERMETIC_PIP, Index
from test_engine_build import CMAKE, TOOL_CPP

from lawbench.core.record.ab_json import ABResult, as_result, gate_band
from lawbench.core.run.ab import (
    as_pairs,
    budget_for,
    is_speed_anchor,
    pair_ratios,
    ratio_interval,
    select_anchors,
)
from lawbench.core.engines.bench import run_bench
from lawbench.core.engines.build import build_llamacpp
from lawbench.core.engines.llamacpp import build_key
from lawbench.core.engines.sources import VendoredSource
from lawbench.core.engines.specs import parse_engine
from lawbench.core.engines.variants import apply_engine_options
from lawbench.core.errors import EngineError, UsageError
from lawbench.core.models import Sample, Verdict
from lawbench.core.stats.verdicts import classify, decide_sequential

VENDORED = "0.3.36"  # llama-cpp-python's sdist: vendor/llama.cpp at ggml-org/llama.cpp@0c1e57098
SMALL = "l15 and syn-100m-q4_0"  # one anchor whose subject decodes a 100M-parameter Q4_0 model
# The tests that check a path (a gate far from 1, two engines wired, an option refused), not a
# figure: one anchor whose subject decodes 16 tokens of syn-25m a repetition, ~10x cheaper a visit
TINY = "l15 and syn-25m-q4_0"


def lawbench(args: list[str], env: dict, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, encoding="utf-8")


@pytest.fixture
def env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_STEP_SUMMARY"))}


def one_line_error(p: subprocess.CompletedProcess, code: int) -> str:
    assert p.returncode == code, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("lawbench: error:")]
    assert len(errors) == 1, p.stderr
    return errors[0]


# --------------------------------------------------------------------------- engine specs


@pytest.mark.parametrize("text, kind, version, path, args, envs", [
    ("llama.cpp", "llama.cpp", "11434.0.0", None, (), ()),
    ("llama.cpp@4242.0.0", "llama.cpp", "4242.0.0", None, (), ()),
    ("llama-cpp-python@0.3.36", "llama-cpp-python", "0.3.36", None, (), ()),
    ("dir:/opt/llama/bin", "dir", None, "/opt/llama/bin", (), ()),
    ("llama.cpp+args=-fa 1", "llama.cpp", "11434.0.0", None, ("-fa", "1"), ()),
    ("llama.cpp@11434.0.0+args=--poll 0+env=GGML_X=1", "llama.cpp", "11434.0.0", None, ("--poll", "0"),
     (("GGML_X", "1"),)),
    ("dir:/b+env=A=1+env=B=x=y", "dir", None, "/b", (), (("A", "1"), ("B", "x=y"))),
])
def test_engine_specs_parse(text, kind, version, path, args, envs):
    spec = parse_engine(text)
    assert (spec.kind, spec.version, spec.path, spec.bench_args, spec.bench_env) == (kind, version, path, args, envs)


@pytest.mark.parametrize("text, words", [
    ("", "empty engine spec"),
    ("vllm@0.6", "unknown engine 'vllm@0.6'"),
    ("llama.cpp@latest", "does not start with a build number"),
    ("llama-cpp-python@", "is not a version"),
    ("llama-cpp-python@x.y", "is not a version"),
    ("dir:", "dir: needs a path"),
    ("llama.cpp+args=1", "+args= must start with a llama-bench option"),
    ("llama.cpp+args=-m other.gguf", "+args= cannot set -m"),
    ("llama.cpp+args=--repetitions 9", "+args= cannot set --repetitions"),
    ("llama.cpp+args=-fa 'on", "+args= cannot be split into words"),
    ("llama.cpp+env=1X=2", "+env= needs NAME=VALUE"),
    ("llama.cpp+env=NOVALUE", "+env= needs NAME=VALUE"),
])
def test_bad_engine_specs_are_one_usage_error_naming_the_option(text, words):
    with pytest.raises(UsageError) as err:
        parse_engine(text, "--b")
    message = str(err.value)
    assert message.startswith(f"--b {text!r}: ") and words in message and "\n" not in message, message


def test_engine_options_reach_the_command_and_clash_with_the_anchors_own():
    plain = type("L", (), {"bench_args": (), "bench_env": ()})()
    cmd = ["llama-bench", "-m", "x.gguf", "-t", "1", "-p", "0", "-n", "16"]
    assert apply_engine_options(plain, cmd, None) == (cmd, None)
    opt_out = type("L", (), {"bench_args": ("-fa", "1"), "bench_env": (("GGML_X", "1"),)})()
    assert apply_engine_options(opt_out, cmd, {"A": "2"}) == (cmd + ["-fa", "1"], {"A": "2", "GGML_X": "1"})
    clash = type("L", (), {"bench_args": ("--threads", "2"), "bench_env": ()})()
    with pytest.raises(EngineError, match=r"engine option --threads \(\+args=\) is already set"):
        apply_engine_options(clash, cmd, None)


# --------------------------------------------------------------------------- the interval


def pair(a: float, b: float, order: str = "ab") -> Sample:
    return Sample(value=a / b, arm="a/b", raw={"value_a": a, "value_b": b, "order": order})


def test_pairs_are_b_over_a_with_the_order_in_engine_letters():
    got = as_pairs([pair(100.0, 90.0, "ab"), pair(50.0, 60.0, "ba")])
    assert [s.value for s in got] == pytest.approx([0.9, 1.2])
    assert [s.raw["order"] for s in got] == ["AB", "BA"] and {s.arm for s in got} == {"B/A"}
    assert pair_ratios(got) == pytest.approx([0.9, 1.2])


def test_ratio_interval_on_known_inputs():
    # logs ±0.1 twice: mean 0, sd 0.11547 (n-1), t(0.975, 3) = 3.18245 -> half width 0.18375
    ratio, (lo, hi) = ratio_interval([math.exp(-0.1), math.exp(0.1)] * 2, 0.95)
    assert ratio == pytest.approx(1.0)
    assert (lo, hi) == (pytest.approx(math.exp(-0.18375), rel=1e-4), pytest.approx(math.exp(0.18375), rel=1e-4))
    assert ratio_interval([0.8, 0.8, 0.8], 0.95) == (pytest.approx(0.8), (pytest.approx(0.8), pytest.approx(0.8)))
    ratio, (lo, hi) = ratio_interval([0.5, 2.0, 1.0], 0.95)  # geometric mean 1; symmetric on logs
    assert ratio == pytest.approx(1.0) and lo * hi == pytest.approx(1.0) and lo < 0.3


def test_gate_decides_from_the_whole_interval_and_an_undecided_gate_is_void():
    assert classify((0.96, 1.10), gate_band(0.95)) is Verdict.PASS
    assert classify((0.80, 0.94), gate_band(0.95)) is Verdict.FAIL
    assert classify((0.90, 1.02), gate_band(0.95)) is None
    budget = budget_for(7, gated=True, timeout_s=60, confidence=0.95)
    straddling = iter([pair(100, 90), pair(100, 101)] * 10)
    decision = decide_sequential(lambda n: [next(straddling) for _ in range(n)], pair_ratios,
                                 gate_band(0.95), budget)
    assert decision.verdict is Verdict.VOID and len(decision.samples) == 7  # the pairs were spent
    clear = iter([pair(100, 99), pair(100, 101)] * 10)
    decision = decide_sequential(lambda n: [next(clear) for _ in range(n)], pair_ratios, gate_band(0.9), budget)
    assert decision.verdict is Verdict.PASS and len(decision.samples) == 4  # stopped at the first look
    assert budget_for(5, gated=False, timeout_s=60, confidence=0.95).min_samples == 5


def test_exit_code_passes_only_a_whole_measured_and_cleared_set():
    """An A/B's exit code is its run record's (RunRecord.finish, mode "ab"): 0 only when every
    anchor was measured and, with a gate, every interval cleared it."""
    from lawbench.core.record.reports import RunRecord

    def code(results: list[ABResult], gate=None) -> int:
        record = RunRecord.new("cpu", profile_matches=True, mode="ab")
        return record.finish([as_result(r.model_copy(update={"anchor_id": f"a{i}"}), "cpu", gate)
                              for i, r in enumerate(results)]).exit_code

    ok = ABResult(anchor_id="x", law="l", status="measured", gate="pass", ratio=1.0, interval=(0.97, 1.03))
    plain = ok.model_copy(update={"gate": None})
    assert code([ok], gate=0.95) == 0 and code([plain]) == 0
    assert code([ok, ok.model_copy(update={"gate": "unresolved", "interval": (0.9, 1.1)})], gate=0.95) == 1
    assert code([ok, ok.model_copy(update={"gate": "regression", "interval": (0.8, 0.9)})], gate=0.95) == 1
    assert code([plain, plain.model_copy(update={"status": "skip"})]) == 1
    assert code([]) == 1


def test_an_ab_result_is_a_run_record_result_and_back():
    """ab.json is a view of the run record: an A/B result survives the trip unchanged."""
    from lawbench.core.record.ab_json import ab_result_of

    r = ABResult(anchor_id="law4.cpu.l15.x", law="law4", subject="main", test="syn tg16", status="measured",
                 reason="ok", median_a=10.0, median_b=9.0, ratio=0.9, interval=(0.85, 0.95), confidence=0.95,
                 pairs=2, gate="regression", ratios=[0.9, 0.9], samples=as_pairs([pair(10, 9), pair(10, 9, "ba")]),
                 protocol={"visits": []}, duration_s=1.5)
    result = as_result(r, "cpu", 0.97)
    assert result.anchor_id == "law4.cpu.l15.x~ab" and result.verdict is Verdict.FAIL
    assert result.band == (0.97, math.inf) and result.measured == 0.9
    assert ab_result_of(result) == r


# --------------------------------------------------------------------------- selection


def test_selection_takes_speed_anchors_only():
    from lawbench.core.run.context import RunContext

    ctx = RunContext("cpu")
    got = select_anchors(ctx, SMALL)
    assert [la.anchor.id for la in got] == ["law4.cpu.l15.syn-100m-q4_0"]
    assert all(is_speed_anchor(la.anchor, ctx.registry.laws) for la in select_anchors(ctx, "agree"))
    with pytest.raises(UsageError, match="has no anchor that measures engine speed"):
        select_anchors(ctx, "census")
    with pytest.raises(UsageError, match="match the selection"):
        select_anchors(ctx, "no-such-anchor")
    with pytest.raises(UsageError, match="is not a selection expression"):
        select_anchors(ctx, "agree and (")


# --------------------------------------------------------------------------- bad input at the CLI


@pytest.mark.parametrize("args, words", [
    (["--b", "vllm@0.6"], "--b 'vllm@0.6': unknown engine"),
    (["--b", "llama.cpp", "-k", "census"], "has no anchor that measures engine speed"),
    (["--b", "llama.cpp", "-k", "nothing-like-this"], "match the selection"),
    (["--b", "llama.cpp", "--profile", "no-such-profile"], "no-such-profile"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, env, args, words):
    line = one_line_error(lawbench(["ab", *args, "--out", str(tmp_path)], env, tmp_path, timeout=120), 2)
    assert words in line
    assert not (tmp_path / "ab.json").exists()


def test_engine_build_of_a_bad_vendored_version_is_exit_2(tmp_path, env):
    line = one_line_error(lawbench(["engine", "build", "llama-cpp-python", "--version", "x.y"], env, tmp_path), 2)
    assert "--version 'x.y' is not a llama-cpp-python version" in line


def test_a_folder_without_llama_bench_is_exit_2_naming_it(tmp_path, env):
    empty = tmp_path / "empty-build"
    empty.mkdir()
    # --a is the folder, so nothing else is built first
    line = one_line_error(lawbench(["ab", "--a", f"dir:{empty}", "--b", "llama.cpp", "-k", SMALL,
                                    "--out", str(tmp_path)], env, tmp_path, timeout=120), 2)
    assert f"--a 'dir:{empty}'" in line and "lacks llama-bench" in line


def test_a_version_the_index_does_not_have_is_exit_2(tmp_path, env):
    index = Index("llama-cpp-python", {"llama_cpp_python-0.3.36.tar.gz": b"not used"})
    try:
        e = {**env, **HERMETIC_PIP, "LAWBENCH_PYPI_URL": index.url, "LAWBENCH_CACHE": str(tmp_path / "cache")}
        line = one_line_error(lawbench(["ab", "--a", "llama-cpp-python@0.0.999", "--b", "llama.cpp",
                                        "-k", SMALL, "--out", str(tmp_path)], e, tmp_path, timeout=180), 2)
    finally:
        index.close()
    assert "--a 'llama-cpp-python@0.0.999'" in line and "llama-cpp-python==0.0.999" in line


# --------------------------------------------------------------------------- the second source


def plant_vendored_sdist(cache: Path, version: str, commit: str, cmake_extra: str = "") -> None:
    """A real tar.gz laid out like llama-cpp-python's sdist: vendor/llama.cpp (a tiny cmake project
    whose tools print a version line) and the submodule's git HEAD."""
    top = cache / "_src" / f"llama_cpp_python-{version}"
    src = top / "vendor" / "llama.cpp"
    src.mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(CMAKE % cmake_extra, encoding="utf-8")
    (src / "tool.cpp").write_text(TOOL_CPP, encoding="utf-8")
    (src / ".git").write_text("gitdir: ../../.git/modules/vendor/llama.cpp\n", encoding="utf-8")
    head = top / ".git" / "modules" / "vendor" / "llama.cpp" / "HEAD"
    head.parent.mkdir(parents=True)
    head.write_text(commit + "\n", encoding="utf-8")
    (top / "pyproject.toml").write_text("# not extracted\n", encoding="utf-8")
    (cache / "downloads").mkdir(parents=True, exist_ok=True)
    with tarfile.open(cache / "downloads" / f"llama_cpp_python-{version}.tar.gz", "w:gz") as tar:
        tar.add(top, arcname=top.name)


def test_vendored_source_builds_into_its_own_key_with_its_commit(tmp_path):
    commit = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    plant_vendored_sdist(tmp_path, "9.9.9", commit)
    got = build_llamacpp(source=VendoredSource("9.9.9"), cache_dir=tmp_path, jobs=2)
    key_dir = got.bin_dir.parent.parent
    assert key_dir.name == build_key("llama-cpp-python-9.9.9", "cpu") != build_key("9.9.9", "cpu")
    assert got.version == "llama-cpp-python-9.9.9" and got.commit == commit and got.build_number == 0
    info = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
    assert info["source"] == {"package": "llama-cpp-python", "version": "9.9.9",
                              "vendored_path": "vendor/llama.cpp", "vendored_commit": commit}
    assert f"-DLLAMA_BUILD_COMMIT={commit}" in info["configure"]
    assert not (key_dir / "src" / "llama.cpp" / ".git").exists()  # the dangling submodule pointer
    assert not (key_dir / "src" / "pyproject.toml").exists()


def test_a_failed_build_is_one_line_naming_its_log(tmp_path, env):
    plant_vendored_sdist(tmp_path / "cache" / "llama.cpp", "9.9.8", "0" * 40,
                         cmake_extra='message(FATAL_ERROR "planted configure failure")')
    e = {**env, "LAWBENCH_CACHE": str(tmp_path / "cache")}
    line = one_line_error(lawbench(["ab", "--a", "llama-cpp-python@9.9.8", "--b", "llama.cpp", "-k", SMALL,
                                    "--out", str(tmp_path)], e, tmp_path, timeout=300), 1)
    log = tmp_path / "cache" / "llama.cpp" / build_key("llama-cpp-python-9.9.8", "cpu") / "build.log"
    assert f"full log: {log}" in line and "configuring llama.cpp failed" in line, line
    assert "planted configure failure" in log.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- real A/Bs


def ab_record(tmp_path: Path, env: dict, args: list[str], code: int) -> dict:
    tmp_path.mkdir(exist_ok=True)
    p = lawbench(["ab", *args, "--out", str(tmp_path), "--json"], env, tmp_path)
    assert p.returncode == code, (p.returncode, p.stderr[-3000:])
    record = json.loads(p.stdout)
    assert json.loads((tmp_path / "ab.json").read_text(encoding="utf-8")) == record
    return record


@pytest.mark.integration
def test_real_ab_of_a_build_against_itself_contains_1(tmp_path, env, llama):  # noqa: F811
    # An A/A interval excludes 1 by chance 1 - confidence of the time: at 0.99 it did so once in
    # CI (stop 16: hi 0.99942). At 0.999 a false alarm is one run in a thousand, and the gross
    # check below still fails a wiring fault (arms swapped for different models or builds).
    record = ab_record(tmp_path, env, ["--b", "llama.cpp@11434.0.0", "-k", SMALL, "--pairs", "4",
                                       "--confidence", "0.999"], 0)
    assert record["engines"]["a"]["bin_dir"] == record["engines"]["b"]["bin_dir"]
    assert record["engines"]["a"]["build_number"] == 11434 and record["machine"]["cpu_model"]
    (r,) = record["results"]
    assert r["status"] == "measured" and r["pairs"] == 4 and r["gate"] is None
    lo, hi = r["interval"]
    assert lo <= 1.0 <= hi and lo <= r["ratio"] <= hi
    assert 2 / 3 < r["ratio"] < 1.5, r["ratio"]  # the same build on the same model: no gross difference
    assert [s["raw"]["order"] for s in r["samples"]] == ["AB", "BA", "AB", "BA"]
    for s in r["samples"]:
        assert s["value"] == pytest.approx(s["raw"]["value_b"] / s["raw"]["value_a"])
        assert len(s["raw"]["a"]) == len(s["raw"]["b"]) == 3  # every repetition kept
    visits = r["protocol"]["visits"]
    assert [v["arm"] for v in visits] == ["a", "b"] + list("abbaabba")  # warm-ups, then A B B A …
    assert r["median_a"] > 0 and r["median_b"] > 0


@pytest.mark.integration
def test_real_gate_passes_fails_and_refuses_to_guess(tmp_path, env, llama):  # noqa: F811
    # Gates far from 1 (a build against itself), so that a neighbour's load on a 2-core box, which
    # widened the interval to [0.26, 5.5] at worst (load 3.3), cannot make these two undecided.
    common = ["--b", "llama.cpp", "-k", TINY, "--pairs", "6"]

    def gate(name: str, ratio: str, code: int, confidence: str = "0.99") -> str:
        args = common + ["--confidence", confidence, "--gate-min-ratio", ratio]
        return ab_record(tmp_path / name, env, args, code)["results"][0]["gate"]

    assert gate("pass", "0.05", 0) == "pass"
    assert gate("fail", "20", 1) == "regression"
    # the same build against itself cannot be shown to be at least as fast: never a pass (by chance
    # it would be half of 1 - confidence of the time, hence 0.999 here, as in the A/A test above)
    assert gate("void", "1", 1, confidence="0.999") == "unresolved"


@pytest.mark.integration
def test_real_engine_options_reach_llama_bench(llama, tiny_f16):  # noqa: F811
    plain = run_bench(llama, tiny_f16, n_gen=4, repetitions=1, threads=1)
    opt = run_bench(dataclasses.replace(llama, bench_args=("-fa", "1")), tiny_f16, n_gen=4, repetitions=1,
                    threads=1)
    assert opt.cmd[-2:] == ["-fa", "1"] and "-fa" not in plain.cmd
    assert opt.records[0]["flash_attn"] != plain.records[0]["flash_attn"]


def test_the_record_of_a_vendored_engine_says_its_commit_and_no_build_number(tmp_path):
    """What the nightly two-source A/B checks in the record, on a tiny real vendored build."""
    from lawbench.core.engines.specs import describe

    commit = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    plant_vendored_sdist(tmp_path, "9.9.7", commit)
    b = describe(parse_engine("llama-cpp-python@9.9.7"),
                 build_llamacpp(source=VendoredSource("9.9.7"), cache_dir=tmp_path, jobs=2))
    assert b["commit"] == b["build_info"]["source"]["vendored_commit"] == commit
    assert b["build_number"] is None  # a vendored tree cannot count its commits: unknown, not 0
    assert b["source"].startswith("llama-cpp-python 9.9.7") and b["version"] == "llama-cpp-python-9.9.7"


@pytest.mark.integration
def test_real_ab_of_two_engines_sharing_one_compile(tmp_path, env, llama):  # noqa: F811
    """Two engines, one compile: B is a runner's own folder (dir:) holding the pinned build's
    tools. The A/B runs them as two engines end to end — two bin_dirs, both probed, pairs
    interleaved, a finite interval — without the minutes of a second llama.cpp build."""
    own = tmp_path / "own-bin"
    own.mkdir()
    for tool in ("llama-bench", "llama-perplexity", "llama-quantize"):
        (own / tool).symlink_to(llama.bin_dir / tool)
    record = ab_record(tmp_path / "ab", env, ["--b", f"dir:{own}", "-k", TINY, "--pairs", "3"], 0)
    a, b = record["engines"]["a"], record["engines"]["b"]
    assert a["bin_dir"] != b["bin_dir"] == str(own) and b["source"] == f"a runner's own build at {own}"
    assert a["build_number"] == b["build_number"] == 11434
    (r,) = record["results"]
    assert r["status"] == "measured" and r["pairs"] == 3
    lo, hi = r["interval"]
    assert 0 < lo <= r["ratio"] <= hi and math.isfinite(hi)


@pytest.mark.integration
@pytest.mark.nightly  # a second llama.cpp build; in the default run: the two tests above
def test_real_ab_of_two_llama_cpp_builds(tmp_path, env, llama):  # noqa: F811
    # B is built here once (the sdist from PyPI, about 7 min on 2 cores), then taken from the cache.
    build_llamacpp(source=VendoredSource(VENDORED), progress=None)
    record = ab_record(tmp_path, env, ["--b", f"llama-cpp-python@{VENDORED}", "-k", SMALL, "--pairs", "3"], 0)
    a, b = record["engines"]["a"], record["engines"]["b"]
    assert a["build_number"] == 11434 and b["commit"] == b["build_info"]["source"]["vendored_commit"]
    assert b["commit"] and b["commit"] != a["commit"] and a["bin_dir"] != b["bin_dir"]
    assert b["build_number"] is None  # a vendored tree cannot count its commits: unknown, not 0
    (r,) = record["results"]
    assert r["status"] == "measured" and r["pairs"] == 3
    lo, hi = r["interval"]
    assert 0 < lo <= r["ratio"] <= hi and math.isfinite(hi)


@pytest.mark.integration
def test_real_opt_out_options_are_checked_against_the_build_and_the_anchor(tmp_path, env, llama):  # noqa: F811
    line = one_line_error(lawbench(["ab", "--b", "llama.cpp+args=--no-such-option 1", "-k", TINY,
                                    "--out", str(tmp_path)], env, tmp_path), 2)
    assert "--b 'llama.cpp+args=--no-such-option 1': llama-bench at" in line and "has no --no-such-option" in line
    # the anchor runs one thread: a second -t would make llama-bench run two tests, so it is refused
    record = ab_record(tmp_path / "clash", env, ["--b", "llama.cpp+args=-t 2", "-k", TINY, "--pairs", "3"], 1)
    (r,) = record["results"]
    assert r["status"] == "error" and "engine option -t (+args=) is already set" in r["reason"]
    assert record["engines"]["b"]["bench_args"] == ["-t", "2"]


@pytest.mark.integration
def test_real_ab_stopped_by_sigterm_keeps_its_pairs(tmp_path, env, llama):  # noqa: F811
    import signal
    import time

    # B is the same build behind a llama-bench that notes each run with a model as it starts: the
    # signal goes when B's fourth starts — past its warm-up, pair 1's B and pair 2's B (warm-ups A B,
    # then A B, B A …), with room for one more run of B before the pairs (the third alone left 0
    # pairs 1 time in 3) — not after a guess at how long that takes on a loaded box.
    bdir, visits = tmp_path / "b-bin", tmp_path / "b-visits.txt"
    bdir.mkdir()
    for tool in ("llama-perplexity", "llama-quantize"):
        (bdir / tool).symlink_to(llama.bin_dir / tool)
    write_script(bdir / "llama-bench", f"""
        case " $* " in *" -m "*) echo visit >> "{visits}";; esac
        exec "{llama.bin_dir / 'llama-bench'}" "$@"
    """)
    proc = subprocess.Popen([sys.executable, "-m", "lawbench.core.commands.main", "ab", "--b", f"dir:{bdir}", "-k", SMALL,
                             "--pairs", "500", "--out", str(tmp_path)], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=(tmp_path / "err.txt").open("w", encoding="utf-8"), text=True, encoding="utf-8")
    try:
        deadline = time.monotonic() + 300
        while not (visits.is_file() and len(visits.read_text(encoding="utf-8").split()) >= 4):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "err.txt").read_text(encoding="utf-8")
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    err = (tmp_path / "err.txt").read_text(encoding="utf-8")
    assert proc.returncode == 143 and "interrupted by SIGTERM" in err and "Traceback" not in err, err
    record = json.loads((tmp_path / "ab.json").read_text(encoding="utf-8"))
    assert record["interrupted"] == "SIGTERM" and record["exit_code"] == 143
    (r,) = record["results"]
    assert r["status"] == "error" and r["reason"] == "interrupted by SIGTERM" and r["pairs"] >= 1
    assert len(r["protocol"]["visits"]) >= 2 * r["pairs"]
