"""Order-effect spreads (plugins/law4/order_effect.py, register L-31): readings split by the arm before.

Unit tests: the record's own 20 readings (weights/data/prereg108_run2.log), replayed through the
sampler in the record's own schedule, give every figure L-31 prints (0.8 %, 1.8 %, 20.9 %, 72.4 %,
11.3 to 70.7 tok/s), and the anchors' bands turn red on a wrong value; a bad case names its field.
Integration (stand-in for the gtx1060 runner's 35B file): the same sampler on real llama.cpp here,
over synthetic GGUFs, measured, then turned red by a planted run-order slowdown; and the k arms run
at their k in llama-batched-bench on a tiny real MoE GGUF.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models import Verdict
from lawbench.core.stats.protocol import Visit
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.order_effect import OrderSampler, half_range, order_cases, schedule
from lawbench.plugins.law4.spread_case import SpreadCase
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor

PROFILES = load_profiles()
PROV = {"seed": "000_4a91008eeaefec79.txt", "register_id": "L-31", "quote": "test", "band_rationale": "test"}
ORDER = ["k8", "k4", "k2", "k1"]
# prereg108_run2.log in run order: 3 discarded warm-ups at k=8, then p1 (8 4 2 1), p2 (1 2 4 8), … p5
RECORD = [53.1, 48.8, 49.5,
          50.8, 82.8, 195.1, 197.1, 218.6, 204.4, 113.5, 70.7, 51.1, 83.9, 191.6, 202.9,
          226.5, 201.4, 74.2, 11.3, 52.7, 82.6, 195.5, 208.4]
SHIPPED = {"law4.gtx1060.order.l31-matched-high": 0.018, "law4.gtx1060.order.l31-matched-low": 0.008,
           "law4.gtx1060.order.l31-differed-low": 0.209, "law4.gtx1060.order.l31-differed-high": 0.724,
           "law4.gtx1060.order.l31-k8-span": 6.3}


def _record_visits():
    """Visit callables replaying the record: whichever arm is asked, the next reading in run order
    (the sampler must ask for the arms in the record's own order for the figures to come out)."""
    queue = list(RECORD)
    return {arm: (lambda reps, a=arm: Visit(values=[queue.pop(0)] * reps, wall_s=0.01)) for arm in ORDER}


def _replay(quantity="order_spread", **spread) -> OrderSampler:
    s = SpreadCase(order=ORDER, passes=5, warmup=3, **spread)
    return OrderSampler(quantity, s, _record_visits(), {a: a for a in ORDER}, reps=1, per_visit=max)


def test_the_schedule_is_forward_backward_forward():
    assert schedule(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    # prereg108_order_effect.txt '+/- (max - min) / 2 (%)': k=4 after k=2, [113.5, 74.2]: 93.85 +/- 19.65 (20.9%)
    assert round(half_range([113.5, 74.2]), 3) == 0.209 and half_range([5.0, 5.0]) == 0.0


@pytest.mark.parametrize("spread, value, end", [
    ({"arms": ["k8", "k4", "k2"], "after": "equal-or-higher", "statistic": "max"}, 0.018, "k8 after k8"),
    ({"arms": ["k8", "k4", "k2"], "after": "equal-or-higher", "statistic": "min"}, 0.008, "k4 after k8"),
    ({"arms": ["k4", "k8"], "after": "lower", "statistic": "min"}, 0.209, "k4 after k2"),
    ({"arms": ["k4", "k8"], "after": "lower", "statistic": "max"}, 0.724, "k8 after k4"),
])
def test_the_records_own_readings_give_the_registers_spreads(spread, value, end):
    """L-31: 'Arms preceded by an equal-or-higher k: 0.8-1.8% spread. The SAME arms preceded by a
    lower k: 20.9% (k=4 after k=2) and 72.4% (k=8 after k=4)'."""
    sampler = _replay(**spread)
    (sample,) = sampler.draw(1)
    assert round(sample.value, 3) == value and sample.raw["end"] == end
    assert sum(v["discarded"] for v in sampler.visits) == 3 and len(sampler.visits) == 23


def test_the_records_own_readings_give_the_k8_span():
    (sample,) = _replay("order_span", arms=["k8"]).draw(1)
    assert (sample.raw["slowest"], sample.raw["fastest"]) == (11.3, 70.7)  # 'ranged 11.3 to 70.7 tok/s'
    assert round(sample.value, 1) == 6.3  # 'a 6.3x span'
    assert sample.raw["groups"] == {"k8 after k8": [50.8, 51.1, 52.7], "k8 after k4": [70.7, 11.3]}


def _slowed_descending_pass(readings: list[float]) -> list[float]:
    """The record with its third pass (p3, descending) at half speed: matched arms then spread ~33 %."""
    return [v * 0.5 if 11 <= i < 15 else v for i, v in enumerate(readings)]


def _flat(readings: list[float]) -> list[float]:
    """The record with every arm's readings at their k's first reading: no order effect at all."""
    first = {0: 50.8, 1: 82.8, 2: 195.1, 3: 197.1}  # p1's readings, by position in the forward order
    arm_at = ["k8"] * 3 + schedule(ORDER, 5)
    return [first[ORDER.index(a)] for a in arm_at]


@pytest.mark.parametrize("aid", sorted(SHIPPED))
def test_each_shipped_anchor_passes_on_the_records_readings_and_turns_red_on_a_wrong_schedule(aid):
    """Core's own sequential rule, on three schedules replaying the record: PASS; on three wrong
    schedules (a slowed descending pass for the matched anchors, no order effect for the others): FAIL."""
    from lawbench.core.stats.verdicts import decide_sequential

    a = law_anchors(Law4())[aid]
    assert a.value == SHIPPED[aid] and a.kind == "measurement" and a.profiles == ["gtx1060"]
    case = order_cases(a)["k8"]
    wrong = _slowed_descending_pass(RECORD) if "matched" in aid else _flat(RECORD)

    def judge(readings: list[float]):
        queue = readings * 3
        visits = {arm: (lambda reps, q=queue: Visit(values=[q.pop(0)] * reps, wall_s=0.01)) for arm in ORDER}
        sampler = OrderSampler(case.quantity, case.spread, visits, {k: k for k in ORDER}, reps=1, per_visit=max)
        return decide_sequential(sampler.draw, sampler.statistic, a.band.interval(a.value), a.budget,
                                 log=sampler.log_scale)

    right = judge(RECORD)
    assert right.verdict is Verdict.PASS and right.statistic == pytest.approx(a.value, abs=0.0005 if a.unit != "x" else 0.05)
    bad = judge(wrong)
    assert bad.verdict is Verdict.FAIL, (bad.statistic, bad.interval)


def test_the_shipped_anchors_skip_off_their_box_and_fail_strict():
    anchors = law_anchors(Law4())
    for aid in SHIPPED:
        a = anchors[aid]
        cases = order_cases(a)
        assert {c.experts_used for c in cases.values()} == {8, 4, 2, 1}
        assert all(c.bench.tool == "batched-bench" and c.bench.n_prompt for c in cases.values())
        r = evaluate_anchor(a, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False)
        assert r.verdict is Verdict.SKIP and "gtx1060" in r.reason
        strict = evaluate_anchor(a, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False, strict=True)
        assert strict.verdict is Verdict.FAIL and strict.strict_skip


def order_anchor(**fields):
    data = dict(id="law4.test.order", law="law4", claim="test", quantity="order_spread", unit="fraction",
                kind="measurement", value=0.018, band={"lo": 0.0, "hi": 0.209}, profiles=["cpu"], provenance=PROV,
                noise="prefill", budget={"min_samples": 3, "max_samples": 3, "batch": 1, "timeout_s": 900})
    data.update(fields)
    return make_anchor(**data)


# The fastest of 3 repetitions a visit: on a shared 2-core box a neighbour only ever slows one down.
DENSE = {"quantity": "order_spread", "bench": {"n_gen": 0, "n_prompt": 64, "reps": 3, "per_visit": "fastest",
                                               "timeout_s": 120},
         "spread": {"order": ["a", "b", "c"], "passes": 3, "warmup": 1, "after": "equal-or-higher", "statistic": "max"}}
DENSE_ARMS = {"a": {"model": "gguf:syn-25m-q8_0"}, "b": {"model": "gguf:syn-25m-q4_0"}, "c": {"model": "gguf:syn-25m-q2_k"}}


@pytest.mark.parametrize("fields, field", [
    (dict(arms={"a": DENSE_ARMS["a"]}), "arms"),
    (dict(case={**DENSE, "spread": {**DENSE["spread"], "order": ["a", "b"]}}), "case.spread.order"),
    (dict(case={**DENSE, "spread": {**DENSE["spread"], "arms": ["z"]}}), "case.spread.arms"),
    (dict(case={**DENSE, "spread": {**DENSE["spread"], "after": None}}), "case.spread.after"),
    # after "lower" in 2 passes: c, the last, is never followed by… a lower arm than a once only
    (dict(case={**DENSE, "spread": {**DENSE["spread"], "passes": 2, "after": "lower", "arms": ["a"]}}),
     "case.spread.passes"),
    (dict(case={**DENSE, "bench": {**DENSE["bench"], "prime": "evict"}}), "arms.a.bench.prime"),
    (dict(kind="agreement", band={"rel": 0.5}), "kind"),
    (dict(quantity="order_span", case={**DENSE, "quantity": "order_span"}), "case.spread.arms"),
])
def test_a_bad_order_case_is_refused_naming_its_field(fields, field):
    anchor = order_anchor(**{"case": DENSE, "arms": DENSE_ARMS, **fields})
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(anchor)
    assert exc.value.field == field, str(exc.value)
    assert exc.value.anchor == "law4.test.order"


# --------------------------------------------------------------------------- integration: measured here


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory):
    """A --llama-dir: the real cached build behind the planting llama-bench stand-in."""
    from lawbench.core.engines.build import build_llamacpp
    from standin.planted_llama_bench import make_wrapper

    real = build_llamacpp(progress=None)
    return make_wrapper(tmp_path_factory.mktemp("wrapped-llama"), Path(real.bin_dir))


@pytest.fixture
def resources(wrapped):
    from lawbench.core.laws.resources import Resources

    for stale in ("planted.json", "invocations"):
        (wrapped / stale).unlink(missing_ok=True)
    r = Resources(llama_dir=str(wrapped), profile=PROFILES["cpu"])
    try:
        yield r
    finally:
        r.close()


@pytest.mark.integration
def test_order_spread_measures_here_and_a_run_order_slowdown_turns_it_red(resources, wrapped):
    """Three synthetic files stand in for the k arms (the runner's 35B file is not here): real
    llama-bench prefill visits in the record's schedule. Planted: every fourth engine process at a
    fifth of its speed (a schedule is 10 visits, and a group's two readings are 6 visits apart, so
    each sample's groups hold a slowed and an unslowed reading): red."""
    import json

    law, cpu = Law4(), PROFILES["cpu"]
    anchor = order_anchor(case=DENSE, arms=DENSE_ARMS, band={"lo": 0.0, "hi": 0.30})
    here = evaluate_anchor(anchor, law, profile=cpu, resources=resources)
    print(f"order_spread here: {here.measured:.4f} {here.interval} {here.verdict.value}")
    samples = here.measurement.samples
    assert len(samples) == 3
    visits = here.measurement.protocol["visits"]
    assert len(visits) == 3 * (1 + 9) and [v["arm"] for v in visits[:10]] == ["a"] + schedule(["a", "b", "c"], 3)
    for s in samples:
        assert s.value == pytest.approx(max(half_range(v) for v in s.raw["groups"].values()))
        assert all(k.split(" after ")[1] in ("a", "b", "c") for k in s.raw["groups"])

    (wrapped / "planted.json").write_text(json.dumps({"slow_every": [4, 0.2]}), encoding="utf-8")
    shaky = evaluate_anchor(anchor, law, profile=cpu, resources=resources)
    print(f"order_spread planted: {shaky.measured:.4f} {shaky.interval} {shaky.verdict.value}")
    assert shaky.verdict is Verdict.FAIL, shaky.reason
    assert shaky.measured > 0.5  # a group holding a slowed and an unslowed run: (1 - 0.2) / 2 / 0.6 = 0.67


@pytest.mark.integration
def test_the_k_arms_run_at_their_k_in_batched_bench_on_a_real_moe_file(tmp_path):
    """The runner's arms: prefill schedules through k = 4, 2, 1 on a tiny real MoE GGUF, each visit's
    load log checked for its k by llama-batched-bench's runner (lawbench.engines). Its verdict is this
    box's load (a 64-token prefill on a 2-core box), so only the span's own arithmetic is asserted."""
    from test_batched_bench import write_moe

    from lawbench.core.laws.resources import Resources

    moe = write_moe(tmp_path / "tiny-moe-4x2.gguf")
    case = {"quantity": "order_span", "placement": {"ngl": 0}, "model": f"path:{moe}",
            "bench": {"tool": "batched-bench", "n_gen": 0, "n_prompt": 64, "reps": 1, "timeout_s": 120},
            "spread": {"order": ["k4", "k2", "k1"], "passes": 2, "warmup": 1, "arms": ["k4"]}}
    anchor = order_anchor(quantity="order_span", unit="x", value=1.0, band={"lo": 1.0}, case=case,
                          arms={"k4": {"experts_used": 4}, "k2": {"experts_used": 2}, "k1": {"experts_used": 1}},
                          budget={"min_samples": 3, "max_samples": 3, "batch": 3, "timeout_s": 600})
    r = Resources(profile=PROFILES["cpu"])
    try:
        result = evaluate_anchor(anchor, Law4(), profile=PROFILES["cpu"], resources=r)
    finally:
        r.close()
    print(f"order_span k4 here: {result.measured} {result.interval} {result.verdict.value} {result.reason}")
    visits = result.measurement.protocol["visits"]
    assert [v["raw"]["experts_used"] for v in visits[:7]] == [4, 4, 2, 1, 1, 2, 4]
    samples = result.measurement.samples
    assert len(samples) == 3 and result.verdict is not Verdict.ERROR, result.reason
    for s in samples:  # the k=4 arm's fastest reading over its slowest, over both its predecessors
        assert set(s.raw["groups"]) == {"k4 after k4", "k4 after k2"}
        assert s.value == pytest.approx(s.raw["fastest"] / s.raw["slowest"]) and s.value >= 1.0
