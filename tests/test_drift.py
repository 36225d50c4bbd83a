"""Drift: the step test's false-alarm rate and power by simulation, and find_drifts on a real store."""
from __future__ import annotations

import json
import math
import random

import pytest
from conftest import history_in_process

from lawbench.core.history.drift import STEP_METHOD, find_drifts, standard_error, step_test
from lawbench.core.history.store import History
from lawbench.core.models import Result, Verdict
from lawbench.core.record.reports import RunRecord

LLAMA = {"name": "llama.cpp", "version": "11434.0.0", "backend": "cpu", "build_number": 11434,
         "commit": "unknown"}


def simulate(rng: random.Random, n: int, tau: float, step: float = 0.0, at: int = 0) -> tuple:
    """A series of log values with per-run standard errors drawn like the cpu runner's (0.01 to
    0.05 in log units: intervals of about ±2 % to ±10 %), a between-run scatter `tau` the
    intervals do not show, and a step of `step` from point `at` on."""
    se = [rng.uniform(0.01, 0.05) for _ in range(n)]
    y = [rng.gauss(0, s) + rng.gauss(0, tau) + (step if i >= at else 0.0) for i, s in enumerate(se)]
    return y, se


def rate_at_most(flag, alpha: float, excess: float = 1.3, miss: float = 0.05, false_red: float = 0.001,
                 max_reps: int = 40_000) -> tuple[bool, int, int]:
    """Wald's sequential test of "``flag()`` is true at rate alpha" against "at rate excess·alpha":
    series are drawn until one is shown (a rate 30 % too high is missed at most ``miss`` of the
    time, a right one turned red at most ``false_red``), so a rate far below alpha stops after a
    few hundred series and one near it draws thousands. Returns (accepted, flagged, drawn); a
    truncated run takes the nearer hypothesis."""
    p0, p1 = alpha, excess * alpha
    up, down = math.log((1 - miss) / false_red), math.log(miss / (1 - false_red))
    hit, no_hit = math.log(p1 / p0), math.log((1 - p1) / (1 - p0))
    llr, flagged = 0.0, 0
    for drawn in range(1, max_reps + 1):
        if flag():
            flagged, llr = flagged + 1, llr + hit
        else:
            llr += no_hit
        if llr >= up or llr <= down:
            return llr <= down, flagged, drawn
    return flagged / max_reps <= (p0 + p1) / 2, flagged, max_reps


@pytest.mark.parametrize("rate, accepted", [(0.05, True), (0.0, True), (0.065, False), (0.08, False)])
def test_the_rate_test_tells_alpha_from_thirty_percent_more(rate, accepted):
    """The sequential test below can fail: a stream flagged 30 % more often than alpha is refused."""
    rng = random.Random(int(rate * 1000))
    got, flagged, drawn = rate_at_most(lambda: rng.random() < rate, 0.05)
    assert got is accepted, (flagged, drawn)


@pytest.mark.parametrize("n", [4, 8, 20])
@pytest.mark.parametrize("tau", [0.0, 0.03])
def test_false_alarm_rate_is_at_most_alpha(n, tau):
    """No step: at alpha = 0.05 the test flags at most 5 % of series, with or without a
    between-run scatter as large as a typical run's own error; a rate 30 % higher would be refused
    (rate_at_most; 1000 series and three binomial sigmas let a rate 40 % too high pass)."""
    rng = random.Random(1000 * n + int(tau * 1000))
    alpha = 0.05
    ok, flagged, drawn = rate_at_most(
        lambda: (s := step_test(*simulate(rng, n, tau))) is not None and s.p_value < alpha, alpha)
    assert ok, f"{flagged} of {drawn} series flagged at alpha {alpha}"


def test_false_alarm_rate_at_the_default_alpha():
    rng = random.Random(7)
    ok, flagged, drawn = rate_at_most(
        lambda: (s := step_test(*simulate(rng, 12, 0.03))) is not None and s.p_value < 0.01, 0.01)
    assert ok, f"{flagged} of {drawn} series flagged at alpha 0.01"


@pytest.mark.parametrize("n, at", [(10, 5), (10, 7), (20, 17)])
def test_a_step_of_a_few_interval_widths_is_found_at_the_right_run(n, at):
    """A step of 0.35 in log (+42 %), about three widths of a typical run's 95 % interval
    (2 × 1.96 × 0.03 = 0.12), with between-run scatter: found nearly always, dated right."""
    rng = random.Random(n * 100 + at)
    reps, found, dated = 300, 0, 0
    for _ in range(reps):
        s = step_test(*simulate(rng, n, 0.03, step=0.35, at=at))
        if s is not None and s.p_value < 0.01:
            found += 1
            dated += s.index == at
    assert found / reps >= 0.95 and dated / reps >= 0.9


def test_series_too_short_have_no_split():
    assert step_test([0.0, 0.1, 0.2], [0.01] * 3) is None
    assert step_test([0.0, 0.0, 1.0, 1.0], [0.01] * 4).index == 2


def test_standard_error_reads_the_interval_the_verdict_used():
    # A Student-t interval on logs at 98.75 % per look, n = 4: half-width = t(0.99375, 3) * se.
    from scipy import stats

    se = 0.02
    half = stats.t.ppf(0.99375, 3) * se
    lo, hi = math.exp(-half), math.exp(half)
    assert standard_error(1.0, lo, hi, 0.9875, 4) == pytest.approx(se)
    assert standard_error(1.0, lo, hi) == pytest.approx(half / 1.959964)  # no record: 95 % normal
    assert standard_error(1.0, -1.0, 2.0) is None and standard_error(1.0, 1.0, math.inf) is None
    assert standard_error(2.0, 2.0, 2.0) > 0  # a point interval still weighs finitely


# --------------------------------------------------------------------------- on a store


def result(anchor_id: str, measured: float, se: float = 0.02, verdict: Verdict = Verdict.PASS,
           **kw) -> Result:
    half = 1.96 * se
    return Result(anchor_id=anchor_id, law="law4", kind="agreement", profile="cpu", verdict=verdict,
                  unit="x", measured=measured, interval=(measured * math.exp(-half),
                                                          measured * math.exp(half)),
                  band=(0.5, 1.5), **kw)


def night(i: int, results: list[Result], engine=LLAMA, profile="cpu", matches=True) -> RunRecord:
    return RunRecord(run_id=f"{i:04d}" + "0" * 28, started=f"2025-06-{i + 1:02d}T02:00:00+00:00",
                     profile=profile, engine=engine, profile_matches=matches).finish(results)


@pytest.fixture
def store(tmp_path):
    with History(tmp_path / "history.sqlite") as h:
        yield h


def test_a_drift_is_found_while_the_verdict_still_passes(store):
    """Ten nights at 1.00 ± 1 %, then five at 1.15: every verdict PASS (band 0.5 to 1.5), the
    drift is reported with the first night that moved; a steady anchor beside it is not."""
    rng = random.Random(3)
    for i in range(15):
        level = 1.0 if i < 10 else 1.15
        store.append(night(i, [result("a.moves", level * math.exp(rng.gauss(0, 0.01))),
                               result("a.steady", math.exp(rng.gauss(0, 0.01)))]))
    (drift,) = find_drifts(store)
    assert (drift.anchor_id, drift.profile, drift.engine) == ("a.moves", "cpu", "llama.cpp b11434 cpu")
    assert drift.first_run_id == "0010" + "0" * 28 and drift.first_started.startswith("2025-06-11")
    assert drift.before == pytest.approx(1.0, rel=0.02) and drift.after == pytest.approx(1.15, rel=0.02)
    assert drift.p_value < 1e-6 and drift.runs == 15 and drift.method == STEP_METHOD
    assert all(r.verdict == "PASS" for r in store.anchor_history("a.moves"))


def test_series_split_on_engine_build_and_profile_and_skip_what_is_not_evidence(store):
    """A new engine build starts a new series (its own step is not a drift); SKIP / ERROR rows,
    rows without a measured value and runs on a machine that did not match are left out."""
    rng = random.Random(4)
    newer = {**LLAMA, "build_number": 11500}
    i = 0
    for engine, level in ((LLAMA, 1.0), (newer, 1.3)):
        for _ in range(6):
            store.append(night(i, [result("a.x", level * math.exp(rng.gauss(0, 0.01)))], engine=engine))
            i += 1
    for _ in range(3):  # off-profile, skipped and failed-to-run nights at another level
        store.append(night(i, [result("a.x", 2.0)], matches=False))
        store.append(night(i + 1, [result("a.x", 2.0, verdict=Verdict.SKIP)]))
        store.append(night(i + 2, [result("a.x", 2.0, verdict=Verdict.ERROR)]))
        i += 3
    assert find_drifts(store) == []
    from lawbench.core.history.drift import series

    lengths = {k: len(v) for k, v in series(store).items()}
    assert lengths == {("a.x", "cpu", "llama.cpp b11434 cpu"): 6, ("a.x", "cpu", "llama.cpp b11500 cpu"): 6}
    assert find_drifts(store, profile="gtx1060") == []


def test_cli_drift_is_a_warning_with_the_first_run_that_moved(store, capsys):
    for i in range(8):
        store.append(night(i, [result("a.moves", 1.0 if i < 4 else 0.8, se=0.01)]))
    code, out, _ = history_in_process(["history", "drift", "--db", str(store.path)], capsys)
    assert code == 0 and "1 series drifted" in out and "a.moves" in out
    assert "0004000000" in out and "1 -> 0.8 (-20.0%)" in out and "method:" in out
    code, out, _ = history_in_process(["history", "drift", "--db", str(store.path), "--json"], capsys)
    (d,) = json.loads(out)
    assert d["first_run_id"] == "0004" + "0" * 28 and d["runs"] == 8
    code, out, _ = history_in_process(["history", "drift", "--db", str(store.path), "--profile", "h200"], capsys)
    assert code == 0 and "no drift at alpha = 0.01: 0 series, 0 long enough to test" in out
    code, _, err = history_in_process(["history", "drift", "--db", str(store.path), "--alpha", "2"], capsys)
    assert code == 2 and "--alpha must be between 0 and 1" in err and err.count("\n") == 1


def test_interval_levels_read_the_typed_sampling_and_rows_an_older_lawbench_wrote(store, monkeypatch):
    """Issue 33: the level an interval was made at is the typed `Result.sampling`; a history row
    appended before that field holds it as `detail.interval`, and drift reads both alike."""
    import lawbench.core.history.store as store_module
    from lawbench.core.models.result import Sampling

    made = Sampling(method="student-t on logs", confidence_per_look=0.9875, looks=[4, 7, 10], n=7,
                    family_confidence=0.95)
    store.append(night(1, [result("law4.a", 1.0, sampling=made)]))
    real = store_module.to_json

    def as_schema_3(record, indent=None):  # what lawbench wrote before the field existed
        data = json.loads(real(record, indent=indent))
        for r in data["results"]:
            r["detail"]["interval"] = r.pop("sampling")
        return json.dumps(data)

    monkeypatch.setattr(store_module, "to_json", as_schema_3)
    store.append(night(2, [result("law4.a", 1.0, sampling=made.model_copy(update={"n": 10}))]))
    levels = store.interval_levels()
    assert levels == {(night(1, []).run_id, "law4.a"): (0.9875, 7), (night(2, []).run_id, "law4.a"): (0.9875, 10)}
    old = store.record(night(2, []).run_id).results[0]  # and the old row reads back typed
    assert old.sampling == made.model_copy(update={"n": 10}) and "interval" not in old.detail
