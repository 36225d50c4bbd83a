"""r60's "default-on + 0 opt-out" per gate (measure gate_switch, plugins/minfer/gates.py): three
traced passes (unset, the on value, "0") and how many kernels' counts differ between them.

The engine is the stand-in (tests/standin/minfer_standin.py), which models MINFER_MMQ_Q6K_NB (and
EXP) and no other gate; its traced passes are written by the real tracer through the harness
(tests/test_minfer_kernel_time.py says how)."""
from __future__ import annotations

import pytest
import standin
from test_minfer import anchors, engine, gb10_profile, run, with_case  # noqa: F401  (fixtures)
from test_minfer_kernel_time import harness, traced  # noqa: F401  (fixtures)

from lawbench.core.errors import DataError
from lawbench.core.models import Verdict
from lawbench.core.record.census import census_problems
from lawbench.plugins.minfer.gates import UNSET_VS_OFF, UNSET_VS_ON, differing
from lawbench.plugins.minfer.law import Minfer

GATES = ["mmq", "mmq-raw", "mmq-raw-nb", "mmq-a-transpose", "mmq-q6k-nb", "mmq-a-fuse"]


def test_differing_counts_a_kernel_once_whatever_side_it_is_missing_from():
    assert differing({"kernel:a": 3, "kernel:b": 1}, {"kernel:a": 3, "kernel:c": 1}) == ["kernel:b", "kernel:c"]
    assert differing({"kernel:a": 3}, {"kernel:a": 4}) == ["kernel:a"]
    assert differing({"kernel:a": 3}, {"kernel:a": 3}) == []


def test_the_six_gates_are_one_anchor_each_on_the_r60_line(anchors):  # noqa: F811
    names = {anchors[f"minfer.r60.gate.{g}"].case["gate"]["name"] for g in GATES}
    assert names == {"MINFER_MMQ", "MINFER_MMQ_RAW", "MINFER_MMQ_RAW_NB", "MINFER_MMQ_A_TRANSPOSE",
                     "MINFER_MMQ_Q6K_NB", "MINFER_MMQ_A_FUSE"}
    assert anchors["minfer.r60.gate.mmq-a-fuse"].case["gate"]["on"] == "2"  # unset = mode 2, "1" = mode 1


def test_a_default_on_gate_with_a_0_opt_out_passes(traced, anchors):  # noqa: F811
    traced(**{standin.REVISION_ENV: "r60"})
    anchor = anchors["minfer.r60.gate.mmq-q6k-nb"]
    r = run(anchor)
    assert r.verdict is Verdict.PASS, r.reason


def test_a_gate_read_the_pre_r60_way_turns_red(traced, anchors):  # noqa: F811
    traced("opt-in-nb", **{standin.REVISION_ENV: "r60"})  # unset = off: the r54-era opt-in NB gate
    anchor = anchors["minfer.r60.gate.mmq-q6k-nb"]
    counts = Minfer().census(anchor, gb10_profile(), None).counts
    # unset now runs what "0" runs: it differs from "1", and "0" no longer differs from it
    assert census_problems(anchor.census, counts) == [f"{UNSET_VS_ON}: counted 2, expected exactly 0",
                                                      f"{UNSET_VS_OFF}: counted 0, expected at least 1"]
    assert run(anchor).verdict is Verdict.FAIL


@pytest.mark.parametrize("gate", [g for g in GATES if g != "mmq-q6k-nb"])
def test_a_0_that_nothing_reads_turns_red(traced, anchors, gate):  # noqa: F811
    traced(**{standin.REVISION_ENV: "r60"})  # the stand-in models only the NB gate: their "0" changes nothing
    anchor = anchors[f"minfer.r60.gate.{gate}"]
    counts = Minfer().census(anchor, gb10_profile(), None).counts
    assert census_problems(anchor.census, counts) == [f"{UNSET_VS_OFF}: counted 0, expected at least 1"]


def test_an_r54_engine_skips_the_r60_gates(traced, anchors):  # noqa: F811
    traced(**{standin.REVISION_ENV: "r54"})
    assert run(anchors["minfer.r60.gate.mmq-q6k-nb"], on_own_runner=False).verdict is Verdict.SKIP


def test_the_census_sets_the_gate_itself(anchors):  # noqa: F811
    anchor = anchors["minfer.r60.gate.mmq-q6k-nb"]
    with pytest.raises(DataError, match="case.gate"):
        Minfer().check_anchor(with_case(anchor, env={"MINFER_MMQ_Q6K_NB": "1"}))
    with pytest.raises(DataError, match="case.gate"):
        Minfer().check_anchor(with_case(anchor, gate={"name": "MINFER_MMQ_Q6K_NB", "on": "0"}))
