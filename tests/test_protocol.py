"""The protocol with real subprocesses standing in for an engine visit (timing a real `sleep`)."""
import subprocess
import time

import pytest

from lawbench.core.laws.law import EngineError
from lawbench.core.stats.protocol import ArmSampler, Visit


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
