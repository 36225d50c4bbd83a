"""r41's L1TEX scoreboard share (measure long_scoreboard_pct, docs/minfer-contract.md §11): the
anchors minfer.r41.l1tex.before / .after, judged through the minfer law.

No GPU, ncu or minfer here. The engine is the minfer stand-in (tests/standin/minfer_standin.py),
named by the anchors' own variables (LAWBENCH_MINFER_R40_CMD / _R41_CMD) and answering the probe
with the revision and commit the test gives; ncu is tests/standin/ncu_standin.py, which runs the
engine pass for real and prints the lead's real ncu page with the q6_K kernel's name and the test's
cycles in place of mul_mat_q's (the row shape is ncu's own). The parser's own figures are tested on
the real page unchanged (tests/test_ncu_counters.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import standin
from test_minfer import anchors, engine, run, with_case  # noqa: F401  (fixtures)

from lawbench.core.engines import counters
from lawbench.core.errors import DataError
from lawbench.core.models import Verdict
from lawbench.plugins.minfer.law import Minfer

NCU_STANDIN = Path(__file__).resolve().parent / "standin" / "ncu_standin.py"
Q6K = "mmq_raw_nb_bt_q6k_kernel"
BUILDS = {"minfer.r41.l1tex.before": ("LAWBENCH_MINFER_R40_CMD", "r40", "65ecef7"),
          "minfer.r41.l1tex.after": ("LAWBENCH_MINFER_R41_CMD", "r41", "b891e1b")}
R40_CYCLES, R41_CYCLES = "13.7,16.0", "3.6,10.7"  # 44-r41: 13.7 of 16.0 cy; 3.6 cy at 33.6 %


@pytest.fixture
def build(engine, monkeypatch):  # noqa: F811
    """The stand-in as the anchor's build: its command variable, revision and commit, ncu's cycles."""
    def use(anchor_id: str, cycles: str, commit: str | None = None, revision: str | None = None, **env: str):
        var, rev, sha = BUILDS[anchor_id]
        engine(var=var, **{standin.REVISION_ENV: revision or rev, "NCU_STANDIN_KERNEL": Q6K,
                           "NCU_STANDIN_CYCLES": cycles, **env})
        monkeypatch.setenv("MINFER_STANDIN_COMMIT", commit if commit is not None else sha + "0a1b2c3")
        monkeypatch.setenv(counters.NCU_ENV, str(NCU_STANDIN))
    return use


@pytest.mark.parametrize("anchor_id, cycles, verdict", [
    ("minfer.r41.l1tex.before", R40_CYCLES, Verdict.PASS),   # 85.6 % in [59.55, 100]
    ("minfer.r41.l1tex.after", R41_CYCLES, Verdict.PASS),    # 33.6 % in [0, 59.55]
    ("minfer.r41.l1tex.before", R41_CYCLES, Verdict.FAIL),   # r41's level on the r40 build: the widening not undone
    ("minfer.r41.l1tex.after", R40_CYCLES, Verdict.FAIL),    # r40's level on the r41 build: the widening lost
    ("minfer.r41.l1tex.after", "6.5,10.7", Verdict.FAIL),    # 60.7 %: just past the midpoint
])
def test_each_share_anchor_is_judged_by_its_band(build, anchors, anchor_id, cycles, verdict):  # noqa: F811
    build(anchor_id, cycles)
    r = run(anchors[anchor_id])
    stall, latency = map(float, cycles.split(","))
    assert r.verdict is verdict, r.reason
    assert r.measured == pytest.approx(100 * stall / latency, rel=1e-9)


def test_the_reading_is_the_median_over_the_kernels_launches_at_its_grid(build, anchors):  # noqa: F811
    # three launches at 50 %, 55 %, 100 %: the median 55 % is inside r41's band, the mean 68 % is not
    build("minfer.r41.l1tex.after", "5,10;5.5,10;10,10", NCU_STANDIN_GRID_Y="4")
    r = run(with_case(anchors["minfer.r41.l1tex.after"], kernel={"name": Q6K, "grid_y": 4}))
    assert r.verdict is Verdict.PASS and r.measured == pytest.approx(55.0), r.reason
    raw = r.measurement.samples[0].raw
    assert raw["launches"] == 3 and raw["shares_pct"] == [50.0, 55.0, 100.0] and raw["grids"] == ["132x4x1"]
    r = run(with_case(anchors["minfer.r41.l1tex.after"], kernel={"name": Q6K, "grid_y": 28}))
    assert r.verdict is Verdict.ERROR and f"no launch of {Q6K} at grid *x28x*" in r.reason
    assert f"{Q6K} at 132x4x1" in r.reason


def test_another_build_is_refused_naming_the_commit(build, anchors):  # noqa: F811
    anchor = anchors["minfer.r41.l1tex.after"]
    build("minfer.r41.l1tex.after", R41_CYCLES, commit="3252e96")  # r54's commit behind the r41 variable
    assert run(anchor, on_own_runner=False).verdict is Verdict.SKIP  # not a gb10: not this machine's anchor
    r = run(anchor, strict=True)  # the gb10 runner: a FAIL naming the build to provide
    assert r.verdict is Verdict.FAIL and "check out minfer at b891e1b" in r.reason, r.reason
    assert "LAWBENCH_MINFER_R41_CMD" in r.reason
    build("minfer.r41.l1tex.after", R41_CYCLES, commit="")  # a probe that states no commit
    r = run(anchor, strict=True)
    assert r.verdict is Verdict.FAIL and "prints no {\"minfer_commit\"" in r.reason, r.reason


def test_without_the_builds_command_it_skips_here_and_fails_on_its_runner(anchors, monkeypatch):  # noqa: F811
    monkeypatch.delenv("LAWBENCH_MINFER_R40_CMD", raising=False)
    anchor = anchors["minfer.r41.l1tex.before"]
    assert run(anchor, on_own_runner=False).verdict is Verdict.SKIP
    r = run(anchor, strict=True)
    assert r.verdict is Verdict.FAIL and "LAWBENCH_MINFER_R40_CMD" in r.reason, r.reason


def test_without_ncu_it_skips_here_and_fails_on_its_runner(build, anchors, monkeypatch, tmp_path):  # noqa: F811
    build("minfer.r41.l1tex.before", R40_CYCLES)
    monkeypatch.setenv(counters.NCU_ENV, "")
    monkeypatch.setenv("PATH", f"{Path(__import__('sys').executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    if __import__("shutil").which("ncu"):
        pytest.skip("this machine has an ncu on PATH")
    anchor = anchors["minfer.r41.l1tex.before"]
    assert run(anchor, on_own_runner=False).verdict is Verdict.SKIP  # not a gb10: not this machine's anchor
    r = run(anchor, strict=True)
    assert r.verdict is Verdict.FAIL and "Nsight Compute (ncu) not found" in r.reason, r.reason


def test_counters_the_driver_refuses_are_an_error_naming_ncu(build, anchors):  # noqa: F811
    build("minfer.r41.l1tex.before", R40_CYCLES, NCU_STANDIN_FAULT="perm")
    r = run(anchors["minfer.r41.l1tex.before"])
    assert r.verdict is Verdict.ERROR and "ncu (Nsight Compute) could not read" in r.reason
    assert "ERR_NVGPUCTRPERM" in r.reason


@pytest.mark.parametrize("change, field", [
    ({"unit": "ms"}, "unit"),
    ({"case": {"measure": "long_scoreboard_pct", "command_env": "X", "commit": "b891e1b",
               "revisions": {"min": "r41", "before": "r42"}}}, "case.kernel"),
    ({"case": {"measure": "long_scoreboard_pct", "kernel": {"name": Q6K}, "commit": "B891E1B",
               "revisions": {"min": "r41", "before": "r42"}}}, "case.commit"),
])
def test_a_bad_case_names_anchor_and_field(anchors, change, field):  # noqa: F811
    anchor = anchors["minfer.r41.l1tex.after"].model_copy(update=change)
    with pytest.raises(DataError) as exc:
        Minfer().check_anchor(anchor)
    assert exc.value.anchor == "minfer.r41.l1tex.after" and field in str(exc.value), str(exc.value)
