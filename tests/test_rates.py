"""Rate series per runner (issue 31): the typed rates on a result, the history's rates table, and
the one-night test that turns tonight's rates into `slower` / `faster` / `cannot analyse` news."""
from __future__ import annotations

import math
import random
import sqlite3

import pytest

from lawbench.core.history.rates import LOOKBACK, Reading, judge_rates, judge_series
from lawbench.core.history.store import History
from lawbench.core.models import RateSample, RateSeries, Result, Verdict
from lawbench.core.record.reports import RunRecord
from lawbench.core.stats.protocol import ArmSampler, Visit

from _rate_nights import ENGINE, MACHINE, gate_night, rate

Q4 = RateSeries(model="smollm2-135m-q4_0", format="Q4_0", placement="ngl=0", quantity="decode tok/s")
Q8 = RateSeries(model="smollm2-135m-q8_0", format="Q8_0", placement="ngl=0", quantity="decode tok/s")


def _arm(values):
    it = iter(values)
    return lambda reps: Visit(values=[next(it)])


def test_the_sampler_keeps_each_named_arm_as_a_rate_without_its_warm_up():
    sampler = ArmSampler({"a": _arm([1.0, 50.0, 52.0, 51.0]), "b": _arm([1.0, 100.0, 98.0, 99.0])},
                         series={"a": Q4, "b": Q8}, engine="b1234")
    sampler.draw(3)
    rates = {r.series.format: r for r in sampler.rates()}
    assert rates["Q4_0"].values == [50.0, 52.0, 51.0]  # the discarded warm-up (1.0) is not a rate
    assert rates["Q8_0"].values == [100.0, 98.0, 99.0]
    lo, hi = rates["Q4_0"].interval
    assert lo < rates["Q4_0"].measured < hi and 50 < rates["Q4_0"].measured < 52
    assert rates["Q4_0"].engine == "b1234"


def test_a_sampler_without_series_reports_no_rate():
    sampler = ArmSampler({"main": _arm([1.0, 2.0, 3.0])})
    sampler.draw(2)
    assert sampler.rates() == []


def _record(run_id: str, started: str, rates: list[RateSample]) -> RunRecord:
    r = Result(anchor_id="law4.x", law="law4", kind="measurement", profile="cpu", verdict=Verdict.PASS,
               rates=rates)
    return RunRecord(run_id=run_id, started=started, profile="cpu", git_commit="c" * 40).finish([r])


def test_rates_are_stored_read_back_and_append_only(tmp_path):
    path = tmp_path / "history.sqlite"
    with History(path) as h:
        h.append(_record("a" * 32, "2026-12-01T00:00:00+00:00",
                         [RateSample(series=Q4, engine="b1", values=[50.0, 51.0], measured=50.5,
                                     interval=(49.0, 52.0))]))
        rows = h.rates("cpu")
        assert [(r.series, r.measured, r.ci_lo, r.ci_hi, r.n, r.engine) for r in rows] == [
            (Q4.key, 50.5, 49.0, 52.0, 2, "b1")]
        assert h.rates("other") == []
        # the run record carries them too, typed, so the data branch has them
        assert h.record("a" * 32).results[0].rates[0].series == Q4
    raw = sqlite3.connect(str(path))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM rates")
    raw.close()


def _nights(rng, k, sd=0.02, level=50.0, engine="b1"):
    return [Reading("s", level * rng.lognormvariate(0, sd), engine=engine) for _ in range(k)]


def test_too_few_nights_cannot_be_analysed_never_green_never_red():
    rng = random.Random(1)
    news = judge_rates({"s": _nights(rng, 4)}, [Reading("s", 20.0, engine="b1")])
    assert [n.kind for n in news] == ["cannot analyse"]
    assert "4 accepted nights" in news[0].reason


def test_a_new_engine_cannot_be_analysed_against_the_old_one():
    rng = random.Random(2)
    news = judge_rates({"s": _nights(rng, 10)}, [Reading("s", 50.0, engine="b2")])
    assert [n.kind for n in news] == ["cannot analyse"] and "b2" in news[0].reason


def test_a_forty_percent_slowdown_is_slower_with_its_size():
    rng = random.Random(3)
    news = judge_rates({"s": _nights(rng, 7)}, [Reading("s", 50.0 * 0.6, engine="b1")])
    assert [n.kind for n in news] == ["slower"]
    lo, hi = news[0].interval
    assert lo < news[0].size < hi and -0.45 < news[0].size < -0.35
    assert "slower s: -4" in news[0].line()


def test_faster_is_news_too():
    rng = random.Random(4)
    news = judge_rates({"s": _nights(rng, 7)}, [Reading("s", 50.0 * 1.4, engine="b1")])
    assert [n.kind for n in news] == ["faster"]


def test_false_alarms_stay_under_one_percent_per_night_over_many_series():
    """Ten series a night, no change: Holm keeps any-alarm nights ≤ 1 % (binomial slack: 2 %)."""
    rng = random.Random(5)
    nights, alarms = 600, 0
    for _ in range(nights):
        accepted, tonight = {}, []
        for j in range(10):
            level = 20.0 + 10 * j
            accepted[f"s{j}"] = [Reading(f"s{j}", level * rng.lognormvariate(0, 0.03), engine="b1")
                                 for _ in range(6)]
            tonight.append(Reading(f"s{j}", level * rng.lognormvariate(0, 0.03), engine="b1"))
        alarms += any(n.kind != "cannot analyse" for n in judge_rates(accepted, tonight))
    assert alarms / nights <= 0.02


def test_a_shift_inside_the_margin_is_not_news_and_one_beyond_it_is():
    """Nights spread 0.35 % (as an H100's back-to-back nights did on 2026-12-07): a 1.9 % dip (that
    card's unplanted trial-6 a session later) is resolved by the t-test, but its interval reaches
    inside the 1 % margin, so it is no news; a 3 % one is slower, its whole interval beyond the
    margin. Without the margin the first would be red."""
    rng = random.Random(7)
    accepted = {"s": _nights(rng, 8, sd=0.0035)}
    mean = math.exp(sum(math.log(r.measured) for r in accepted["s"]) / 8)
    assert judge_rates(accepted, [Reading("s", mean * 0.981, engine="b1")]) == []
    assert [n.kind for n in judge_rates(accepted, [Reading("s", mean * 0.981, engine="b1")], tolerance=0.0)] == ["slower"]
    news = judge_rates(accepted, [Reading("s", mean * 0.97, engine="b1")])
    assert [n.kind for n in news] == ["slower"] and news[0].interval[1] < -0.01


def test_a_noisy_night_widens_its_own_threshold():
    rng = random.Random(6)
    accepted = {"s": _nights(rng, 8, sd=0.01)}
    mean = 50.0
    quiet = judge_rates(accepted, [Reading("s", mean * 0.94, interval=(mean * 0.93, mean * 0.95), n=5,
                                           engine="b1")])
    noisy = judge_rates(accepted, [Reading("s", mean * 0.94, interval=(mean * 0.70, mean * 1.25), n=5,
                                           engine="b1")])
    assert [n.kind for n in quiet] == ["slower"] and noisy == []


def test_a_series_is_judged_against_its_last_month_of_nights_only():
    """Ten noisy nights (sd 20 %) long ago, then 30 quiet ones (sd 1 %): tonight 10 % slower is
    news against the last LOOKBACK (30) nights; the same reading against all 40 nights is not,
    because the old noise would widen the threshold. The test's nights are the last 30, in order."""
    rng = random.Random(9)
    old = [Reading("s", 50.0 * rng.lognormvariate(0, 0.20), engine="b1", run_id=f"old{i}") for i in range(10)]
    recent = [Reading("s", 50.0 * rng.lognormvariate(0, 0.01), engine="b1", run_id=f"new{i}") for i in range(30)]
    tonight = [Reading("s", 45.0, engine="b1")]
    news, [test] = judge_series({"s": old + recent}, tonight)
    assert LOOKBACK == 30 and [n.kind for n in news] == ["slower"]
    assert [r.run_id for r in test.nights] == [r.run_id for r in recent]
    assert judge_series({"s": old + recent}, tonight, lookback=40)[0] == []


def test_a_law4_arm_names_its_series_model_format_and_configuration():
    from lawbench.plugins.law4.case import Law4Case
    from lawbench.plugins.law4.measure import rate_series

    case = Law4Case.model_validate({"quantity": "decode_tok_s", "model": "gguf:syn-25m-q4_0",
                                    "bench": {"n_gen": 16, "reps": 2}})
    s = rate_series(case, {"n_gen": 16, "n_prompt": 0, "threads": 2, "n_gpu_layers": 0})
    assert (s.model, s.format, s.quantity) == ("syn-25m-q4_0", "Q4_0", "decode tok/s")
    assert s.placement == "tg16 threads=2 n_gpu_layers=0"
    pp = rate_series(case, {"n_gen": 0, "n_prompt": 64, "threads": 2})
    assert pp.quantity == "prefill tok/s" and pp.key != s.key


# --------------------------------------------------------------------------- through the real gate



def _gate_night(history, day: int, q4: float, q8: float, q4_again=None, q4_values=None):
    """One night judged by the gate (tests/_rate_nights.py), with its Markdown and text views: each
    series' three visits around its value; ``q4_again``: Q4_0's second round (core/run/recheck.py)
    around that value; ``q4_values``: Q4_0's visits as given."""
    from lawbench.core.record.gate_view import gate_markdown, gate_text

    rec = gate_night(history, day, [rate(Q4, q4, q4_values, q4_again), rate(Q8, q8)])
    return rec, gate_markdown(rec), gate_text(rec)


def test_the_gate_is_red_on_a_one_format_slowdown_naming_format_and_size(tmp_path):
    rng = random.Random(7)
    with History(tmp_path / "h.sqlite") as h:
        first, md, _ = _gate_night(h, 1, 50.0, 30.0)
        assert first.gate.verdict == "green" and len(first.gate.rates_unanalysed) == 2  # said, not silent
        assert "cannot analyse yet (2)" in md
        for day in range(2, 8):
            rec, _, _ = _gate_night(h, day, 50.0 * rng.lognormvariate(0, 0.02), 30.0 * rng.lognormvariate(0, 0.02))
            assert rec.gate.verdict == "green"
        rec, md, text = _gate_night(h, 8, 50.0 * 0.6, 30.0)  # Q4_0 decode 40 % slower, Q8_0 as it was
        assert rec.gate.verdict == "red"
        slower = rec.gate.news[0]  # shown first
        assert slower.kind == "slower" and "Q4_0" in slower.anchor_id and -0.45 < slower.size < -0.35
        assert all("Q8_0" not in n.anchor_id for n in rec.gate.news)
        assert "Q4_0" in text[1] and "slower" in text[1]
        assert md.index("slower") < md.index("|---|") + 200


def test_a_series_read_again_is_judged_on_the_fastest_visit_of_both_rounds(tmp_path):
    """core/run/recheck.py reads a series again when its first round read slower: a second round
    back at the accepted speed is a `not-confirmed` note (green), one still slow is `slower`
    (red), and both say the series was read again."""
    rng = random.Random(11)
    with History(tmp_path / "h.sqlite") as h:
        for day in range(1, 8):
            _gate_night(h, day, 50.0 * rng.lognormvariate(0, 0.02), 30.0 * rng.lognormvariate(0, 0.02))
        cleared, md, _ = _gate_night(h, 8, 50.0 * 0.6, 30.0, q4_again=50.0)
        assert cleared.gate.verdict == "green", cleared.gate.news
        (note,) = [n for n in cleared.gate.news if "Q4_0" in n.anchor_id]
        assert note.kind == "not-confirmed" and not note.red and "first round read -40" in note.why
        assert "read again (2 more visits)" in note.why and "not-confirmed" in md
        confirmed, _, _ = _gate_night(h, 9, 50.0 * 0.6, 30.0, q4_again=50.0 * 0.6)
        assert confirmed.gate.verdict == "red"
        (slower,) = [n for n in confirmed.gate.news if "Q4_0" in n.anchor_id]
        assert slower.kind == "slower" and "read again (2 more visits): still slower" in slower.why
        assert -0.45 < slower.size < -0.35


def test_the_night_is_judged_on_its_fastest_visit_not_the_mean_of_its_visits(tmp_path):
    """A neighbour only ever slows a visit down: two visits 40 % slow beside one at the accepted
    speed are not a slower engine. (The price, docs/gate.md: a change that slows only some visits
    is not seen by the rate series.)"""
    rng = random.Random(12)
    with History(tmp_path / "h.sqlite") as h:
        for day in range(1, 8):
            _gate_night(h, day, 50.0 * rng.lognormvariate(0, 0.02), 30.0 * rng.lognormvariate(0, 0.02))
        mixed, _, _ = _gate_night(h, 8, 50.0 * 0.73, 30.0, q4_values=[30.0, 30.0, 50.5])
        assert mixed.gate.verdict == "green" and not mixed.gate.news, mixed.gate.news
        slow, _, _ = _gate_night(h, 9, 50.0 * 0.6, 30.0, q4_values=[30.0, 30.0, 30.3])
        assert [n.kind for n in slow.gate.news if "Q4_0" in n.anchor_id] == ["slower"]


def test_an_anchor_reading_rate_series_takes_the_profiles_rate_visits():
    """More visits make a night's fastest visit steadier: a profile's nightly rate_visits raises the
    first look of anchors whose sampler reads rate series (never beyond max_samples), and no other's.
    (No shipped profile sets it since the rate test reads the fastest visit: hardware_profiles/h200.toml.)"""
    from types import SimpleNamespace

    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.models.anchor import Budget
    from lawbench.core.run.evaluate import rate_budget

    shipped, cpu = load_profiles()["h200"], load_profiles()["cpu"]
    assert shipped.nightly.rate_visits == 0
    h200 = shipped.model_copy(update={"nightly": shipped.nightly.model_copy(update={"rate_visits": 10})})
    b = Budget(min_samples=4, max_samples=10, batch=3, timeout_s=400)
    reads = SimpleNamespace(series={"a": object()})
    assert rate_budget(b, reads, h200).min_samples == 10
    assert rate_budget(b, SimpleNamespace(series={}), h200) is b  # no rate series: its own budget
    assert rate_budget(b, object(), h200) is b
    assert rate_budget(b.model_copy(update={"max_samples": 6}), reads, h200).min_samples == 6
    assert rate_budget(b, reads, cpu) is b  # rate_visits 0: the anchor's budget


def test_the_run_reads_a_slower_series_again_and_keeps_both_rounds(tmp_path, monkeypatch):
    """core/run/recheck.py on a night whose Q4_0 reads 40 % slower against seven accepted nights:
    only the anchor of the slower series is evaluated again (stood in for here: the engine's
    second round is what the test gives), its visits are kept beside the first round's, and the
    gate then judges the fastest of both: green with a note when the second round is back at
    speed, red when it is still slow."""
    from types import SimpleNamespace

    from lawbench.core.history.gate import judge
    from lawbench.core.run import recheck

    def result(q4_visits, q8=30.0):
        rates = [RateSample(series=Q4, engine="b1", values=q4_visits, measured=q4_visits[0], interval=None),
                 RateSample(series=Q8, engine="b1", values=[q8 * 0.99, q8, q8 * 1.01], measured=q8, interval=None)]
        return Result(anchor_id="law4.ratio", law="law4", kind="agreement", profile="p", verdict=Verdict.PASS,
                      measured=1.0, interval=(0.98, 1.02), band=(0.75, 1.25), rates=rates)

    rng = random.Random(13)
    with History(tmp_path / "h.sqlite") as h:
        for day in range(1, 8):
            _gate_night(h, day, 50.0 * rng.lognormvariate(0, 0.02), 30.0 * rng.lognormvariate(0, 0.02))
        for day, second, verdict, kind in ((8, 50.0, "green", "not-confirmed"), (9, 30.0, "red", "slower")):
            asked = []

            def evaluate(anchor, law, policy, resources, file=None):
                asked.append(anchor.id)
                return result([second * 0.99, second, second * 1.01])

            monkeypatch.setattr(recheck, "evaluate", evaluate)
            started = f"2026-11-{day:02d}T02:17:00+00:00"

            def so_far():
                rec = RunRecord.new("p", profile_matches=True, machine=MACHINE, engine=ENGINE, started=started)
                return rec.model_copy(update={"results": list(run.results)})

            anchor = SimpleNamespace(id="law4.ratio", law="law4")
            run = SimpleNamespace(results=[result([29.7, 30.0, 30.3])], record_so_far=so_far, policy=None,
                                  resources=None, ctx=SimpleNamespace(
                                      gate=SimpleNamespace(history=h), deadline=None,
                                      registry=SimpleNamespace(law=lambda name: None),
                                      anchor_set=SimpleNamespace(anchors=[SimpleNamespace(anchor=anchor, file="a.toml")])))
            assert recheck.recheck_slower(run) == [Q4.key] and asked == ["law4.ratio"]
            q4, q8 = run.results[0].rates
            assert q4.values == [29.7, 30.0, 30.3] and q4.recheck == [second * 0.99, second, second * 1.01]
            assert q8.recheck == []  # not slower: not read again
            rec = RunRecord.new("p", profile_matches=True, strict=True, cadence="nightly", machine=MACHINE,
                                engine=ENGINE, started=started)
            rec.finish(run.results, gate=lambda x: judge(x, h))
            assert rec.gate.verdict == verdict, rec.gate.news
            assert [n.kind for n in rec.gate.news if "Q4_0" in n.anchor_id] == [kind]
            h.append(rec)
