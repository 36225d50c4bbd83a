"""The nightly gate (core/history/gate.py): each rule that turns a night red, what keeps it green, what a
change of machine or engine build does, acknowledged reds, and the drift rule's false-alarm rate
measured by simulation. Records are real RunRecords in a real SQLite history; their numbers are
made up here because the rules under test are arithmetic on verdicts and intervals."""
from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest

from lawbench.core.history.drift import step_test
from lawbench.core.history.gate import DRIFT_ALPHA, judge, load_acknowledged, machine_fingerprint
from lawbench.core.history.store import History
from lawbench.core.models import Result, Verdict
from lawbench.core.models.gate import AcknowledgedFile, Acknowledgement
from lawbench.core.record.reports import RunRecord

MACHINE = {"hostname": "box", "cpu_model": "Test CPU", "cpu_count_logical": 4, "ram_total_gb": 15.6, "gpus": []}
ENGINE = {"name": "llama.cpp", "build_number": 11434, "backend": "cpu"}


def result(anchor: str, verdict: str = "PASS", measured: float = 1.0, kind: str = "agreement",
           counts: dict | None = None, **detail) -> Result:
    r = Result(anchor_id=anchor, law="law4", kind=kind, profile="p", verdict=Verdict(verdict), reason=f"{verdict} here",
               measured=None if kind == "census" else measured,
               interval=None if kind == "census" else (measured * 0.98, measured * 1.02),
               band=(0.75, 1.25), detail=dict(detail))
    if counts is not None:
        r.census_counts = counts
    return r


def night(day: int, results: list[Result], *, machine=MACHINE, engine=ENGINE, history=None, acks=None) -> RunRecord:
    """One finished night (started on 2026-11-<day>), judged against ``history`` when given, and appended to it."""
    rec = RunRecord.new("p", profile_matches=True, strict=True, cadence="nightly", machine=machine, engine=engine,
                        started=f"2026-11-{day:02d}T02:17:00+00:00")
    rec.finish(results, gate=(lambda r: judge(r, history, acks)) if history is not None else None)
    if history is not None:
        history.append(rec)
    return rec


@pytest.fixture
def history(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        yield h


def kinds(rec: RunRecord) -> dict[str, str]:
    return {n.anchor_id: n.kind for n in rec.gate.news}


def test_unchanged_nights_are_green_and_the_first_starts_the_baseline(history):
    first = night(1, [result("a"), result("b")], history=history)
    assert first.gate.verdict == "green" and first.exit_code == 0
    assert "starts its baseline" in first.gate.new_baseline
    second = night(2, [result("a"), result("b")], history=history)
    assert second.gate.verdict == "green" and second.gate.new_baseline is None
    assert second.gate.baseline_run_id == first.run_id and second.gate.baseline_runs == 1


def test_pass_to_fail_is_red_naming_the_anchor_and_the_absolute_verdict_stays(history):
    night(1, [result("a"), result("b")], history=history)
    rec = night(2, [result("a", "FAIL", 0.6), result("b")], history=history)
    assert rec.gate.verdict == "red" and rec.exit_code == 1
    [red] = rec.gate.red_news
    assert (red.anchor_id, red.kind, red.before, red.after) == ("a", "turned", "PASS", "FAIL")
    assert rec.results[0].verdict is Verdict.FAIL and rec.counts["FAIL"] == 1  # nothing hidden


def test_a_standing_fail_is_not_news_but_a_new_anchor_that_is_not_green_is(history):
    # an absolute FAIL in an accepted night (before the gate: exit 0 needs no FAIL, so accept it by an ack)
    acks = AcknowledgedFile(profile="p", acknowledged=[])
    night(1, [result("a")], history=history, acks=acks)
    rec = night(2, [result("a"), result("new", "VOID")], history=history)
    assert kinds(rec) == {"new": "new-not-green"} and rec.gate.verdict == "red"


def test_void_once_is_a_note_and_void_twice_running_is_red(history):
    night(1, [result("a")], history=history)
    once = night(2, [result("a", "VOID")], history=history)
    assert kinds(once) == {"a": "void-once"} and once.gate.verdict == "green"
    twice = night(3, [result("a", "VOID")], history=history)
    assert kinds(twice) == {"a": "void-twice"} and twice.gate.verdict == "red"


def test_any_to_error_is_red_even_from_fail(history):
    night(1, [result("a")], history=history)
    rec = night(2, [result("a", "ERROR")], history=history)
    assert kinds(rec) == {"a": "error"} and rec.gate.verdict == "red"


def test_a_census_that_lost_a_label_is_red(history):
    night(1, [result("c", kind="census", counts={"buffer:CPU_REPACK": 1, "repacked_tensors": 70})], history=history)
    kept = night(2, [result("c", kind="census", counts={"buffer:CPU_REPACK": 1, "repacked_tensors": 70})],
                 history=history)
    assert kept.gate.verdict == "green"
    lost = night(3, [result("c", kind="census", counts={"repacked_tensors": 70})], history=history)
    [red] = lost.gate.red_news
    assert red.kind == "lost-label" and "buffer:CPU_REPACK" in red.why


def test_an_open_finding_that_closed_is_red(history):
    night(1, [result("f", "FAIL", open_finding="known")], history=history)
    rec = night(2, [result("f", "FAIL", finding_closed="known")], history=history)
    assert kinds(rec) == {"f": "finding-closed"} and rec.gate.verdict == "red"


def test_a_new_engine_build_or_machine_starts_a_new_baseline_and_says_so(history):
    night(1, [result("a")], history=history)
    newer = night(2, [result("a", "FAIL")], history=history, engine={**ENGINE, "build_number": 11500})
    assert "engine build llama.cpp b11434 cpu -> llama.cpp b11500 cpu" in newer.gate.new_baseline
    assert kinds(newer) == {"a": "new-not-green"}  # judged as new: no accepted night on this build
    other_box = night(3, [result("a")], history=history, machine={**MACHINE, "cpu_model": "Other CPU"})
    assert "machine" in other_box.gate.new_baseline and other_box.gate.verdict == "green"
    assert machine_fingerprint({**MACHINE, "hostname": "renamed"}) == machine_fingerprint(MACHINE)


def test_an_acknowledged_red_is_green_shown_and_comes_back_when_its_date_passes(history):
    night(1, [result("a")], history=history)
    ack = AcknowledgedFile(profile="p", acknowledged=[Acknowledgement(
        anchor="a", kind="turned", why="known regression of b11434, fixed upstream", claim="the claim",
        accepted_by="maintainer", until=dt.date(2026, 11, 5))])
    rec = night(2, [result("a", "FAIL")], history=history, acks=ack)
    assert rec.gate.verdict == "green" and rec.exit_code == 0 and rec.gate.acknowledged == ["a"]
    [shown] = rec.gate.news
    assert shown.kind == "turned" and shown.acknowledged_until == "2026-11-05" and not shown.red
    # the acknowledged anchor's baseline stays at its PASS: the red is still news the next night
    again = night(3, [result("a", "FAIL")], history=history, acks=ack)
    assert again.gate.verdict == "green" and kinds(again) == {"a": "turned"}
    late = night(6, [result("a", "FAIL")], history=history, acks=ack)
    assert late.gate.verdict == "red" and late.gate.expired == ["a until 2026-11-05"]
    assert {n.kind for n in late.gate.red_news} == {"turned", "acknowledgement-expired"}


def test_anchors_not_reached_are_red_and_the_absolute_record_fails_too(history):
    rec = RunRecord.new("p", profile_matches=True, machine=MACHINE, engine=ENGINE)
    rec.finish([result("a")], not_reached=["b", "c"])
    assert rec.exit_code == 1 and rec.not_reached == ["b", "c"] and rec.gate is None
    night(1, [result("a")], history=history)
    gated = RunRecord.new("p", profile_matches=True, machine=MACHINE, engine=ENGINE, started="2026-11-02T02:17:00+00:00")
    gated.finish([result("a")], not_reached=["b"], gate=lambda r: judge(r, history, None, not_reached=("b",)))
    assert kinds(gated) == {"b": "not-reached"} and gated.exit_code == 1


def test_a_drift_step_is_red_the_night_it_can_first_be_seen(history):
    for day in range(1, 7):
        assert night(day, [result("a", measured=1.0 + 0.002 * (day % 2))], history=history).gate.verdict == "green"
    # 0.9: still inside the band [0.75, 1.25] (no verdict turns), a step of 10 % against ±2 % intervals
    first = night(7, [result("a", measured=0.9)], history=history)
    assert first.gate.verdict == "green"  # one night after a step is an outlier, not yet a level
    second = night(8, [result("a", measured=0.9)], history=history)
    [red] = second.gate.red_news
    assert red.kind == "drift" and red.anchor_id == "a" and f"alpha {DRIFT_ALPHA:g}" in red.why


@pytest.mark.parametrize("scatter", [0.0, 0.03, 0.05])
def test_the_drift_rule_false_alarm_rate_per_night_is_at_most_alpha(scatter):
    """The gate's drift rule on series with no step: a night is red when a step is found on the
    accepted nights plus tonight and not on the accepted nights alone. Simulated on 1000 runners of
    12 nights each; each night's interval has a standard error of 1-3 % and the nights scatter by
    ``scatter`` more than their intervals say (a busy neighbour). One series, so its alpha is the
    night's whole DRIFT_ALPHA (0.2 %; tests/test_gate_noise.py holds ten series to it). Measured
    (seed 19): 0 of 8000 runner-nights at 0, 7 (0.09 %) at 0.03, 12 (0.15 %) at 0.05."""
    rng = np.random.default_rng(19)
    nights, alarms = 0, 0
    for _ in range(1000):
        se = rng.uniform(0.01, 0.03, 12)
        y = rng.normal(0, se) + rng.normal(0, scatter, 12)
        before = False
        for t in range(4, 12):  # a step needs two nights on each side: first testable with 4
            step = step_test(y[:t + 1], se[:t + 1])
            found = step is not None and step.p_value < DRIFT_ALPHA
            nights += 1
            alarms += found and not before
            before = found
    rate = alarms / nights
    print(f"scatter {scatter}: {alarms} false alarms in {nights} runner-nights = {rate:.4f} (alpha {DRIFT_ALPHA})")
    assert rate <= DRIFT_ALPHA, rate


def test_the_drift_rule_can_alarm():
    """The same rule does see a 10 % step: the simulation above could fail."""
    se = np.full(10, 0.02)
    y = np.r_[np.zeros(6), np.full(4, math.log(0.9))]
    assert step_test(y, se).p_value < DRIFT_ALPHA


def test_acknowledged_file_is_strict_and_names_the_field(tmp_path):
    from lawbench.core.errors import DataError

    f = tmp_path / "p.toml"
    f.write_text('profile = "p"\n[[acknowledged]]\nanchor = "a"\nwhy = "x"\nclaim = "c"\naccepted_by = "m"\n'
                 'until = 2027-01-01\nexpires = 2027-01-01\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"p.toml: field acknowledged.0.expires: unknown field"):
        load_acknowledged("p", str(f))
    f.write_text('profile = "q"\n', encoding="utf-8")
    with pytest.raises(DataError, match="field profile: acknowledges profile 'q', not 'p'"):
        load_acknowledged("p", str(f))


# --------------------------------------------------------------------------- check, plan, propose, deadline


def test_check_refuses_a_stale_or_unreviewed_acknowledgement(tmp_path):
    from lawbench.core.commands.gate import acknowledged_problems
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    anchors = load_all(reg, profiles=profiles.keys())
    claim = anchors.by_id()["law4.cpu.census.q4_0-repack"].anchor.claim
    entry = 'profile = "cpu"\n' + "".join(
        f'[[acknowledged]]\nanchor = "{a}"\nkind = "lost-label"\nwhy = "{w}"\nclaim = {json.dumps(c)}\naccepted_by = "m"\nuntil = {u}\n'
        for a, w, c, u in [("law4.cpu.census.q4_0-repack", "accepted", claim, "2027-01-01"),
                           ("law4.cpu.gone", "accepted", "x", "2027-01-01"),
                           ("law4.cpu.census.q4_0-repack", "accepted", claim, "2026-11-30"),
                           ("law4.cpu.census.q4_0-repack", "accepted", "reworded", "2027-01-01"),
                           ("law4.cpu.census.q4_0-repack", "TO REVIEW: turned", claim, "2027-01-01")])
    (tmp_path / "cpu.toml").write_text(entry, encoding="utf-8")
    (tmp_path / "nosuch.toml").write_text('profile = "nosuch"\n', encoding="utf-8")
    (tmp_path / "reviewers.toml").write_text('reviewers = ["m"]\n', encoding="utf-8")
    warnings: list[str] = []
    problems = acknowledged_problems(anchors, profiles, today=dt.date(2026, 12, 2), folder=tmp_path,
                                     warnings=warnings)
    text = "\n".join(problems)
    assert len(problems) == 4, text
    assert "acknowledged/nosuch.toml: no profile 'nosuch'" in text
    assert "anchor law4.cpu.gone: field acknowledged[1].anchor: no active anchor" in text
    assert warnings == [w for w in warnings if "field acknowledged[2].until: 2026-11-30 has passed" in w] != []
    assert "field acknowledged[3].claim: not the anchor's claim word for word" in text
    assert "field acknowledged[4].why: still the proposal's text" in text


def test_check_refuses_a_nightly_worst_case_above_its_window():
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.run.plan import plan, window_problems
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    anchors = load_all(reg, profiles=profiles.keys())
    assert window_problems(profiles, anchors) == []  # the shipped profiles fit
    for pid, p in profiles.items():
        pl = plan(p, anchors, p.nightly.cadence)
        assert pl.worst_min <= p.nightly.window_min <= 180, (pid, pl.worst_min)
    gtx = profiles["gtx1060"]
    narrow = {**profiles, "gtx1060": gtx.model_copy(update={"nightly": gtx.nightly.model_copy(update={"window_min": 30})})}
    [problem] = window_problems(narrow, anchors)
    worst = plan(gtx, anchors, gtx.nightly.cadence).worst_min
    assert problem.startswith(f"hardware_profiles/gtx1060.toml: field nightly.window_min: the nightly worst case is "
                              f"{worst:.0f} min, above the window of 30 min"), problem
    wide = {**profiles, "gtx1060": gtx.model_copy(update={"nightly": gtx.nightly.model_copy(update={"window_min": 180})})}
    [box] = window_problems(wide, anchors)
    assert "box 'ref-desktop' runs cpu-ddr4, gtx1060 in one job: their windows add up to 240 min" in box


def test_a_run_near_its_deadline_writes_an_honest_partial_record(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    lawbench = Path(sys.executable).with_name("lawbench")
    done = subprocess.run([str(lawbench), "run", "--profile", "cpu", "-k", "census.q4_0-repack or law4.l33",
                           "--deadline", "0.5", "--out", str(tmp_path / "out"), "--no-history"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, encoding="utf-8")
    record = json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    # the census's worst case (its 600 s budget) no longer fits half a minute: not started, named
    assert "law4.cpu.census.q4_0-repack" in record["not_reached"]
    assert "law4.cpu.census.q4_0-repack" not in {r["anchor_id"] for r in record["results"]}
    assert "not reached before the deadline" in done.stdout


def test_plan_prices_a_selection_by_budget_and_by_history(history):
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.run.plan import plan
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    anchors = load_all(reg, profiles=profiles.keys())
    census = "law4.cpu.census.q4_0-repack"
    for day, seconds in ((1, 4.0), (2, 6.0), (3, 50.0)):
        r = result(census, kind="census", counts={"repacked_tensors": 70})
        r.duration_s = seconds
        rec = RunRecord.new("cpu", profile_matches=True, machine=MACHINE, engine=ENGINE,
                            started=f"2026-11-{day:02d}T02:17:00+00:00")
        history.append(rec.finish([r]))
    pl = plan(profiles["cpu"], anchors, "nightly", history)  # the cpu nightly's own cadence
    row = next(r for r in pl.rows if r.anchor_id == census)
    assert row.worst_s == anchors.by_id()[census].anchor.budget.timeout_s and row.typical_s == 6.0  # the median
    assert all(r.worst_s == 0 for r in pl.rows if r.kind == "prediction")
    assert pl.window_min == profiles["cpu"].nightly.window_min and pl.fits
    assert pl.typical_min == pytest.approx(0.1)
