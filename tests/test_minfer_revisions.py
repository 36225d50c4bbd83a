"""Engine-revision conditions on minfer anchors (issue 9, §5): seed 002's numbers belong to r54;
r56 adds a W_dsc plane under the same gate ("another 363 MB"), so an anchor says which revisions
its number holds for and SKIPs on an engine outside them.

The engine is the stand-in (tests/standin/minfer_standin.py, through test_minfer's `engine`
fixture): it answers the revision probe with $MINFER_STANDIN_REVISION; its planted fault
"no-probe" ignores the probe, as an old wrapper would.
"""
from __future__ import annotations

import os

import pytest
import standin
from conftest import carrier_plugin, run_cli
from test_minfer import anchors, engine, gb10_profile, run, with_case  # noqa: F401 (fixtures)

from lawbench.core.errors import DataError, EngineError
from lawbench.core.models import Verdict
from lawbench.plugins.minfer.law import Minfer
from lawbench.plugins.minfer.revisions import EngineRevisionOutOfRange, Revisions, parse_probe, revision_number

ENGINE_ANCHORS = ("census", "measurement", "ratio", "agreement")


# ------------------------------------------------------------------ the revision and its range

@pytest.mark.parametrize("text,n", [("r54", 54), ("r0", 0), ("r100", 100)])
def test_a_revision_is_r_and_a_number(text, n):
    assert revision_number(text) == n


@pytest.mark.parametrize("text", ["54", "R54", "r054", "r54-dirty", " r54", "r", "", "r5.4"])
def test_anything_else_is_not_a_revision(text):
    with pytest.raises(ValueError, match="is not a revision"):
        revision_number(text)


def test_range_is_min_inclusive_before_exclusive():
    r = Revisions(min="r54", before="r56")
    assert [r.holds(f"r{n}") for n in (53, 54, 55, 56, 60)] == [False, True, True, False, False]
    assert Revisions(before="r53").holds("r40") and not Revisions(before="r53").holds("r53")
    assert Revisions(min="r56").holds("r99")
    assert r.describe() == "r54 <= revision < r56"


@pytest.mark.parametrize("data,words", [({}, "needs min"), ({"min": "r56", "before": "r54"}, "not after min"),
                                        ({"min": "r54", "before": "r54"}, "not after min"),
                                        ({"min": "r54", "to": "r56"}, "Extra inputs")])
def test_an_empty_or_malformed_range_is_refused(data, words):
    with pytest.raises(ValueError, match=words):
        Revisions.model_validate(data)


def test_probe_output_is_parsed_and_a_bad_answer_is_an_engine_error():
    assert parse_probe('noise\n{"minfer_revision": "r53"}\n{"minfer_revision": "r54"}\n', "e") == "r54"
    with pytest.raises(EngineError, match="printed no"):
        parse_probe('{"prefill_tok_s": 3181.0}\n', "e")
    with pytest.raises(EngineError, match="reported revision '54'"):
        parse_probe('{"minfer_revision": "54"}', "e")


# ------------------------------------------------------------------ every engine anchor is pinned

def test_every_minfer_engine_run_names_its_revisions(anchors):
    """The shipped anchors: each run that starts minfer carries a range (llama.cpp runs none)."""
    from lawbench.plugins.minfer.case import ENGINE_MEASURES, parse_case, runs

    pinned = 0
    for a in anchors.values():
        case = parse_case(a)
        if a.kind not in ENGINE_ANCHORS or not (case.measure in ENGINE_MEASURES or case.measure is None):
            continue
        for _, (where, r) in runs(a, case).items():
            assert (r.revisions is not None) == (r.engine == "minfer"), (a.id, where)
            pinned += r.engine == "minfer"
    assert pinned >= 20


def test_an_engine_anchor_without_a_range_is_a_data_error(anchors):
    a = anchors["minfer.r54.census.default"]
    bare = a.model_copy(update={"case": {k: v for k, v in a.case.items() if k != "revisions"}})
    with pytest.raises(DataError, match="needs the engine revisions") as e:
        Minfer().check_anchor(bare)
    assert e.value.anchor == a.id and e.value.field == "case.revisions"


def test_a_llama_run_with_a_minfer_range_is_a_data_error(anchors):
    a = anchors["minfer.r54.vs-llama"]
    arms = {**a.arms, "a": {**a.arms["a"], "revisions": {"min": "r54"}}}
    with pytest.raises(DataError, match="llama.cpp run has no minfer revision") as e:
        Minfer().check_anchor(a.model_copy(update={"arms": arms}))
    assert e.value.field == "arms.a.revisions"


# ------------------------------------------------------------------ in range runs, out of range skips

def test_in_range_the_anchor_runs_and_records_the_revision(engine, anchors, monkeypatch):
    engine()
    monkeypatch.setenv(standin.REVISION_ENV, "r55")
    r = run(anchors["minfer.r54.census.default"])
    assert r.verdict is Verdict.PASS, r.reason
    assert r.measurement.environment["engine_revision"] == "r55"
    r = run(anchors["minfer.r54.ratio.exp-off-vs-default"])
    assert r.verdict is Verdict.PASS, r.reason
    assert {e["revision"] for e in r.measurement.protocol["engine"].values()} == {"r55"}


@pytest.mark.parametrize("revision", ["r53", "r56", "r60"])
def test_out_of_range_the_law_says_why(engine, anchors, monkeypatch, revision):
    engine()
    monkeypatch.setenv(standin.REVISION_ENV, revision)
    a = anchors["minfer.r54.census.default"]
    with pytest.raises(EngineRevisionOutOfRange) as e:
        Minfer().census(a, gb10_profile(), None)
    assert str(e.value) == (f"minfer engine (LAWBENCH_MINFER_CMD) is revision {revision}, outside this anchor's "
                            f"case.revisions (r54 <= revision < r56): anchor minfer.r54.census.default re-checks a "
                            f"number published for those revisions only")


def test_out_of_range_no_engine_pass_runs(engine, anchors, monkeypatch):
    """Only the probe runs: a real pass of the stand-in with the crash fault exits 3."""
    engine("crash")
    a = anchors["minfer.r54.census.default"]
    monkeypatch.setenv(standin.REVISION_ENV, "r54")
    with pytest.raises(EngineError, match="exited with status 3"):  # in range: the pass runs (and crashes)
        Minfer().census(a, gb10_profile(), None)
    monkeypatch.setenv(standin.REVISION_ENV, "r56")
    with pytest.raises(EngineRevisionOutOfRange):
        Minfer().census(a, gb10_profile(), None)


def test_out_of_range_comes_before_a_missing_llama_command(engine, anchors, monkeypatch):
    engine()
    monkeypatch.setenv(standin.REVISION_ENV, "r56")
    monkeypatch.delenv("LAWBENCH_MINFER_LLAMA_CMD", raising=False)
    with pytest.raises(EngineRevisionOutOfRange, match="arms.b.revisions"):
        Minfer().sampler(anchors["minfer.r54.vs-llama"], gb10_profile(), None)


def test_out_of_range_is_a_skip_even_on_the_anchors_own_runner(engine, anchors, monkeypatch):
    """On a profile that names no minfer engine of record (gb10_profile); the shipped gb10 names
    r54, and there this is a FAIL under --strict (tests/test_engine_of_record.py)."""
    engine()
    monkeypatch.setenv(standin.REVISION_ENV, "r56")
    for strict in (False, True):  # a runner job (--strict) skips it too: it is not about this engine
        r = run(anchors["minfer.r54.census.default"], on_own_runner=True, strict=strict)
        assert r.verdict is Verdict.SKIP and "is revision r56, outside this anchor's case.revisions (r54 <= revision < r56)" in r.reason


def test_an_engine_that_does_not_answer_the_probe_is_an_error(engine, anchors, monkeypatch):
    engine("no-probe")
    r = run(anchors["minfer.r54.census.default"])
    assert r.verdict is Verdict.ERROR and 'printed no {"minfer_revision": "r<N>"} line' in r.reason


def test_two_engine_revisions_in_one_ratio(engine, anchors, monkeypatch, tmp_path):
    """r53's +5.03 %: arm a the r53 build, arm b the build before it (LAWBENCH_MINFER_PREV_CMD)."""
    engine()
    a = anchors["minfer.r53.ratio.bundle-gain"]
    monkeypatch.setenv(standin.REVISION_ENV, "r53")
    monkeypatch.delenv("LAWBENCH_MINFER_PREV_CMD", raising=False)
    r = run(a)
    assert r.verdict is Verdict.FAIL and "set LAWBENCH_MINFER_PREV_CMD" in r.reason
    # the previous build: the same double behind a wrapper that reports r52
    prev = tmp_path / "prev.sh"
    prev.write_text(f"#!/bin/sh\n{standin.REVISION_ENV}=r52 exec {os.environ['LAWBENCH_MINFER_CMD']}\n", encoding="utf-8")
    prev.chmod(0o755)
    monkeypatch.setenv("LAWBENCH_MINFER_PREV_CMD", str(prev))
    r = run(a)
    # both builds of the double run at 3181.0 tok/s: measured, and outside r53's band by the numbers
    assert r.verdict is Verdict.FAIL and "lies outside the band" in r.reason, r.reason
    assert r.measured == pytest.approx(1.0)
    assert {k: e["revision"] for k, e in r.measurement.protocol["engine"].items()} == {"r53": "r53",
                                                                                      "before r53": "r52"}
    monkeypatch.setenv(standin.REVISION_ENV, "r54")  # the main engine is no longer r53
    with pytest.raises(EngineRevisionOutOfRange, match="arms.a.revisions"):
        Minfer().sampler(a, gb10_profile(), None)


# ------------------------------------------------------------------ r56: the W_dsc plane

@pytest.fixture
def fake_smi(monkeypatch, tmp_path):
    """The stand-in nvidia-smi first on PATH: each stand-in process at 7636 / 6182 MiB, +363 on an
    r56+ default — the numbers are the seed's (363 read as MiB), the readings are simulated. A
    pass holds (HOLD_ENV, a cap) until the stand-in nvidia-smi has read it: no race with polling."""
    from lawbench.core.hardware import gpu_memory as mem

    monkeypatch.setenv(standin.READ_MARK_ENV, str(tmp_path / "read"))
    monkeypatch.setenv("PATH", f"{standin.SMI_DIR}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(mem, "_nvml_reader", lambda: (_ for _ in ()).throw(RuntimeError("no NVML here")))


def test_r56_delta_carries_the_dsc_plane_and_r54s_does_not(engine, anchors, monkeypatch, fake_smi):
    engine(**{standin.HOLD_ENV: "60"})
    monkeypatch.setenv(standin.REVISION_ENV, "r56")
    r = run(anchors["minfer.r56.memory.plane-delta"])
    assert r.verdict is Verdict.PASS, r.reason
    assert r.measured == pytest.approx(1454 + 363)
    with pytest.raises(EngineRevisionOutOfRange):  # r54's 1454 MiB is not about an r56 engine
        Minfer().sampler(anchors["minfer.r54.memory.plane-delta"], gb10_profile(), None)
    monkeypatch.setenv(standin.REVISION_ENV, "r54")
    r = run(anchors["minfer.r54.memory.delta-vs-census"])
    assert r.verdict is Verdict.PASS, r.reason  # 1454 / 1450.75 = 1.00224: the seed's "3 MiB from the census"
    assert r.detail["predicted"] == pytest.approx(1450.75)
    with pytest.raises(EngineRevisionOutOfRange):
        Minfer().sampler(anchors["minfer.r56.memory.plane-delta"], gb10_profile(), None)


# ------------------------------------------------------------------ a bad range is exit 2 at check time

MINFER_ENGINE_ANCHOR = """
[[anchor]]
id = "test.minfer.census"
law = "minfer"
claim = "All 27 launches are fast."
quantity = "labels"
unit = "launches"
kind = "census"
profiles = ["gb10"]
case = { env = { MINFER_MMQ_Q6K_NB = "1" }, revisions = { min = "r54", before = "r56" } }
census = { exact = { "W_exp-cp.async" = 27 } }
provenance = { seed = "002_73bfd6a23252a67a.txt" }
"""


@pytest.mark.parametrize("old,new,field,words", [
    ('min = "r54"', 'min = "54"', "case.revisions.min", "'54' is not a revision"),
    ('before = "r56"', 'before = "r56-dirty"', "case.revisions.before", "'r56-dirty' is not a revision"),
    ('before = "r56"', 'before = "r53"', "case.revisions.before", "r53 is not after min r54"),
    ('revisions = { min = "r54", before = "r56" }', 'revisions = { from = "r54" }', "case.revisions.from",
     "unknown field"),
    (', revisions = { min = "r54", before = "r56" }', "", "case.revisions", "needs the engine revisions"),
])
def test_a_bad_revision_is_exit_2_naming_file_anchor_and_field(tmp_path, cli_env, old, new, field, words):
    assert old in MINFER_ENGINE_ANCHOR
    package = carrier_plugin(tmp_path / "site", "extra", {"extra.toml": MINFER_ENGINE_ANCHOR.replace(old, new, 1)},
                             dist="lawbench-extra-anchors")
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=os.pathsep.join([str(package.parent), cli_env["PYTHONPATH"]])),
                tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    file = package / "anchors" / "extra.toml"
    assert lines[0].startswith(f"lawbench: error: {file}: anchor test.minfer.census: field {field}: "), lines[0]
    assert words in lines[0], lines[0]
