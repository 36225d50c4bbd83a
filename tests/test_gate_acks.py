"""Issue 30, items 1-3: an acknowledgement accepts what was seen (a kind of news at a state), never
the anchor; a date never stops a run (expiry is the gate's red on that anchor alone); drift is known
per step. Real RunRecords judged by the real gate against a real SQLite history (tests/test_gate.py's
helpers); check's acknowledgement rules through the function `lawbench check` calls."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from lawbench.core.models.gate import AcknowledgedFile, Acknowledgement
from test_gate import history, kinds, night, result  # noqa: F401  (history is a fixture)


def ack(anchor="a", kind="turned", until=dt.date(2026, 11, 20), **state) -> AcknowledgedFile:
    return AcknowledgedFile(profile="p", acknowledged=[Acknowledgement(
        anchor=anchor, kind=kind, why="known regression of b11434, fixed upstream", claim="the claim",
        accepted_by="maintainer", until=until, **state)])


def test_an_acknowledgement_covers_only_the_kind_and_state_it_names(history):
    acks = ack(value=0.70)
    night(1, [result("a"), result("b")], history=history)
    seen = night(2, [result("a", "FAIL", 0.70), result("b")], history=history, acks=acks)
    assert seen.gate.verdict == "green" and seen.gate.acknowledged == ["a"]
    assert seen.gate.news[0].measured == 0.70  # typed: what the entry is compared with
    within_noise = night(3, [result("a", "FAIL", 0.69), result("b")], history=history, acks=acks)
    assert within_noise.gate.verdict == "green"
    worse = night(4, [result("a", "FAIL", 0.05), result("b")], history=history, acks=acks)
    assert worse.gate.verdict == "red" and [n.kind for n in worse.gate.red_news] == ["turned"]
    error = night(5, [result("a", "ERROR"), result("b")], history=history, acks=acks)
    assert [n.kind for n in error.gate.red_news] == ["error"]
    not_reached = night(6, [result("b")], history=history, acks=acks)  # another kind of news: not-run is a note
    assert not_reached.gate.acknowledged == []


def test_an_acknowledged_census_that_loses_more_labels_is_red_again(history):
    night(1, [result("c", kind="census", counts={"x": 1, "y": 2, "z": 3})], history=history)
    acks = ack("c", kind="lost-label", counts={"x": 0, "y": 2, "z": 3})
    seen = night(2, [result("c", kind="census", counts={"y": 2, "z": 3})], history=history, acks=acks)
    assert seen.gate.verdict == "green"
    worse = night(3, [result("c", kind="census", counts={"z": 3})], history=history, acks=acks)
    assert worse.gate.verdict == "red" and worse.gate.red_news[0].counts == {"z": 3}


def test_an_expired_acknowledgement_reds_its_anchor_alone_and_says_so(history):
    from lawbench.core.record.gate_view import gate_text

    night(1, [result("a"), result("b")], history=history)
    acks = ack(until=dt.date(2026, 11, 3), value=0.7)
    night(2, [result("a", "FAIL", 0.7), result("b")], history=history, acks=acks)
    late = night(4, [result("a", "FAIL", 0.7), result("b")], history=history, acks=acks)
    assert late.gate.verdict == "red" and late.exit_code == 1
    assert {(n.anchor_id, n.kind) for n in late.gate.red_news} == {("a", "turned"), ("a", "acknowledgement-expired")}
    text = "\n".join(gate_text(late))
    assert "acknowledgement expired on 2026-11-03" in text and "RED  b" not in text


def test_an_acknowledged_drift_step_returns_on_expiry_and_a_second_step_is_news(history):
    for day in range(1, 7):
        night(day, [result("a", measured=1.0 + 0.002 * (day % 2))], history=history)
    night(7, [result("a", measured=0.9)], history=history)
    acks = ack(kind="drift", until=dt.date(2026, 11, 12), value=0.9)
    for day in (8, 9, 10, 11):
        assert night(day, [result("a", measured=0.9)], history=history, acks=acks).gate.verdict == "green"
    expired = night(13, [result("a", measured=0.9)], history=history, acks=acks)
    assert "drift" in {n.kind for n in expired.gate.red_news}  # the step is back, not only the date


def test_a_second_drift_step_after_an_acknowledged_one_is_news(history):
    for day in range(1, 7):
        night(day, [result("a", measured=1.0 + 0.002 * (day % 2))], history=history)
    night(7, [result("a", measured=0.9)], history=history)
    acks = ack(kind="drift", until=dt.date(2026, 11, 28), value=0.9)
    for day in range(8, 13):
        assert night(day, [result("a", measured=0.9)], history=history, acks=acks).gate.verdict == "green"
    # the acknowledged level was 0.9: a night at 0.8 is not what was accepted, and the step stays news
    for day in (13, 14):
        moved = night(day, [result("a", measured=0.8)], history=history, acks=acks)
        assert moved.gate.verdict == "red" and {n.kind for n in moved.gate.red_news} == {"drift"}


def test_a_second_step_is_found_in_the_segment_after_an_accepted_one(history):
    # accepted without an acknowledgement (nights before the gate: exit 0), then a second step
    recs = [night(day, [result("a", measured=1.0 + 0.002 * (day % 2) if day < 7 else 0.9)]) for day in range(1, 13)]
    for rec in recs:
        history.append(rec)
    first = night(13, [result("a", measured=0.8)], history=history)
    second = night(14, [result("a", measured=0.8)], history=history)
    assert first.gate.verdict == "green", [n.why for n in first.gate.news]  # one night is an outlier
    assert second.gate.verdict == "red"
    assert any(n.why.startswith("a second drift step: 0.9 -> 0.8") for n in second.gate.red_news), \
        [n.why for n in second.gate.news]


def _check(tmp_path, entries, reviewers='reviewers = ["m"]\n', day=dt.date(2026, 12, 2)):
    from lawbench.core.claims.loading import load_all
    from lawbench.core.commands.gate import acknowledged_problems
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    anchors = load_all(reg, profiles=profiles.keys())
    claim = anchors.by_id()["law4.cpu.census.q4_0-repack"].anchor.claim
    (tmp_path / "cpu.toml").write_text('profile = "cpu"\n' + "".join(
        f'[[acknowledged]]\nanchor = "law4.cpu.census.q4_0-repack"\nkind = "lost-label"\nwhy = "{w}"\n'
        f'claim = {json.dumps(claim)}\naccepted_by = "{who}"\nuntil = {u}\n' for w, who, u in entries), encoding="utf-8")
    (tmp_path / "reviewers.toml").unlink(missing_ok=True)
    if reviewers is not None:
        (tmp_path / "reviewers.toml").write_text(reviewers, encoding="utf-8")
    warnings: list[str] = []
    return acknowledged_problems(anchors, profiles, today=day, folder=tmp_path, warnings=warnings), warnings


def test_check_never_fails_on_a_date_and_warns_a_week_ahead(tmp_path):
    problems, warnings = _check(tmp_path, [("accepted", "m", "2026-11-30"), ("accepted", "m", "2026-12-08"),
                                           ("accepted", "m", "2027-01-01")])
    assert problems == []
    assert len(warnings) == 2 and "2026-11-30 has passed" in warnings[0] and "expires on 2026-12-08" in warnings[1]


@pytest.mark.parametrize("why", ["to review: turned", "  To  Review - turned", "TOREVIEW turned", "[to review] x"])
def test_check_catches_the_proposal_marker_however_cased_or_spaced(tmp_path, why):
    problems, _ = _check(tmp_path, [(why, "m", "2027-01-01")])
    assert [p for p in problems if "still the proposal's text" in p], problems


def test_check_refuses_a_far_date_and_an_unknown_reviewer(tmp_path):
    problems, _ = _check(tmp_path, [("accepted", "m", "2099-12-31"), ("accepted", "stranger", "2027-01-01")])
    text = "\n".join(problems)
    assert len(problems) == 2, text
    assert "acknowledged[0].until: 2099-12-31 is more than 90 days ahead" in text
    assert "acknowledged[1].accepted_by: 'stranger' is not in hardware_profiles/acknowledged/reviewers.toml" in text
    problems, _ = _check(tmp_path, [("accepted", "m", "2027-01-01")], reviewers=None)
    assert len(problems) == 1 and "no hardware_profiles/acknowledged/reviewers.toml" in problems[0]


# --------------------------------------------------------------------------- item 4: a finding is watched


def finding(verdict="FAIL", measured=0.6, **kw) -> "object":
    return result("f", verdict, measured, open_finding="known: the law does not reproduce this" if verdict == "FAIL"
                  and not kw.pop("removed", False) else None, **kw)


@pytest.mark.parametrize("tonight,kind", [
    (lambda: finding(measured=0.06), "finding-moved"),  # 10x worse
    (lambda: finding("ERROR"), "error"),
    (lambda: result("f", "FAIL", 0.6, strict_skip=True), "finding-unmeasured"),
    (lambda: finding(removed=True), "finding-removed"),
])
def test_an_open_finding_is_watched_like_any_other_statistic(history, tonight, kind):
    night(1, [finding()], history=history)
    assert night(2, [finding(measured=0.605)], history=history).gate.verdict == "green"  # within its noise
    rec = night(3, [tonight()], history=history)
    assert rec.gate.verdict == "red" and kinds(rec) == {"f": kind}, [n.why for n in rec.gate.news]


def test_an_open_finding_void_twice_is_red_and_adding_a_finding_is_news(history):
    night(1, [finding()], history=history)
    once = night(2, [finding("VOID")], history=history)
    assert kinds(once) == {"f": "void-once"} and once.gate.verdict == "green"
    twice = night(3, [finding("VOID")], history=history)
    assert kinds(twice) == {"f": "void-twice"} and twice.gate.verdict == "red"
    night(10, [result("h")], history=history)
    added = night(11, [result("h", "FAIL", 0.6, open_finding="added by a PR")], history=history)
    assert kinds(added) == {"h": "finding-added"} and added.gate.verdict == "red"


def test_records_before_schema_4_still_import_with_their_decisions_typed(tmp_path):
    from pathlib import Path

    from lawbench.core.record.reports import read_json

    old = [p for p in sorted(Path("results").rglob("*.run.json")) if '"open_finding"' in p.read_text(errors="ignore", encoding="utf-8")]
    assert old, "no committed record with an open finding under results/"
    rec = read_json(str(old[0]))
    assert any(r.open_finding for r in rec.results)
    assert not any("open_finding" in r.detail for r in rec.results)
