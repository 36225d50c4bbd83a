"""Greedy parity across modes (measure greedy_parity, plugins/minfer/parity.py): every pass of every
mode decodes one byte-identical greedy stream (seed 002, r54: "parity ×3, run once per mode").

The engine is the stand-in (tests/standin/minfer_standin.py), a real subprocess that speaks the
contract: both paths compute the same int8 values, so its greedy tokens do not change with the path,
unless the bad-math fault makes the fast path forget the −32 centering."""
from __future__ import annotations

import pytest
import standin
from test_minfer import anchors, engine, gb10_profile, run, with_case  # noqa: F401  (fixtures)

from lawbench.core.errors import DataError
from lawbench.core.models import Verdict
from lawbench.core.record.census import census_problems
from lawbench.plugins.minfer.law import Minfer
from lawbench.plugins.minfer.parity import DISTINCT, PASSES, WITHOUT

ID = "minfer.r54.parity.greedy-across-modes"


def test_both_modes_decode_one_stream(engine, anchors):  # noqa: F811
    engine()
    c = Minfer().census(anchors[ID], gb10_profile(), None)
    assert c.counts == {DISTINCT: 1, WITHOUT: 0, PASSES: 6}
    assert set(c.environment["greedy_sha256"]) == {"EXP unset", "EXP=0"}
    assert run(anchors[ID]).verdict is Verdict.PASS


def test_a_math_error_on_the_fast_path_makes_a_second_stream(engine, anchors):  # noqa: F811
    engine("bad-math")  # the default mode's fast path forgets the -32 centering; EXP=0 does not use it
    anchor = anchors[ID]
    counts = Minfer().census(anchor, gb10_profile(), None).counts
    assert census_problems(anchor.census, counts) == [f"{DISTINCT}: counted 2, expected exactly 1"]
    assert run(anchor).verdict is Verdict.FAIL


def test_a_path_that_never_runs_is_not_parity_s_to_see(engine, anchors):  # noqa: F811
    engine("wrong-map-key")  # r53's bug: every launch falls back; the output is unchanged
    assert run(anchors[ID]).verdict is Verdict.PASS
    assert run(anchors["minfer.r54.census.default"]).verdict is Verdict.FAIL  # the liveness census sees it


def test_a_pass_without_greedy_tokens_is_counted_not_compared(engine, anchors, monkeypatch):  # noqa: F811
    engine()
    quiet = with_case(anchors[ID], passes=1)
    monkeypatch.setattr("lawbench.plugins.minfer.parity.greedy", lambda *a, **k: {})
    counts = Minfer().census(quiet, gb10_profile(), None).counts
    assert counts == {DISTINCT: 0, WITHOUT: 2, PASSES: 2}


def test_parity_needs_modes_and_passes_belong_to_it(anchors):  # noqa: F811
    anchor = anchors[ID]
    with pytest.raises(DataError, match="arms"):
        Minfer().check_anchor(anchor.model_copy(update={"arms": {"default": anchor.arms["default"]}}))
    with pytest.raises(DataError, match="case.passes"):
        Minfer().check_anchor(with_case(anchors["minfer.r54.census.default"], passes=3))


def test_an_engine_outside_the_r54_line_skips(engine, anchors):  # noqa: F811
    engine(**{standin.REVISION_ENV: "r60"})
    assert run(anchors[ID], on_own_runner=False).verdict is Verdict.SKIP
