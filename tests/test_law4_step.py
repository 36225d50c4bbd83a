"""Steps across a case parameter (plugins/law4/step.py, register L-08's '-45% prefill in one -ub step').

Unit tests: pre-registration #23's own sweep, replayed through the sampler, gives −45.0 % whatever
order the round visits the arms in; the gtx1060 anchor's band (P-1's '≥30% collapse in one step')
passes it under core's sequential rule and fails a smooth taper; a bad case names its field.
Integration (stand-in for the gtx1060 runner's 30B split and its VRAM): a real llama-bench -ub
sweep here on a synthetic GGUF never passes as a cliff; a planted cliff at one -ub (that setting's
runs at a quarter of their speed, tests/standin/planted_llama_bench.py) passes the same band.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models import Verdict
from lawbench.core.stats.protocol import Visit
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.step import StepSampler, step_cases, steps
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor

PROFILES = load_profiles()
ANCHOR = "law4.gtx1060.step.l08-ubatch-cliff"
UB = ["ub512", "ub1024", "ub1536", "ub2048", "ub3072", "ub4096"]
# prereg #23's table, pp2048 by -ub (weights/data/prereg23_vram_cliff.log)
SWEEP = {"ub512": 303.32, "ub1024": 387.37, "ub1536": 381.21, "ub2048": 209.64, "ub3072": 209.46, "ub4096": 210.84}
TAPER = {"ub512": 303.32, "ub1024": 387.37, "ub1536": 370.0, "ub2048": 345.0, "ub3072": 320.0, "ub4096": 300.0}


def _sampler(speeds: dict[str, float], statistic: str = "min") -> StepSampler:
    visits = {arm: (lambda reps, a=arm: Visit(values=[speeds[a]] * reps, wall_s=0.01)) for arm in speeds}
    return StepSampler(UB, visits, {a: a for a in UB}, reps=1, per_visit=max, statistic=statistic)


def test_the_records_sweep_gives_its_step_in_every_visit_order():
    sampler = _sampler(SWEEP)
    samples = sampler.draw(3)
    assert [round(s.value, 3) for s in samples] == [-0.450] * 3  # '−45.0% from ub 1536 to ub 2048'
    assert {s.raw["end"] for s in samples} == {"ub1536 -> ub2048"}
    assert len({tuple(s.raw["order"]) for s in samples}) == 3  # each round visits in another order
    assert steps(SWEEP, UB)["ub512 -> ub1024"] == pytest.approx(387.37 / 303.32 - 1)
    assert round(_sampler(SWEEP, "max").draw(1)[0].value, 3) == 0.277  # the rise 512 -> 1024


@pytest.mark.parametrize("speeds, verdict", [(SWEEP, Verdict.PASS), (TAPER, Verdict.FAIL)])
def test_the_shipped_anchor_passes_the_records_cliff_and_fails_a_taper(speeds, verdict):
    """P-1: 'falls by ≥30% in a single step. A smooth roll-off instead would mean #22's 2.3× was
    not a capacity boundary'; a taper's largest step here is −6.7 %."""
    from lawbench.core.stats.verdicts import decide_sequential

    a = law_anchors(Law4())[ANCHOR]
    assert a.value == -0.45 and a.kind == "measurement" and a.profiles == ["gtx1060"]
    case = step_cases(a)["ub512"]
    assert case.spread.order == UB and case.spread.statistic == "min"
    sampler = _sampler(speeds)
    decision = decide_sequential(sampler.draw, sampler.statistic, a.band.interval(a.value), a.budget,
                                 log=sampler.log_scale)
    assert decision.verdict is verdict, (decision.statistic, decision.interval)


def test_the_shipped_anchor_runs_the_sweep_at_each_ub_and_skips_off_its_box():
    a = law_anchors(Law4())[ANCHOR]
    cases = step_cases(a)
    assert {name: c.bench.ubatch for name, c in cases.items()} == {u: int(u[2:]) for u in UB}
    assert all(c.bench.batch == 4096 and c.placement.kv_on_cpu for c in cases.values())  # -b never caps -ub
    r = evaluate_anchor(a, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False)
    assert r.verdict is Verdict.SKIP and "gtx1060" in r.reason
    strict = evaluate_anchor(a, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False, strict=True)
    assert strict.verdict is Verdict.FAIL and strict.strict_skip


PROV = {"seed": "000_4a91008eeaefec79.txt", "register_id": "L-08", "quote": "test", "band_rationale": "test"}
# The fastest of 3 repetitions a visit: on a shared 2-core box a neighbour only ever slows one down.
CASE = {"quantity": "step_change", "model": "gguf:syn-25m-q4_0",
        "bench": {"n_gen": 0, "n_prompt": 256, "batch": 256, "reps": 3, "per_visit": "fastest", "timeout_s": 120},
        "spread": {"order": ["ub64", "ub128", "ub256"], "statistic": "min"}}
ARMS = {"ub64": {"bench": {"ubatch": 64}}, "ub128": {"bench": {"ubatch": 128}}, "ub256": {"bench": {"ubatch": 256}}}


def step_anchor(**fields):
    data = dict(id="law4.test.step", law="law4", claim="test", quantity="step_change", unit="fraction",
                kind="measurement", value=-0.45, band={"hi": -0.30}, profiles=["cpu"], provenance=PROV,
                noise="prefill", case=CASE, arms=ARMS,
                budget={"min_samples": 3, "max_samples": 9, "batch": 3, "timeout_s": 600})
    data.update(fields)
    return make_anchor(**data)


@pytest.mark.parametrize("fields, field", [
    (dict(arms={"ub64": ARMS["ub64"]}), "arms"),
    (dict(case={**CASE, "spread": {"order": ["ub64", "ub128"], "statistic": "min"}}), "case.spread.order"),
    (dict(case={**CASE, "spread": {"order": ["ub64", "ub128", "ub256"]}}), "case.spread.statistic"),
    (dict(kind="agreement", band={"rel": 0.25}), "kind"),
    (dict(arms={**ARMS, "ub256": {"bench": {"ubatch": 256, "reps": 1}}}), "arms"),
])
def test_a_bad_step_case_is_refused_naming_its_field(fields, field):
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(step_anchor(**fields))
    assert exc.value.field == field, str(exc.value)
    assert exc.value.anchor == "law4.test.step"


# --------------------------------------------------------------------------- integration: measured here


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory):
    """A --llama-dir: the real cached build behind the planting llama-bench stand-in."""
    from lawbench.core.engines.build import build_llamacpp
    from standin.planted_llama_bench import make_wrapper

    real = build_llamacpp(progress=None)
    return make_wrapper(tmp_path_factory.mktemp("wrapped-llama"), Path(real.bin_dir))


@pytest.mark.integration
def test_a_real_ub_sweep_measures_here_and_a_planted_cliff_turns_it_red(wrapped):
    """The same sampler on real llama-bench pp256 visits at -ub 64, 128, 256 (no cliff on a CPU:
    no VRAM to spill out of, so the sweep never passes as one). Planted: every run at -ub 128 at a
    quarter of its speed, a cliff in the middle of the sweep: the largest fall is then about −75 %,
    inside P-1's band (at most −30 %)."""
    from lawbench.core.laws.resources import Resources

    for stale in ("planted.json", "invocations"):
        (wrapped / stale).unlink(missing_ok=True)
    law, cpu = Law4(), PROFILES["cpu"]
    r = Resources(llama_dir=str(wrapped), profile=cpu)
    try:
        here = evaluate_anchor(step_anchor(), law, profile=cpu, resources=r)
        print(f"step_change here: {here.measured:.4f} {here.interval} {here.verdict.value}")
        for s in here.measurement.samples:
            assert set(s.raw["steps"]) == {"ub64 -> ub128", "ub128 -> ub256"} and s.value == min(s.raw["steps"].values())
        visits = here.measurement.protocol["visits"]
        assert {v["raw"]["test"] for v in visits} == {"pp256"} and len(visits) == 3 * (1 + len(here.measurement.samples))
        assert here.verdict is not Verdict.PASS, here.reason  # no cliff here (a loaded 2-core box: FAIL or VOID)

        (wrapped / "planted.json").write_text(json.dumps({"slow_when": [["-ub", "128"], 0.25]}), encoding="utf-8")
        cliff = evaluate_anchor(step_anchor(), law, profile=cpu, resources=r)
        print(f"step_change planted: {cliff.measured:.4f} {cliff.interval} {cliff.verdict.value}")
        assert cliff.verdict is Verdict.PASS, cliff.reason
        assert all(s.raw["end"] == "ub64 -> ub128" for s in cliff.measurement.samples)
        assert cliff.measured < here.measured - 0.3
    finally:
        r.close()
