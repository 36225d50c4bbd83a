"""The protocol with real subprocesses standing in for an engine visit (timing a real `sleep`)."""
import math
import subprocess
import time

import pytest

from lawbench.core.errors import EngineError
from lawbench.core.stats.protocol import ArmSampler, InterleavedSampler, Visit, round_order


def sleeper(seconds):
    """A visit that really runs a process and reports 1/elapsed as its reading."""
    def visit(reps):
        vals = []
        for _ in range(reps):
            t0 = time.perf_counter()
            subprocess.run(["sleep", str(seconds)], check=True)
            vals.append(1.0 / (time.perf_counter() - t0))
        return Visit(vals)
    return visit


def test_single_arm_records_predecessors_and_warmup():
    s = ArmSampler({"main": sleeper(0.01)}, labels={"main": "cfg-A"}, reps_per_visit=2)
    samples = s.draw(4)
    assert len(samples) == 4 and all(x.value > 0 for x in samples)
    # the warm-up visit ran first and was discarded; every sample knows what ran before it
    assert s.visits[0]["discarded"] is True
    assert [x.predecessor for x in samples] == ["cfg-A"] * 4
    proto = s.protocol()
    assert proto["warmup_visits_per_arm"] == 1 and proto["reps_per_visit"] == 2
    assert "before" in s.environment()


def test_ratio_arms_interleave_abba_and_pair_within_round():
    s = ArmSampler({"a": sleeper(0.05), "b": sleeper(0.5)}, labels={"a": "fast", "b": "slow"})
    samples = s.draw(4)
    assert [x.raw["order"] for x in samples] == ["ab", "ba", "ab", "ba"]
    # a sleeps less, so its reading (1/elapsed) is higher: every within-round ratio is above 1
    assert all(x.value > 1.0 for x in samples)
    real = [v for v in s.visits if not v["discarded"]]
    assert [v["arm"] for v in real] == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert real[1]["predecessor"] == "fast" and real[2]["predecessor"] == "slow"


def test_fault_keeps_samples_taken_so_far():
    calls = {"n": 0}

    def flaky(reps):
        calls["n"] += 1
        if calls["n"] > 3:
            raise EngineError("engine exited with status 3", samples=[])
        return Visit([10.0] * reps)

    s = ArmSampler({"main": flaky}, warmup=True)
    with pytest.raises(EngineError) as ei:
        s.draw(5)
    assert [x.value for x in ei.value.samples] == [10.0, 10.0]


def test_difference_of_paired_arms():
    s = ArmSampler({"a": lambda reps: Visit([7636.0] * reps), "b": lambda reps: Visit([6182.0] * reps)},
                   warmup=False, combine="difference")
    samples = s.draw(2)
    assert [x.value for x in samples] == [1454.0, 1454.0] and samples[0].arm == "a-b"
    assert s.protocol()["statistic"] == "difference"
    with pytest.raises(ValueError):
        ArmSampler({"main": sleeper(0.01)}, combine="sum")


# --- InterleavedSampler: any number of arms, one paired sample a round (Law 1, Law 3) -----------

def _slice_arm(calls: list, name: str, nll_of_slice):
    """A stand-in for SliceVisits: each visit scores this arm's next slice; the call is logged."""
    state = {"next": 0}

    def visit():
        k = state["next"]
        state["next"] += 1
        calls.append(name)
        nll = nll_of_slice(name, k)
        return Visit([math.exp(nll)], raw={"slice": k, "nll": nll, "ppl": math.exp(nll)})
    return visit


def _old_law1_order(round_index):  # plugins/law1 before InterleavedSampler (main f8b2396)
    return ("gauge", "native") if round_index % 2 == 0 else ("native", "gauge")


def _old_law3_order(arms, round_index):  # plugins/law3 before InterleavedSampler (main f8b2396)
    arms = sorted(arms)
    return arms[round_index % len(arms):] + arms[:round_index % len(arms)]


def test_round_order_is_the_abba_of_armsampler_and_rotates_more_arms():
    assert [round_order(("a", "b"), r) for r in range(4)] == [("a", "b"), ("b", "a")] * 2
    assert [round_order(("a", "b", "src"), r) for r in range(4)] == [
        ("a", "b", "src"), ("b", "src", "a"), ("src", "a", "b"), ("a", "b", "src")]


def test_law1_rounds_visit_the_arms_in_the_order_and_give_the_values_they_gave_before():
    from lawbench.plugins.law1.model_level import _ratio, _round_raw

    calls: list = []
    nll = lambda arm, k: 3.0 + 0.01 * k + (0.2 if arm == "gauge" else 0.0)  # noqa: E731
    s = InterleavedSampler({a: _slice_arm(calls, a, nll) for a in ("native", "gauge")}, _ratio,
                           raw=_round_raw, log_raw=("slice", "nll", "ppl"))
    samples = s.draw(3) + s.draw(2)  # a second batch goes on where the first stopped
    want = [a for r in range(5) for a in _old_law1_order(r)]
    assert calls == want and [x.raw["order"] for x in samples] == [list(_old_law1_order(r)) for r in range(5)]
    assert [x.raw["slice"] for x in samples] == [0, 1, 2, 3, 4]  # both arms on the same slice each round
    for x in samples:
        assert x.value == pytest.approx(math.exp(0.2))
        assert x.value == pytest.approx(x.raw["ppl_gauge"] / x.raw["ppl_native"])
    assert [v["predecessor"] for v in s.visits[:4]] == [None, "gauge", "native", "native"]
    assert s.protocol()["visits"][1] | {"wall_s": 0} == {
        "round": 0, "arm": "native", "predecessor": "gauge", "values": [math.exp(3.0)], "wall_s": 0,
        "slice": 0, "nll": 3.0, "ppl": math.exp(3.0)}


@pytest.mark.parametrize("statistic", ["ppl_ratio", "damage_ratio"])
def test_law3_rounds_rotate_every_arm_as_before(statistic):
    from lawbench.plugins.law3.law import _round_raw, _round_value

    calls: list = []
    arms = ("a", "b", "src") if statistic == "damage_ratio" else ("a", "b")
    nll = lambda arm, k: {"a": 2.5, "b": 2.2, "src": 2.0}[arm] + 0.1 * k  # noqa: E731
    s = InterleavedSampler({a: _slice_arm(calls, a, nll) for a in reversed(arms)}, _round_value(statistic),
                           arm="a/b", raw=_round_raw)
    samples = s.draw(4)
    assert calls == [a for r in range(4) for a in _old_law3_order(arms, r)]
    want = math.exp(0.3) if statistic == "ppl_ratio" else 0.5 / 0.2
    assert [x.value for x in samples] == pytest.approx([want] * 4)
    assert {x.arm for x in samples} == {"a/b"} and [x.raw["slice"] for x in samples] == [0, 1, 2, 3]


def test_an_engine_fault_keeps_the_rounds_finished_so_far():
    calls: list = []
    good = _slice_arm(calls, "a", lambda arm, k: 1.0)

    def dies_in_round_3():
        if len(calls) >= 4:
            raise EngineError("llama-perplexity exited with code 1", samples=[])
        return good()

    s = InterleavedSampler({"a": good, "b": dies_in_round_3}, lambda v: 1.0)
    with pytest.raises(EngineError) as ei:
        s.draw(5)
    assert len(ei.value.samples) == 2
    with pytest.raises(ValueError, match="two arms or more"):
        InterleavedSampler({"a": good}, lambda v: 1.0)
