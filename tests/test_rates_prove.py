"""`lawbench gate prove` (issue 31): a runner's accepted nights replayed through the gate's own rate
hook with planted slowdowns; detection per size and false alarms on the unplanted nights."""
from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from lawbench.core.history.prove import ALL, plant, prove, runner_nights
from lawbench.core.history.store import History
from lawbench.core.models import RateSample, RateSeries, Result, Verdict
from lawbench.core.record.reports import RunRecord

from _rate_nights import ENGINE, MACHINE, gate_night, rate

Q4 = RateSeries(model="m-q4_0", format="Q4_0", placement="tg16", quantity="decode tok/s")
Q8 = RateSeries(model="m-q8_0", format="Q8_0", placement="tg16", quantity="decode tok/s")
LAWBENCH = str(Path(sys.executable).with_name("lawbench"))


def _night(history, day: int, q4: float, q8: float) -> RunRecord:
    """A night judged by the real gate against ``history`` and appended to it."""
    return gate_night(history, day, [rate(Q4, q4), rate(Q8, q8)], anchor_id="x.ratio")


def _history(path, nights: int, sd: float = 0.02, seed: int = 1):
    rng = random.Random(seed)
    with History(path) as h:
        for day in range(1, nights + 1):
            _night(h, day, 50.0 * rng.lognormvariate(0, sd), 30.0 * rng.lognormvariate(0, sd))


def test_plant_scales_one_format_only():
    rec = RunRecord(run_id="a" * 32, started="2026-11-01T00:00:00+00:00", profile="p", git_commit="c" * 40).finish(
        [Result(anchor_id="x", law="x", kind="measurement", profile="p", verdict=Verdict.PASS,
                rates=[RateSample(series=Q4, values=[10.0], measured=10.0, interval=(9.0, 11.0), recheck=[9.0, 10.5]),
                       RateSample(series=Q8, values=[20.0], measured=20.0, interval=(18.0, 22.0))])])
    rates = {r.series.format: r for r in plant(rec, "Q4_0", 0.4).results[0].rates}
    assert rates["Q4_0"].measured == 6.0 and rates["Q4_0"].interval == pytest.approx((5.4, 6.6))
    # a night read again is planted in both rounds: the gate reads the fastest of both
    assert rates["Q4_0"].recheck == pytest.approx([5.4, 6.3]) and rates["Q4_0"].fastest == pytest.approx(6.3)
    assert rates["Q8_0"].measured == 20.0
    assert rec.results[0].rates[0].measured == 10.0  # the night itself is left as it was


def test_the_replay_detects_large_slowdowns_and_counts_false_alarms(tmp_path):
    _history(tmp_path / "h.sqlite", 9)
    with History(tmp_path / "h.sqlite", create=False) as h:
        nights, setup = runner_nights(h, "p")
        assert len(nights) == 9 and "b11434" in setup
        proof = prove(nights, sizes=(0.02, 0.40))
    assert proof.judged == 9 and proof.series == 2
    for target in ("Q4_0", "Q8_0", ALL):
        big = proof.row(target, 0.40)
        assert big.trials == 9 and big.detected == 9, target  # 40 % on 2 % noise: always
    assert proof.row("Q4_0", 0.02).detected < 9  # 2 % is within 2 % noise: not always seen
    assert proof.false_alarms <= 1


def test_the_command_prints_its_table_and_refuses_too_short_a_history(tmp_path):
    _history(tmp_path / "h.sqlite", 8)
    out = subprocess.run([LAWBENCH, "gate", "prove", "--profile", "p",
                          "--baseline", str(tmp_path / "h.sqlite"), "--sizes", "10,40"],
                         capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert out.returncode == 0, out.stderr
    assert "| one format: Q4_0 | " in out.stdout and "| all formats | " in out.stdout
    assert "| planted slowdown on | 10 % | 40 % |" in out.stdout
    assert "false alarms:" in out.stdout and "of 8 unplanted nights" in out.stdout
    _history(tmp_path / "short.sqlite", 4)
    out = subprocess.run([LAWBENCH, "gate", "prove", "--profile", "p",
                          "--baseline", str(tmp_path / "short.sqlite")], capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert out.returncode == 1 and "cannot prove" in out.stdout and "Traceback" not in out.stderr
    out = subprocess.run([LAWBENCH, "gate", "prove", "--profile", "p",
                          "--baseline", str(tmp_path / "h.sqlite"), "--sizes", "ten"],
                         capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert out.returncode == 2 and "--sizes" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([LAWBENCH, "gate", "prove", "--profile", "p", "--baseline", str(tmp_path / "nothing-here")],
                         capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "cannot prove" in out.stdout and "does not exist" in out.stdout, out.stdout
    # the baseline is read as the gate reads it: another profile's history proves nothing here
    out = subprocess.run([LAWBENCH, "gate", "prove", "--profile", "cpu", "--baseline", str(tmp_path / "h.sqlite")],
                         capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert out.returncode == 1 and "cannot prove" in out.stdout and "Traceback" not in out.stderr, out


def test_a_developer_run_says_slower_since_the_last_run_from_the_local_history(tmp_path):
    """The quick run's note, from a real history: the last comparable run is found by the gate's own
    baseline_of, and a rate whose interval lies below the last run's is said slower (never failed)."""
    from lawbench.core.history.gate import baseline_of
    from lawbench.core.history.rates import since_last_run

    def run(day, q4):
        rates = [RateSample(series=Q4, engine="b1", values=[q4] * 3, measured=q4, interval=(q4 * 0.98, q4 * 1.02)),
                 RateSample(series=Q8, engine="b1", values=[30.0] * 3, measured=30.0, interval=(29.4, 30.6))]
        r = Result(anchor_id="x", law="x", kind="measurement", profile="p", verdict=Verdict.FAIL, rates=rates)
        return RunRecord.new("p", profile_matches=True, strict=False, cadence="quick", machine=MACHINE,
                             engine=ENGINE, started=f"2026-11-{day:02d}T09:00:00+00:00").finish([r])

    with History(tmp_path / "h.sqlite") as h:
        first = run(1, 50.0)
        h.append(first)
        second = run(2, 40.0)  # Q4_0 20 % slower, Q8_0 as it was
        lines = since_last_run(second, baseline_of(second, h).nights[-1])
    assert len(lines) == 1 and lines[0].startswith(f"slower since your last run ({first.run_id[:12]})")
    assert "Q4_0" in lines[0] and "-20.0%" in lines[0]
    assert since_last_run(run(3, 50.5), first) == []  # within both intervals: nothing said
