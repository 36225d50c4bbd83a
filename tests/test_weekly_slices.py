"""Every cadence fits its window (issue 30, item 8): a weekly larger than its window rotates in
slices, one a week, each slice fitting the window by construction, so every anchor runs once in N
weeks instead of all but the first few being not-reached every week. gtx1060's weekly (7,630 min
of budgets against a 700-min share of the weekly job) is the case. Through core/run/slices.py, the
real `lawbench check`, `lawbench plan` and `lawbench run` on the repository's profiles and anchors."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lawbench.core.run.slices import iso_week, rotate, week_number

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def _lawbench(*args: str, cwd: Path = ROOT, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(BIN / "lawbench"), *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=dict(os.environ, COLUMNS="240"), encoding="utf-8")
    assert "Traceback" not in done.stderr, done.stderr
    if ok:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def shipped():
    from lawbench.core.claims.loading import load_all
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    return profiles, load_all(reg, profiles=profiles.keys())


def _gtx_weekly(shipped):
    from lawbench.core.run.plan import plan

    profiles, anchors = shipped
    return plan(profiles["gtx1060"], anchors, "weekly", profiles=profiles)


# --------------------------------------------------------------------------- the slices


def test_gtx1060s_weekly_rotates_in_slices_that_each_fit_its_window(shipped):
    pl = _gtx_weekly(shipped)
    rot = pl.rotation
    assert pl.window_min == 700 and pl.worst_min > 10 * pl.window_min  # the 7,630 min in 700
    assert rot.count >= -(-pl.worst_min // pl.window_min) and rot.count > 1 and not rot.too_big
    assert all(w <= 60 * pl.window_min for w in rot.worst_s), rot.worst_s  # fits by construction
    placed = [a for s in rot.slices for a in s]
    assert sorted(placed) == sorted(r.anchor_id for r in pl.rows) and len(set(placed)) == len(placed)
    assert pl.fits


def test_a_slice_fits_whatever_the_costs_and_an_anchor_larger_than_the_window_is_named():
    costs = [(f"a{i:03d}", float(c)) for i, c in enumerate([240, 180, 90, 60, 20] * 25)]
    rot = rotate(costs + [("huge", 800 * 60.0)], 700)
    assert rot.too_big == (("huge", 800 * 60.0),)
    assert all(w <= 700 * 60 for w in rot.worst_s) and sum(map(len, rot.slices)) == len(costs)
    assert rotate([], 700).count == 1 and rotate([("x", 60.0)], 700).slices == (("x",),)


def test_every_slice_fits_and_none_is_empty_whatever_the_budgets():
    """A slice that nothing hashed or probed into would be a week that runs nothing (exit 2, red):
    before such slices were dropped, 151 of 2,986 random weeklies had one."""
    import random

    rng = random.Random(7)
    for t in range(1000):
        costs = [(f"x{t}.{i}", 60.0 * rng.choice([1, 10, 30, 60, 90, 120, 240, 700]))
                 for i in range(rng.randint(1, 30))]
        window = rng.choice([120, 300, 700])
        rot = rotate(costs, window)
        placed = [a for s in rot.slices for a in s]
        assert sorted(placed) == sorted(a for a, c in costs if c <= 60 * window), (t, rot)
        assert all(rot.slices) or placed == [], (t, rot)
        assert all(w <= 60 * window for w in rot.worst_s), (t, rot)


def test_an_added_anchor_moves_no_anchor_before_it_in_id_order_and_few_after_it(shipped):
    """Stable when an anchor is added: slices are cut in id order, each anchor to its hashed slice
    or the next with room, so the anchors before the new one keep their slices exactly, and the
    ones after it move only when it filled their slice (first fit by id moved 8 of 102 at the
    median; the hash moves 0 with slack in the slices, and at most 1 at the median with the shipped
    weekly filling 7942 of its 12 x 700 slice-minutes, 2026-12-07)."""
    pl = _gtx_weekly(shipped)
    costs = [(r.anchor_id, r.worst_s) for r in pl.rows]
    before = {a: k for k, s in enumerate(pl.rotation.slices) for a in s}
    moved = []
    for i, (anchor_id, _) in enumerate(costs[::2]):
        new = f"{anchor_id}.added{i}"
        after_rot = rotate([*costs, (new, [600.0, 1800.0, 5400.0, 7200.0][i % 4])], 700)
        if after_rot.count != pl.rotation.count:
            continue  # a new N reshuffles, and the docs say so
        after = {a: k for k, s in enumerate(after_rot.slices) for a in s}
        assert all(after[a] == before[a] for a in before if a < new), new
        moved.append(sum(after[a] != before[a] for a in before))
    assert len(moved) > 40 and statistics.median(moved) <= 1 and max(moved) < len(before) // 5, moved


def test_the_week_count_rotates_through_every_slice_across_a_new_year():
    """ISO 2026 has 53 weeks: "ISO week mod N" would run slice 53 mod N and then 1 mod N, skipping
    slices at the new year; the count of weeks since 1970-01-05 never skips."""
    monday = dt.date(2026, 12, 28)
    assert iso_week(monday) == "2026-W53" and iso_week(monday + dt.timedelta(7)) == "2027-W01"
    assert week_number(monday + dt.timedelta(7)) == week_number(monday) + 1
    assert week_number(monday + dt.timedelta(6)) == week_number(monday)  # Sunday is the same week
    rot = rotate([(f"a{i}", 600.0 * 60) for i in range(7)], 700)
    assert rot.count == 7
    for start in (dt.date(2026, 11, 30), monday):
        assert sorted(rot.this_week(start + dt.timedelta(7 * w)) for w in range(7)) == list(range(7))
    iso = [int(iso_week(monday + dt.timedelta(7 * w)).split("W")[1]) % 7 for w in range(7)]
    assert len(set(iso)) < 7  # what the ISO number would have done


# --------------------------------------------------------------------------- check, plan, runners


def test_check_plans_the_weekly_notes_the_rotation_and_refuses_an_anchor_no_slice_can_hold(shipped):
    from lawbench.core.claims.loading import AnchorSet
    from lawbench.core.run.plan import window_problems

    profiles, anchors = shipped
    done = _lawbench("check")
    assert done.stdout.startswith("ok:")
    weekly = _gtx_weekly(shipped)  # the shipped anchors' own figures: an added anchor changes them
    n = weekly.rotation.count
    assert (f"note: profile gtx1060: the weekly's worst case is {weekly.worst_min:.0f} min, above its 700-min "
            f"window: it rotates in "
            f"{n} slices, one a week, each anchor once in {n} weeks") in done.stdout, done.stdout
    heavy = next(la for la in anchors.anchors if la.anchor.id == _gtx_weekly(shipped).rows[0].anchor_id)
    budget = heavy.anchor.budget.model_copy(update={"timeout_s": 800 * 60.0})
    grown = AnchorSet([replace(la, anchor=la.anchor.model_copy(update={"budget": budget})) if la is heavy else la
                       for la in anchors.anchors])
    [problem] = window_problems(profiles, grown)
    assert problem == (f"{heavy.file}: anchor {heavy.anchor.id}: field budget.timeout_s: its worst case 800 min is "
                       "above profile gtx1060's weekly window of 700 min, so no weekly slice can hold it; lower its "
                       "budget or split the anchor")
    gtx = profiles["gtx1060"]  # a quick nightly's weekly runs `full`, which does not rotate: refused
    quick = {**profiles, "gtx1060": gtx.model_copy(update={"nightly": gtx.nightly.model_copy(update={"cadence": "quick"})})}
    assert any("field nightly.cadence: the weekly job runs cadence full after a quick nightly" in p
               for p in window_problems(quick, anchors))


def test_plan_shows_the_rotation_this_weeks_slice_and_n_and_each_week_takes_the_next(shipped):
    rot = _gtx_weekly(shipped).rotation
    seen = []
    for w in range(rot.count):
        day = dt.date(2027, 1, 4) + dt.timedelta(7 * w)
        last = _lawbench("plan", "--profile", "gtx1060", "--cadence", "weekly", "--week-of",
                         day.isoformat()).stdout.strip().splitlines()[-1]
        m = re.search(rf"window 700 min: fits in {rot.count} weekly slices \(every anchor once in {rot.count} weeks\); "
                      rf"this week \({iso_week(day)}\) slice (\d+): (\d+) anchors, worst case (\d+) min$", last)
        assert m, last
        seen.append(int(m[1]))
        assert int(m[2]) == len(rot.slices[int(m[1])]) and int(m[3]) <= 700
    assert sorted(seen) == list(range(rot.count))
    table = _lawbench("plan", "--profile", "gtx1060", "--cadence", "weekly").stdout
    assert f"rotation: {rot.count} slices of at most 700 min" in table and "this week" in table


def test_the_weekly_jobs_deadline_is_the_window_its_slices_were_cut_to_fit(shipped):
    from lawbench.core.run.plan import weekly_window_min

    profiles, _ = shipped
    for job in json.loads(_lawbench("profiles", "runners", "--weekly").stdout)["include"]:
        for entry in job["plan"].split():
            pid, _, minutes = entry.split(":")
            assert int(minutes) == weekly_window_min(profiles[pid], profiles)
        assert sum(int(e.split(":")[2]) for e in job["plan"].split()) <= job["timeout"] - 40


# --------------------------------------------------------------------------- lawbench run


@pytest.mark.parametrize("chosen", [None, 3])
def test_run_weekly_runs_this_weeks_slice_or_the_one_named(shipped, tmp_path, chosen):
    rot = _gtx_weekly(shipped).rotation
    args = ["run", "--profile", "gtx1060", "--cadence", "weekly", "--out", str(tmp_path / "out"), "--no-history"]
    before = rot.this_week()
    done = _lawbench(*args, *(["--slice", str(chosen)] if chosen is not None else []), cwd=tmp_path)
    if chosen is None and rot.this_week() != before:
        pytest.skip("the week turned during the run")  # only at midnight on a Sunday
    k = before if chosen is None else chosen
    record = json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))
    assert sorted(r["anchor_id"] for r in record["results"]) == sorted(rot.slices[k])
    assert record["weekly_slice"] == {"index": k, "count": rot.count, "week": iso_week(), "chosen": chosen is not None}
    assert f"weekly slice {k} of 0-{rot.count - 1}" in done.stdout
    shown = _lawbench("baseline", "show", str(tmp_path / "out" / "run.json")).stdout
    assert (f"weekly slice {k} of 0-{rot.count - 1} ({'re-run with --slice' if chosen is not None else iso_week()}): "
            f"every weekly anchor runs once in {rot.count} weeks") in shown
    from lawbench.core.run.plan import plan

    profiles, anchors = shipped  # the other slices are not "left for another cadence": the quick and nightly are
    other = len(plan(profiles["gtx1060"], anchors, "full").rows) - len(_gtx_weekly(shipped).rows)
    assert f"cadence weekly leaves {other} anchor(s) of this profile for another cadence" in done.stdout


def test_run_refuses_a_slice_the_rotation_lacks_and_a_slice_of_a_nightly(shipped, tmp_path):
    n = _gtx_weekly(shipped).rotation.count
    bad = _lawbench("run", "--profile", "gtx1060", "--cadence", "weekly", "--slice", str(n), "--out", "o",
                    cwd=tmp_path, ok=False)
    assert bad.returncode == 2 and bad.stderr.strip() == (
        f"lawbench: error: --slice {n}: profile gtx1060's weekly has {n} slice(s), 0 to {n - 1} "
        "(`lawbench plan --profile gtx1060 --cadence weekly`)")
    nightly = _lawbench("run", "--profile", "gtx1060", "--slice", "0", "--out", "o", cwd=tmp_path, ok=False)
    assert nightly.returncode == 2 and "only a weekly rotates in slices" in nightly.stderr
    assert not (tmp_path / "o" / "run.json").exists()


# --------------------------------------------------------------------------- the docs say what plan prints


@pytest.mark.parametrize("doc", ["README.md", "docs/RUNNERS.md"])
def test_the_profile_table_is_what_lawbench_plan_prints(shipped, doc):
    """The README's and RUNNERS.md's profile tables are `lawbench plan --profile P --markdown`,
    row for row (the cpu row said 87 anchors, 116 min, a 120-min window after those had changed)."""
    profiles, _ = shipped
    text = (ROOT / doc).read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if re.match(r"\| ([a-z0-9.-]+) \| (yes|no) \|", line)]
    printed = [_lawbench("plan", "--profile", pid, "--markdown").stdout.strip() for pid in sorted(profiles)]
    assert sorted(rows) == sorted(printed)
    assert ("| profile | deployed | box | nightly cadence | anchors | worst case (min) | typical (min) | window (min) "
            "| weekly anchors | weekly worst case (min) | weekly window (min) | weekly slices |") in text
