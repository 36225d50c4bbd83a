"""Population statistics (plugins/law4/population.py): register L-18's '1.6x population spread',
recomputed from prereg #72's eight published per-architecture η; a wrong member turns it red."""
from __future__ import annotations

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models import Verdict
from lawbench.plugins.law4.law import Law4
from lawbench.testing import evaluate_anchor, law_anchors

PROFILES = load_profiles()
ANCHOR = "law4.population.l18-eta-file-spread"


def test_the_spread_is_the_largest_member_over_the_smallest():
    a = law_anchors(Law4())[ANCHOR]
    p = Law4().predict(a, PROFILES["gtx1060"])
    assert p.value == pytest.approx(0.812 / 0.512) and round(p.value, 1) == 1.6
    assert p.detail["lowest"] == {"hopper": 0.512} and p.detail["highest"] == {"rdna4": 0.812}
    assert p.detail["median"] == pytest.approx((0.618 + 0.645) / 2)
    assert evaluate_anchor(a, Law4(), profile=PROFILES["gtx1060"]).verdict is Verdict.PASS


@pytest.mark.parametrize("member, value", [("hopper", 0.45), ("rdna4", 0.90)])
def test_a_wrong_member_turns_it_red(member, value):
    a = law_anchors(Law4())[ANCHOR]
    case = {**a.case, "population": {**a.case["population"], member: value}}
    wrong = a.model_copy(update={"case": case})
    r = evaluate_anchor(wrong, Law4(), profile=PROFILES["gtx1060"])
    assert r.verdict is Verdict.FAIL, r.reason


def test_a_population_of_one_is_refused_naming_its_field():
    a = law_anchors(Law4())[ANCHOR]
    bad = a.model_copy(update={"case": {**a.case, "population": {"ada": 0.706}}})
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(bad)
    assert exc.value.field.startswith("case.population") and exc.value.anchor == ANCHOR
