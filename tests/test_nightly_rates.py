"""The rate gate on real nights of the cpu box (issue 31, done when): one format planted slower on
a real night — through the real engine, whose llama-bench reports it slower — turns the gate red on
that very night, naming the format's series and the size; the same nights without the plant are
green.

Real nights as the nightly runs them (tests/_nights.py: scripts/nightly_runner.sh, then the collect
step filing each record on the data branch folder the next night is judged against), with two
within-format Law 4 anchors (L-15) of two formats, each interleaving a syn-100m arm with its
syn-400m reference of the same format. Each arm is a rate series of this runner (model, format,
placement, quantity), so a night records four. The rate test needs MIN_NIGHTS accepted nights before it judges a series
(core/history/rates.py): those nights run first, unplanted, and each is green. Then one more night
unplanted (the control: green, no `slower`), and one whose llama-bench reports every test of the
planted format 40 % slower than it ran (tests/standin/planted_llama_bench.py).

The planted slowdown hits both arms of its anchor alike, so the within-format ratio L-15 judges
cancels it by design and the anchor's verdict does not move: the red is the rate series' alone.
"""
from __future__ import annotations

import shutil

import pytest
from _engine_fixtures import llama  # noqa: F401  (the real build, a session fixture)
from _nights import Nights, red, skip_where_out_of_scope, verdicts

from lawbench.core.history.rates import MIN_NIGHTS

# Two formats, two within-format anchors whose syn-100m arm is out of Law 4's scope (a SKIP, no
# rate) only on a CPU whose last-level cache holds it; ~20 s each on the 2-core EPYC box. Their
# ratios come near the band's low edge 0.75 there (2026-12-07, 20 real nights: syn-100m-q2_k
# 0.79-1.03, VOID on 4 of them, once two nights running, which is red: `void-twice`; F16 0.86-1.03,
# VOID once). A red unplanted night fails this test whatever made it red. Q2_K is planted:
# llama-bench's model_type names it ("llama ?B Q2_K - Medium"), which is what the wrapper matches.
# (The one Q4_0 anchor in scope here, the quick run's law4.cpu.l15.syn-100m-q4_0, takes ~75 s a
# night: seven of them would be the whole budget of this test.)
PLANTED_FORMAT, OTHER_FORMAT = "Q2_K", "F16"
ANCHORS = {PLANTED_FORMAT: "law4.cpu.l15.syn-100m-q2_k", OTHER_FORMAT: "law4.cpu.agree.syn-100m-f16"}
SELECT = " or ".join(ANCHORS.values())
SLOWDOWN = 0.40  # planted: the format's tests report 0.6 x the speed they ran at

# nightly, not the default run: seven real nights (~8 min) that need the box to themselves. Beside a
# second suite (2026-12-07) the control night read 30-40 % slower on every series and was accepted;
# and syn-100m-q2_k VOIDs on ~1 night in 5 here, so an unplanted night is red (void-twice /
# flapping) often enough to fail a CI run by chance. nightly.yml's slow-tests job (`nox -s tests --
# -m nightly`) runs it on a machine of its own.
pytestmark = [pytest.mark.integration, pytest.mark.nightly,
              pytest.mark.skipif(shutil.which("bash") is None, reason="the job logic is bash scripts")]


def _rates(record: dict) -> dict[str, str]:
    """series key -> format, of the rates the night measured."""
    return {" | ".join((r["series"]["model"], r["series"]["format"] or "-", r["series"]["placement"] or "-",
                        r["series"]["quantity"])): r["series"]["format"]
            for res in record["results"] for r in res.get("rates") or [] if r.get("measured")}


def _rate_news(record: dict, kind: str) -> dict[str, dict]:
    return {n["anchor_id"].removeprefix("rate: "): n for n in record["gate"]["news"] if n["kind"] == kind}


@pytest.fixture(scope="module")
def nights(llama, tmp_path_factory) -> Nights:  # noqa: F811
    """MIN_NIGHTS unplanted nights (the baseline the rate test needs), the unplanted control night,
    then the planted night; run once for this module."""
    story = Nights(tmp_path_factory.mktemp("rate-nights"), llama.bin_dir)
    for n in range(MIN_NIGHTS + 1):
        story.run({}, SELECT)
        if n == 0:
            for anchor in ANCHORS.values():
                skip_where_out_of_scope(story.done[1].record, anchor)
    story.run({"slow": {PLANTED_FORMAT: 1.0 - SLOWDOWN}}, SELECT)
    # a neighbour beside the night's first anchor only: its format reads slower in the first round,
    # not when read again after the next anchor (core/run/recheck.py)
    story.run({"neighbour": [_first_format(story.done[1].record), 1.0 - SLOWDOWN]}, SELECT)
    return story


def _first_format(record: dict) -> str:
    """The format of the night's first anchor that measured a rate."""
    return next(r["series"]["format"] for res in record["results"] for r in res.get("rates") or [])


def test_unplanted_nights_are_green_and_the_rate_test_judges_every_series(nights):
    for n in range(1, MIN_NIGHTS + 2):
        night = nights.done[n]
        # every night measures a rate of each format: the story is about those series
        assert set(_rates(night.record).values()) == set(ANCHORS), night.record["results"]
        assert (night.rc, night.record["gate"]["verdict"], red(night.record)) == (0, "green", {}), \
            (n, night.record["gate"], night.stdout[-3000:])
        if n <= MIN_NIGHTS:  # too few accepted nights yet: said, never green by silence, never red
            assert len(night.record["gate"]["rates_unanalysed"]) == len(_rates(night.record)), night.record["gate"]
    control = nights.done[MIN_NIGHTS + 1].record
    # the control night is judged on every series, against MIN_NIGHTS accepted nights, and says nothing
    assert control["gate"]["baseline_runs"] == MIN_NIGHTS and control["gate"]["rates_unanalysed"] == [], \
        control["gate"]
    assert _rate_news(control, "slower") == {} and _rate_news(control, "faster") == {}, control["gate"]["news"]


def test_a_format_planted_slower_is_red_on_that_night_naming_the_format_and_the_size(nights):
    night = nights.done[MIN_NIGHTS + 2]
    record = night.record
    assert (night.rc, record["gate"]["verdict"]) == (1, "red"), (record["gate"], night.stdout[-3000:])
    slower = _rate_news(record, "slower")
    series = _rates(record)
    planted = {k for k, fmt in series.items() if fmt == PLANTED_FORMAT}
    # a series of the planted format (syn-100m or its syn-400m reference), and nothing else. Not
    # necessarily both: a series' threshold is its own night-to-night spread, and syn-100m's (a
    # 16-token visit of ~60 ms) is the wider; on 2026-12-07, with a neighbour's load on the box, the
    # gate named syn-400m-q2_k at -39.7 % and left syn-100m-q2_k (-36 %, ~8 % spread) under Holm's
    # threshold with 5-6 nights (benchmarks/gate_power.py: 40 % on one series is red in 97-100 %)
    assert len(planted) == 2 and slower and set(slower) <= planted, record["gate"]["news"]
    for key, news in slower.items():
        assert PLANTED_FORMAT in key and news["why"].startswith(f"slower {key}: ")
        # read again before the gate called it, and still slower: the second round is in the record
        assert "read again" in news["why"] and "still slower" in news["why"], news
        again = [r for res in record["results"] for r in res.get("rates") or [] if key.startswith(r["series"]["model"] + " |")]
        assert again and all(r["recheck"] for r in again), again
        lo, hi = news["size_interval"]
        # the size the gate names is the planted one, within the night's own noise
        assert -0.5 < news["size"] < -0.3 and lo <= news["size"] <= hi < 0, news
    # the only red is the rate gate's: the within-format ratio cancels a format-wide slowdown (L-15)
    assert set(red(record)) == {f"rate: {k}" for k in slower}, record["gate"]["news"]
    assert verdicts(record)[ANCHORS[PLANTED_FORMAT]] in ("PASS", "VOID"), record["results"]
    # the other format's series were judged the same night and are not news
    assert not any(OTHER_FORMAT in n["anchor_id"] for n in record["gate"]["news"]), record["gate"]["news"]
    assert record["gate"]["rates_unanalysed"] == []
    # named where it is read: the step summary the job wrote (a Markdown table: its pipes escaped)
    # and the job's own output, one line per red
    assert "gate RED on cpu" in night.summary
    for key, news in slower.items():
        size = f"{news['size']:+.1%}"
        assert key.replace("|", "\\|") in night.summary and size in night.summary, night.summary[-3000:]
        assert f"RED  rate: {key}: slower: slower {key}: {size}" in night.stdout, night.stdout[-3000:]


def test_a_series_slowed_by_a_neighbour_is_read_again_and_not_called_slower(nights):
    """The night after the planted one: a neighbour slows the first anchor's format 40 % in the
    first round only. The rate test reads it slower, the run reads that anchor again after the
    night's other anchor (the neighbour gone), and the gate is green with a `not-confirmed` note
    per series read again, the first round's slower visits kept in the record."""
    night = nights.done[MIN_NIGHTS + 3]
    record = night.record
    fmt = _first_format(record)
    assert (night.rc, record["gate"]["verdict"], red(record)) == (0, "green", {}), (record["gate"], night.stdout[-3000:])
    notes = _rate_news(record, "not-confirmed")
    assert notes and all(fmt in key for key in notes), record["gate"]["news"]
    for key, note in notes.items():
        assert "read again" in note["why"] and "not the engine" in note["why"], note
        rate = next(r for res in record["results"] for r in res.get("rates") or []
                    if key.startswith(r["series"]["model"] + " |"))
        # the first round's visits read ~40 % slower than the second round's fastest
        assert rate["recheck"] and max(rate["values"]) < 0.8 * max(rate["recheck"]), rate
