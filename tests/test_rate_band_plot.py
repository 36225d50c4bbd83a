"""Each judged rate series against its accepted band (issue 31): the band the one-night test
implies, stored on the gate verdict (RateCheck), drawn in the HTML gate section and said in one
line in the Markdown morning view."""
from __future__ import annotations

import json
import math
import random

import pytest

from lawbench.core.history.rates import ALPHA, Reading, judge_rates, judge_series
from lawbench.core.history.store import History
from lawbench.core.html import gatepage
from lawbench.core.html.gatepage import gate_section
from lawbench.core.models import RateSeries
from lawbench.core.record.gate_view import gate_markdown
from lawbench.core.record.reports import RunRecord, parse_record
from lawbench.core.untrusted_text import markdown_code

from _rate_nights import gate_night, rate

EVIL = "<script>alert(1)</script>-q4_0"
Q4 = RateSeries(model=EVIL, format="Q4_0", placement="ngl=0", quantity="decode tok/s")
Q8 = RateSeries(model="syn-q8_0", format="Q8_0", placement="ngl=0", quantity="decode tok/s")


def _nights(rng: random.Random, k: int, sd: float = 0.02, level: float = 50.0) -> list[Reading]:
    return [Reading("s", level * rng.lognormvariate(0, sd), engine="b1", run_id=f"run{i:09d}") for i in range(k)]


@pytest.mark.parametrize("sd", [0.003, 0.02, 0.06])
def test_the_band_holds_the_baseline_and_its_edges_are_where_the_test_turns(sd):
    """One series (m = 1, so the first Holm step is the whole test): a reading just outside the
    band is news of its side, just inside is none. The band is derived from the test's own se and
    quantile, so a copy that drifted from judge_rates would fail here."""
    rng = random.Random(11)
    accepted = {"s": _nights(rng, 8, sd=sd)}
    _, [test] = judge_series(accepted, [Reading("s", 50.0, engine="b1")])
    lo, hi = test.band(ALPHA)
    baseline = math.exp(test.mean)
    assert lo < baseline * 0.99 and baseline * 1.01 < hi  # the tolerance margin is inside the band
    assert [r.run_id for r in test.nights] == [f"run{i:09d}" for i in range(8)]
    for reading, kinds in [(lo * 0.999, ["slower"]), (lo * 1.001, []), (hi * 0.999, []), (hi * 1.001, ["faster"])]:
        news = judge_rates(accepted, [Reading("s", reading, engine="b1")])
        assert [n.kind for n in news] == kinds, (reading, lo, hi)


def test_series_that_cannot_be_analysed_get_no_test():
    rng = random.Random(12)
    news, tests = judge_series({"s": _nights(rng, 3)}, [Reading("s", 50.0, engine="b1"),
                                                         Reading("t", 50.0, engine="b1")])
    assert tests == [] and [n.kind for n in news] == ["cannot analyse", "cannot analyse"]


def _night(history: History, day: int, q4: float, q8: float) -> RunRecord:
    return gate_night(history, day, [rate(Q4, q4, [q4 * 0.99, q4]), rate(Q8, q8, [q8 * 0.99, q8])])


@pytest.fixture(scope="module")
def slower_night(tmp_path_factory):
    """Seven quiet nights, then the <script> model's Q4_0 decode 40 % slower and Q8_0 as it was."""
    rng = random.Random(7)
    with History(tmp_path_factory.mktemp("h") / "h.sqlite") as h:
        nights = [_night(h, day, 50.0 * rng.lognormvariate(0, 0.02), 30.0 * rng.lognormvariate(0, 0.02))
                  for day in range(1, 8)]
        assert all(n.gate.verdict == "green" for n in nights)
        assert nights[0].gate.rate_checks == []  # a first night judges no series: nothing to draw
        return nights, _night(h, 8, 50.0 * 0.6, 30.0)


def test_the_gate_stores_what_the_rate_test_looked_at(slower_night):
    nights, rec = slower_night
    assert rec.gate.verdict == "red"
    slower, same = rec.gate.rate_checks
    assert (slower.kind, slower.format, same.kind, same.format) == ("slower", "Q4_0", None, "Q8_0")
    assert slower.series == Q4.key and slower.runs == [n.run_id[:12] for n in nights]
    assert slower.nights == [n.results[0].rates[0].fastest for n in nights]  # each night's fastest visit
    assert slower.tonight == 50.0 * 0.6 and slower.tonight < slower.band[0]
    assert slower.band[0] < slower.baseline < slower.band[1]
    assert same.band[0] < same.tonight < same.band[1]
    assert slower.level == pytest.approx(0.01 / 2)  # two series judged: the first Holm step's share


def test_rate_checks_round_trip_through_the_record_json_and_old_records_load(slower_night):
    _, rec = slower_night
    again = parse_record(rec.model_dump_json(), "run.json")
    assert again.gate.rate_checks == rec.gate.rate_checks and again == rec
    old = json.loads(rec.model_dump_json())
    del old["gate"]["rate_checks"]  # a record written before the field
    assert parse_record(json.dumps(old), "old.json").gate.rate_checks == []


def test_the_gate_page_draws_the_slower_series_and_escapes_its_name(slower_night):
    _, rec = slower_night
    page = str(gate_section(rec))
    assert '<img src="data:image/png;base64,' in page
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;-q4_0" in page
    assert "slower &lt;script&gt;" in page  # the image's alt names the slower series first


def test_without_matplotlib_the_gate_page_still_renders(slower_night, monkeypatch):
    _, rec = slower_night
    monkeypatch.setattr(gatepage, "plots_available", lambda: False)
    page = str(gate_section(rec))
    assert "<img" not in page and "not drawn" in page and "&lt;script&gt;" in page


def test_the_morning_view_says_the_band_of_each_slower_series_in_one_line(slower_night):
    _, rec = slower_night
    md = gate_markdown(rec)
    slower = rec.gate.rate_checks[0]
    line = next(ln for ln in md.splitlines() if ln.startswith("- slower "))
    lo, hi = slower.band
    assert f"band {lo:.4g} … {hi:.4g} tok/s over 7 nights, tonight {slower.tonight:.4g}" in line
    assert line.startswith(f"- slower {markdown_code(Q4.key)}: ")  # a stranger's name only in a code span
    assert "Q8_0" not in "".join(ln for ln in md.splitlines() if "band " in ln)  # no news: no line
