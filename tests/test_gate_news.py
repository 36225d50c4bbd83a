"""Issue 30, items 5 and 7: a skip where the anchor ran is news (red on a deployed runner under
--strict, with the skip's reason; a scope decision that changed is said), an anchor flapping
between resolved and VOID is red, and every anchor of the accepted night gone tonight is named
with why. Real RunRecords judged by the real gate against a real SQLite history
(tests/test_gate.py's helpers); the retired-anchor rule through the real anchor loader."""
from __future__ import annotations

from typing import get_args

import pytest

from lawbench.core.history.gate import judge
from lawbench.core.models import Result, Verdict
from lawbench.core.models.gate import GONE_NEWS, NOTE_NEWS, RED_NEWS, AcknowledgedFile, NewsKind
from lawbench.core.record.reports import RunRecord
from test_gate import ENGINE, MACHINE, history, kinds, result  # noqa: F401  (history is a fixture)

RETIRED = "law4.always-active-share.qwen3.6-35b-a3b.k1"
SUCCESSOR = "law4.l30.active-bytes-still-read.qwen3.6-35b-a3b.k1"


# --------------------------------------------------------------------------- retired needs a reason


def _shipped_with(tmp_path, old: str, new: str):
    """anchors/law4/predictions.toml with one edit, written to tmp_path (the edit must apply)."""
    src = open("anchors/law4/predictions.toml", encoding="utf-8").read()
    cut = src.replace(old, new, 1)
    assert cut != src, old
    f = tmp_path / "predictions.toml"
    f.write_text(cut, encoding="utf-8")
    return f


def test_check_refuses_an_anchor_retired_without_a_reason_naming_file_anchor_and_field(tmp_path):
    """`lawbench check` loads every anchor file through load_anchor_file: a retired anchor without
    retired_reason is refused in one line naming the file, the anchor and the field."""
    from lawbench.core.claims.loading import load_anchor_file
    from lawbench.core.errors import DataError

    f = _shipped_with(tmp_path, 'retired_reason = "issue 9', '# retired_reason = "issue 9')
    with pytest.raises(DataError) as exc:
        load_anchor_file(f)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(f)), msg
    assert RETIRED in msg and "field retired_reason" in msg, msg
    shipped = {la.anchor.id: la.anchor for la in load_anchor_file("anchors/law4/predictions.toml")}
    assert shipped[RETIRED].successor == SUCCESSOR  # the shipped file gives its reason and successor


def test_only_a_retired_anchor_gives_a_retired_reason(tmp_path):
    from lawbench.core.claims.loading import load_anchor_file
    from lawbench.core.errors import DataError

    f = _shipped_with(tmp_path, 'status = "retired"\nretired_reason', 'status = "active"\nretired_reason')
    with pytest.raises(DataError, match="only an anchor with status 'retired' gives retired_reason"):
        load_anchor_file(f)


def test_a_retired_by_that_names_no_anchor_is_refused_and_a_real_one_reaches_the_result(tmp_path):
    from lawbench.core.claims.loading import load_anchors
    from lawbench.core.errors import DataError
    from lawbench.core.models import Verdict
    from lawbench.core.run.evaluate import retired_result

    f = _shipped_with(tmp_path, f'retired_by = "{SUCCESSOR}"', 'retired_by = "law4.no-such-anchor"')
    with pytest.raises(DataError) as exc:
        load_anchors([f], laws=["law4"])
    assert "law4.no-such-anchor" in str(exc.value) and "field retired_by" in str(exc.value)
    [la] = [la for la in load_anchors(["anchors/law4/predictions.toml"], laws=["law4"]).anchors
            if la.anchor.id == RETIRED]
    r = retired_result(la.anchor, "cpu")
    assert (r.verdict, r.retired, r.retired_by) == (Verdict.SKIP, "retired", SUCCESSOR)


# --------------------------------------------------------------------------- the nights


def night(day: int, results: list[Result], history, *, deployed: bool = True, strict: bool = True,
          roster=None, acks=None, cadence: str = "nightly") -> RunRecord:
    """tests/test_gate.night with the runner's deployment, strictness and cadence said."""
    rec = RunRecord.new("p", profile_matches=True, strict=strict, cadence=cadence, machine=MACHINE, engine=ENGINE,
                        started=f"2026-11-{day:02d}T02:17:00+00:00")
    rec.finish(results, gate=lambda r: judge(r, history, acks, deployed=deployed, roster=roster))
    history.append(rec)
    return rec


def skip(anchor: str, reason: str = "no GPU here", *, scope: bool = False) -> Result:
    return Result(anchor_id=anchor, law="law4", kind="ratio", profile="p", verdict=Verdict.SKIP, reason=reason,
                  out_of_scope=reason if scope else None)


def ack(anchor: str, kind: str, until: str = "2026-12-31", **more) -> AcknowledgedFile:
    return AcknowledgedFile.model_validate({"profile": "p", "acknowledged": [dict(
        anchor=anchor, kind=kind, why="reviewed", claim="c", accepted_by="someone", until=until, **more)]})


def test_one_vocabulary_every_kind_is_red_or_a_note_and_the_literal_lists_each_once():
    assert set(RED_NEWS).isdisjoint(NOTE_NEWS)
    assert sorted(get_args(NewsKind)) == sorted((*RED_NEWS, *NOTE_NEWS))
    assert {"skipped", "flapping"} <= set(RED_NEWS) and set(GONE_NEWS) <= set(NOTE_NEWS)
    assert {"skipped-off-runner", "back-in-scope"} <= set(NOTE_NEWS)


# --------------------------------------------------------------------------- item 5: a skip is news


@pytest.mark.parametrize("before", ["PASS", "FAIL"])
def test_a_skip_where_the_anchor_ran_is_red_on_a_deployed_strict_runner_with_its_reason(history, before):
    # an accepted FAIL: an open finding's expected FAIL (green)
    night(1, [result("a", before, 1.0, **({"open_finding": "known"} if before == "FAIL" else {})), result("b")],
          history)
    rec = night(2, [skip("a", "tier probe: 2.1 GB/s is below the cpu tier's floor", scope=True), result("b")], history)
    assert rec.gate.verdict == "red" and rec.exit_code == 1
    [n] = rec.gate.red_news
    assert (n.anchor_id, n.kind, n.before, n.after) == ("a", "skipped", before, "SKIP")
    assert n.why.startswith(f"scope decision changed: in scope on the accepted night ({before}), out of scope tonight")
    assert "tier probe: 2.1 GB/s" in n.why


def test_a_skip_off_a_deployed_strict_runner_is_a_note_said_once(history):
    night(1, [result("a"), result("b")], history, deployed=False, strict=False)
    rec = night(2, [skip("a"), result("b")], history, deployed=False, strict=False)
    assert rec.gate.verdict == "green" and kinds(rec) == {"a": "skipped-off-runner"}
    assert "ran on the accepted night (PASS), not measured tonight: no GPU here" in rec.gate.news[0].why
    again = night(3, [skip("a"), result("b")], history, deployed=False, strict=False)
    assert kinds(again) == {}  # the accepted night skipped it too: nothing new
    assert kinds(night(4, [skip("a"), result("b")], history, deployed=True, strict=False)) == {}


@pytest.mark.parametrize("deployed", [True, False])
def test_a_skip_the_run_turned_fail_says_skipped_not_turned(history, deployed):
    """--strict (or the anchor's own runner) made the skip a FAIL: red wherever the run said so,
    named for what it is, with what it skipped on."""
    night(1, [result("a"), result("b")], history, deployed=deployed)
    tonight = Result(anchor_id="a", law="law4", kind="ratio", profile="p", verdict=Verdict.FAIL,
                     reason="a skip on the anchor's own runner is a failure: model file missing", strict_skip=True)
    rec = night(2, [tonight, result("b")], history, deployed=deployed)
    assert kinds(rec) == {"a": "skipped"} and rec.gate.verdict == "red"
    assert "ran on the accepted night (PASS), not measured tonight" in rec.gate.red_news[0].why
    assert "model file missing" in rec.gate.red_news[0].why


def test_an_anchor_back_in_scope_is_said(history):
    night(1, [skip("a", "tier probe says gpu-class bandwidth", scope=True), result("b")], history)
    rec = night(2, [result("a"), result("b")], history)
    assert kinds(rec) == {"a": "back-in-scope"} and rec.gate.verdict == "green"
    assert "out of scope on the accepted night (tier probe says gpu-class bandwidth)" in rec.gate.news[0].why


def test_an_anchor_skipped_on_the_accepted_night_and_tonight_is_no_news(history):
    night(1, [skip("a", scope=True), result("b")], history)
    assert kinds(night(2, [skip("a", scope=True), result("b")], history)) == {}


def test_a_skipped_red_is_acknowledged_by_its_kind_and_comes_back_when_the_date_passes(history):
    """A person accepts the skip (kind `skipped`); the anchor's baseline stays the night it ran, so
    each later skip is the same news, acknowledged while the entry holds and red after it."""
    night(1, [result("a"), result("b")], history)
    acks = ack("a", "skipped", until="2026-11-03")
    on = night(2, [skip("a", "tier probe", scope=True), result("b")], history, acks=acks)
    assert on.gate.verdict == "green" and on.gate.acknowledged == ["a"]
    [n] = on.gate.news
    assert (n.kind, n.acknowledged_until, n.acknowledged_by) == ("skipped", "2026-11-03", "someone")
    assert night(3, [skip("a", "tier probe", scope=True), result("b")], history, acks=acks).gate.verdict == "green"
    after = night(4, [skip("a", "tier probe", scope=True), result("b")], history, acks=acks)
    assert after.gate.verdict == "red"
    assert {n.kind for n in after.gate.red_news} == {"skipped", "acknowledgement-expired"}


def test_a_skipped_acknowledgement_with_a_value_is_refused_saying_why():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="a skipped anchor measured nothing"):
        ack("a", "skipped", value=1.0)
    assert ack("a", "skipped").acknowledged[0].value is None


def test_baseline_propose_writes_entries_for_skipped_and_flapping_that_validate_and_accept(history, tmp_path, capsys):
    """`lawbench baseline propose` on a night red with a skip and a flap: its entries load as an
    acknowledged file (skipped without a value, flapping at the VOID's value) and accept that night."""
    import argparse
    import tomllib

    from lawbench.core.commands.gate import cmd_propose
    from lawbench.core.record.reports import write_json

    for d, v in enumerate(["PASS", "VOID", "PASS"], 1):
        night(d, [result("a"), result("f", v, 1.24)], history)
    red = night(4, [skip("a", "tier probe", scope=True), result("f", "VOID", 1.24)], history)
    assert {n.anchor_id: n.kind for n in red.gate.red_news} == {"a": "skipped", "f": "flapping"}
    write_json(red, tmp_path / "run.json")
    assert cmd_propose(argparse.Namespace(record=str(tmp_path / "run.json"), who="me", until="2026-12-31")) == 0
    entries = tomllib.loads(capsys.readouterr().out.replace("TO REVIEW: ", ""))
    acks = AcknowledgedFile.model_validate(entries)
    assert {(a.anchor, a.kind, a.value) for a in acks.acknowledged} == {("a", "skipped", None), ("f", "flapping", 1.24)}
    between = night(5, [skip("a", "tier probe", scope=True), result("f", "PASS")], history, acks=acks)
    assert between.gate.verdict == "green" and between.gate.acknowledged == ["a"]
    # (a VOID on night 5 would follow night 4's VOID: void-twice, another kind, red)
    again = night(6, [skip("a", "tier probe", scope=True), result("f", "VOID", 1.24)], history, acks=acks)
    assert again.gate.verdict == "green" and again.gate.acknowledged == ["a", "f"], again.gate.news


def test_a_skipped_acknowledgement_accepts_no_other_kind(history):
    night(1, [result("a"), result("b")], history)
    rec = night(2, [result("a", "FAIL", 0.6), result("b")], history, acks=ack("a", "skipped"))
    assert kinds(rec) == {"a": "turned"} and rec.gate.verdict == "red"  # a turned anchor is not a skip


# --------------------------------------------------------------------------- item 7: flapping


def test_pass_void_pass_void_is_red_on_the_second_void(history):
    verdicts = ["PASS", "VOID", "PASS", "VOID"]
    recs = [night(d, [result("a", v), result("b")], history) for d, v in enumerate(verdicts, 1)]
    assert [r.gate.verdict for r in recs] == ["green", "green", "green", "red"]
    assert kinds(recs[1]) == {"a": "void-once"}
    [n] = recs[3].gate.red_news
    assert n.kind == "flapping" and n.why.startswith("2 VOIDs in its last 4 nights (PASS, VOID, PASS, VOID)")


def test_a_void_five_nights_after_the_last_is_not_flapping(history):
    for d, v in enumerate(["PASS", "VOID", "PASS", "PASS", "PASS", "PASS", "VOID"], 1):
        rec = night(d, [result("a", v)], history)
        assert rec.gate.verdict == "green", (d, [n.why for n in rec.gate.news])
    assert kinds(rec) == {"a": "void-once"}  # the first VOID left the window: once again


def test_void_twice_running_stays_void_twice(history):
    night(1, [result("a")], history)
    night(2, [result("a", "VOID")], history)
    assert kinds(night(3, [result("a", "VOID")], history)) == {"a": "void-twice"}


def test_flapping_is_acknowledged_by_its_kind_and_a_worse_value_is_red_again(history):
    """An acknowledgement of `flapping` at the value seen holds while the VOIDs stay there; a VOID
    further outside the band than the accepted one by more than tonight's noise is red again."""
    for d, v in enumerate(["PASS", "VOID", "PASS"], 1):
        night(d, [result("a", v, 1.24)], history)
    acks = ack("a", "flapping", value=1.24)
    seen = night(4, [result("a", "VOID", 1.24)], history, acks=acks)
    assert kinds(seen) == {"a": "flapping"} and seen.gate.verdict == "green" and seen.gate.acknowledged == ["a"]
    night(5, [result("a", "PASS", 1.0)], history, acks=acks)
    worse = night(6, [result("a", "VOID", 1.40)], history, acks=acks)  # 0.15 outside; tonight's noise 0.028
    assert kinds(worse) == {"a": "flapping"} and worse.gate.verdict == "red"


# --------------------------------------------------------------------------- item 7: removal is named


def test_every_anchor_gone_tonight_is_named_with_why_in_every_view(history):
    from lawbench.core.html.gatepage import gate_section
    from lawbench.core.record.gate_view import gate_markdown, gate_text

    night(1, [result(a) for a in ("kept", "gone", "weekly", "unselected", "old")], history)
    roster = {"weekly": ("moved", "its cadence is weekly; tonight runs nightly"),
              "unselected": ("not-run", "selected by profile, law and cadence; left out by -k"),
              "old": ("retired", "status retired by kept: reworded the sentence")}
    rec = night(2, [result("kept")], history, roster=roster)
    assert rec.gate.verdict == "green"
    assert kinds(rec) == {"gone": "removed", "weekly": "moved", "unselected": "not-run", "old": "retired"}
    md, text, page = gate_markdown(rec), "\n".join(gate_text(rec)), str(gate_section(rec))
    for a, why in [("gone", "no longer in the anchors TOML"), ("weekly", "its cadence is weekly"),
                   ("old", "status retired by kept: reworded the sentence"), ("unselected", "left out by -k")]:
        assert f"`{a}`" in md and why in md, md
        assert a in text and why in text, text
        assert a in page and why in page, page
    assert "| `gone` |" not in md  # listed apart, not in the news table


def test_gone_is_judged_against_the_last_accepted_night_of_tonights_cadence(history):
    """The weekly night on a nightly runner runs other anchors: neither it nor the nightly after it
    lists the other's anchors as gone; an anchor gone since the last nightly still is."""
    roster = {"w": ("moved", "its cadence is weekly; tonight runs nightly"),
              "a": ("moved", "its cadence is nightly; tonight runs weekly"),
              "b": ("moved", "its cadence is nightly; tonight runs weekly")}
    night(1, [result("a"), result("b")], history, roster=roster)
    weekly = night(2, [result("w")], history, roster=roster, cadence="weekly")
    assert kinds(weekly) == {} and weekly.gate.verdict == "green"
    assert kinds(night(3, [result("a"), result("b")], history, roster=roster)) == {}
    assert kinds(night(4, [result("a")], history, roster={"b": ("moved", "its cadence is weekly; tonight runs "
                                                                         "nightly")})) == {"b": "moved"}


def test_a_retired_result_tonight_says_its_status_without_a_roster(history):
    night(1, [result("a"), result("b")], history)
    retired = Result(anchor_id="a", law="law4", kind="ratio", profile="p", verdict=Verdict.SKIP,
                     reason="history: retired by b", retired="retired", retired_by="b")
    rec = night(2, [retired, result("b")], history)
    assert kinds(rec) == {"a": "retired"} and rec.gate.news[0].why == "history: retired by b"


def test_a_strangers_why_is_escaped_in_the_gone_list(history):
    """A record's text may be a stranger's (a baseline off the data branch): the gone list goes
    through lawbench.core.untrusted_text like every other field of the morning view."""
    from lawbench.core.record.gate_view import gate_markdown, gate_text

    night(1, [result("a"), result("b")], history)
    evil = "![x](https://tracker.example/p.png) \x1b[2J | cell"
    rec = night(2, [result("b")], history, roster={"a": ("moved", evil)})
    md, text = gate_markdown(rec), "\n".join(gate_text(rec))
    assert "![x](" not in md and "\x1b" not in md and "\\| cell" in md, md
    assert "\x1b" not in text and "\\x1b[2J" in text, text


def test_the_run_names_why_each_anchor_is_absent_from_the_real_anchor_set():
    from lawbench.core.run.context import RunContext

    roster = RunContext("cpu", cadence="nightly").absences()
    kind, why = roster[RETIRED]
    assert kind == "retired" and f"by {SUCCESSOR}" in why and "issue 9" in why
    weekly = [a for a, (k, _) in roster.items() if k == "moved" and "cadence" in roster[a][1]]
    assert weekly and all("tonight runs nightly" in roster[a][1] for a in weekly)
    elsewhere = [a for a, (k, w) in roster.items() if k == "moved" and w.startswith("binds to profile")]
    assert elsewhere and all(", not cpu" in roster[a][1] for a in elsewhere)
    law1 = RunContext("cpu", cadence="nightly", laws=("law4",)).absences()
    assert any(k == "not-run" and w == "--law selects law4 tonight" for k, w in law1.values())


def test_lawbench_run_names_the_anchors_a_k_selection_left_out(tmp_path):
    """Through the real command line: a first night of two Law 4 prediction groups (no engine), then
    a night of one; the other group's anchors are named in the record and the morning view as
    not-run, left out by -k (the run's own anchor set said why), and the night stays green."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    lawbench = str(Path(sys.executable).parent / "lawbench")
    # conftest has dropped the developer's LAWBENCH_* settings; a cache of its own keeps this run
    # off the machine's box lock, so the module stays in the parallel pass
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(LAWBENCH_CACHE=str(tmp_path / "cache"))

    def run(out: str, select: str, *gate: str) -> dict:
        done = subprocess.run([lawbench, "run", "--profile", "cpu", "-k", select, "--no-history", "--out", out,
                               "--gate", "baseline", *gate], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, encoding="utf-8")
        assert "Traceback" not in done.stdout + done.stderr, done.stderr
        return json.loads((tmp_path / out / "run.json").read_text(encoding="utf-8"))

    first = run("first", "law4.l33 or expert-ceiling", "--first-night")
    assert first["gate"]["verdict"] == "green"
    ceiling = sorted(r["anchor_id"] for r in first["results"] if "expert-ceiling" in r["anchor_id"])
    assert ceiling
    done = subprocess.run([lawbench, "history", "import", "--db", "h.sqlite", "first/run.json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    second = run("second", "law4.l33", "--baseline", "h.sqlite")
    gone = {n["anchor_id"]: (n["kind"], n["why"]) for n in second["gate"]["news"] if n["kind"] in GONE_NEWS}
    assert sorted(gone) == ceiling and second["gate"]["verdict"] == "green", second["gate"]
    assert all(v == ("not-run", "selected by profile, law and cadence; left out by -k") for v in gone.values())
    show = subprocess.run([lawbench, "baseline", "show", "second/run.json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert f"not-run (selected by profile, law and cadence; left out by -k): `{ceiling[0]}`" in show.stdout, show.stdout
