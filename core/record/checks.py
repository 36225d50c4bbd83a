"""A record from elsewhere is hostile until proven: what `lawbench history import` checks before a
run record (or the record inside a contribution bundle) may enter a history.

Nothing a record says about itself is taken as given. Before parsing: its size and nesting depth.
After parsing (the pydantic models check types, ids and times): every number finite and within
what a physical quantity can be, every verdict recomputed from its interval and band, the counts
and the exit code recomputed from the results, a gate's verdict from its news (and its news from
the results where they alone decide). A mismatch refuses the record in one line that
names the file, the anchor and the field.
"""
from __future__ import annotations

import math
import re
from typing import Callable, Iterable, Optional

from lawbench.core.errors import DataError
from lawbench.core.models import Result, Verdict
from lawbench.core.models.anchor import CensusSpec
from lawbench.core.models.gate import GateNews
from lawbench.core.record.census import census_problems
from lawbench.core.record.reports import RunRecord, interrupt_exit_code, is_retired
from lawbench.core.stats.verdicts import classify

# The census rule of an anchor id as this lawbench's anchors state it (None: not a census anchor
# here); core.history.imports loads it from the anchors' TOML, once, when a record holds a census.
CensusRules = Callable[[str], Optional[CensusSpec]]

# A real run.json is a few kB per anchor (samples and a 4 kB log tail each): 64 MiB is two orders
# above the largest night, and far below what would take the importer's memory (1e6 results: 4.6 GB).
MAX_RECORD_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32  # a record nests about 8 deep (bundle > record > results > detail > ...)
MAX_RESULTS = 10_000  # the register holds under 200 anchors
MAX_SAMPLES = 100_000  # per result; a budget is tens of samples
# No quantity lawbench records (tok/s, bytes, seconds, ratios, GB/s) is beyond 1e15 in magnitude;
# 1e308 is a forgery or a broken instrument, and it overflows every sum a report makes.
MAX_MAGNITUDE = 1e15
# Python's json reads "Infinity" and "NaN" and nests without limit; strings are cut out first
# so that a bracket inside a reason is not counted.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")
CLOSED_FINDING = "the open finding no longer reproduces"  # core.run.evaluate._apply_finding


def check_shape(raw: bytes, source: str) -> None:
    """Refuse a file too large or nested too deep to parse safely, before parsing it."""
    if len(raw) > MAX_RECORD_BYTES:
        raise DataError(source, f"is {len(raw) / 2**20:.0f} MiB; a run record or bundle is at most "
                        f"{MAX_RECORD_BYTES // 2**20} MiB (no night writes one this large)")
    bare = _STRING.sub(b'""', raw)
    # every result carries one "verdict": counted here, a record of 10**6 results is refused
    # before pydantic builds it (importing one took 4.6 GB)
    verdicts = raw.count(b'"verdict"')
    if verdicts > MAX_RESULTS:
        raise DataError(source, f"holds about {verdicts} results; a run holds at most {MAX_RESULTS}")
    depth = deepest = 0
    for m in _BRACKET.finditer(bare):
        depth += 1 if m.group() in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                raise DataError(source, f"nests JSON deeper than {MAX_DEPTH} levels; a run record nests "
                                "about 8, so this is not one")


def check_record(record: RunRecord, source: str, prefix: str = "",
                 census_rules: Optional[CensusRules] = None) -> None:
    """Every figure bounded, every verdict, the counts and the exit code as the results imply.

    :param prefix: "record." for the record inside a bundle, so the field names its path.
    :param census_rules: the anchors' census rules; a census verdict is re-derived from the
        result's counts by the rule the run applies (core.record.census.census_problems).
    :raises DataError: the first mismatch, naming the anchor and the field.
    """
    if len(record.results) > MAX_RESULTS:
        raise DataError(source, f"holds {len(record.results)} results; a run holds at most {MAX_RESULTS}",
                        field=f"{prefix}results")
    for i, r in enumerate(record.results):
        where = f"{prefix}results.{i}"
        try:
            _check_result(r)
            _check_skip(r, record)
            if r.kind == "census" and census_rules is not None:
                _check_census(r, census_rules)
        except _Bad as bad:
            raise DataError(source, bad.message, anchor=r.anchor_id, field=f"{where}.{bad.field}") from None
    ids = [r.anchor_id for r in record.results]
    if len(set(ids)) != len(ids):
        twice = sorted({a for a in ids if ids.count(a) > 1})[0]
        raise DataError(source, f"anchor {twice} appears twice in run {record.run_id}", field=f"{prefix}results")
    counts = recount(record.results)
    # a key absent is a zero (an older lawbench wrote no "history" count); a key unknown is not
    diff = sorted(k for k in set(counts) | set(record.counts) if record.counts.get(k, 0) != counts.get(k, 0)
                  or k not in counts)
    if diff:
        k = diff[0]
        raise DataError(source, f"counts.{k} says {record.counts.get(k)} but the results hold "
                        f"{counts.get(k, 0)}: counts are recomputed from the results, never taken as given",
                        field=f"{prefix}counts.{k}")
    allowed = exit_codes(record)
    if record.exit_code not in allowed:
        raise DataError(source, f"exit_code {record.exit_code} does not follow from the results "
                        f"(they give {' or '.join(map(str, sorted(allowed)))})", field=f"{prefix}exit_code")
    if record.gate is not None:
        try:
            check_gate(record)
        except _Bad as bad:
            raise DataError(source, bad.message, field=f"{prefix}gate.{bad.field}") from None


def gate_verdict_from(news: Iterable[GateNews]) -> str:
    """The gate's verdict its news imply: red while any news is red (core.history.gate.judge's rule)."""
    return "red" if any(n.red for n in news) else "green"


def check_gate(record: RunRecord) -> None:
    """A stated gate verdict re-derived from its news, and its news from the results where the
    results alone decide: an ERROR is always news, and without an accepted baseline every blocking
    result that is not PASS is. A forged green would otherwise count as an accepted night."""
    gate = record.gate
    derived = gate_verdict_from(gate.news)
    if gate.verdict != derived:
        red = [n.anchor_id for n in gate.news if n.red]
        why = f"its red news on {', '.join(red[:3])}" if red else "no red news"
        raise _Bad("verdict", f"gate verdict {gate.verdict} but {why} makes it {derived}: a gate's verdict "
                   "is re-derived from its news, never taken as given")
    blind = any(n.kind == "cannot-judge" for n in gate.news)
    if blind != (gate.baseline_state == "cannot-judge"):
        raise _Bad("baseline_state", f"baseline_state {gate.baseline_state} but the gate has "
                   f"{'a' if blind else 'no'} cannot-judge news: a blind night is red and says why, never green")
    if gate.baseline_state == "first-night" and gate.baseline_runs:
        raise _Bad("baseline_state", f"a first night judged against {gate.baseline_runs} accepted night(s)")
    told = {n.anchor_id for n in gate.news}
    for r in record.results:
        if is_retired(r) or (r.verdict is Verdict.SKIP and not r.blocking) or r.anchor_id in told:
            continue
        if r.verdict is Verdict.ERROR or (gate.baseline_runs == 0 and r.blocking and r.verdict is not Verdict.PASS):
            raise _Bad("news", f"result {r.anchor_id} is {r.verdict.value}"
                       f"{'' if r.verdict is Verdict.ERROR else ' with no accepted baseline'} but the gate has "
                       "no news of it: the gate reports every such result, so this gate was not made from these results")


def recount(results: Iterable[Result]) -> dict[str, int]:
    """The counts RunRecord.finish writes."""
    counts = {v.value: 0 for v in Verdict}
    counts["history"] = 0
    for r in results:
        counts["history" if is_retired(r) else r.verdict.value] += 1
    return counts


def exit_codes(record: RunRecord) -> set[int]:
    """The exit codes a finished run with these results may carry: RunRecord.finish's, and 1 in
    place of 0 (a run whose outputs could not be written, or pytest's internal error)."""
    if record.interrupted:
        try:
            return {interrupt_exit_code(record.interrupted)}
        except (KeyError, AttributeError):
            return set()
    return {1} if record.judged_bad() else {0, 1}


class _Bad(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def _number(field: str, x: Optional[float], infinite_ok: bool = False) -> None:
    if x is None:
        return
    if math.isnan(x) or (math.isinf(x) and not infinite_ok):
        raise _Bad(field, f"{field} is {x!r}, not a finite number")
    if math.isfinite(x) and abs(x) > MAX_MAGNITUDE:
        raise _Bad(field, f"{field} is {x:.3g}, beyond any physical quantity lawbench records "
                   f"(|x| <= {MAX_MAGNITUDE:.0e})")


def _check_result(r: Result) -> None:
    for name in ("published", "predicted", "measured", "spread", "duration_s"):
        _number(name, getattr(r, name))
    if r.duration_s < 0:
        raise _Bad("duration_s", f"duration_s is {r.duration_s}, below zero")
    if r.interval is not None:
        _number("interval", r.interval[0])
        _number("interval", r.interval[1])
        if r.interval[0] > r.interval[1]:
            raise _Bad("interval", f"interval {list(r.interval)} has its low end above its high end")
        if r.measured is not None and not r.interval[0] <= r.measured <= r.interval[1]:
            raise _Bad("measured", f"measured {r.measured!r} lies outside its own interval {list(r.interval)}")
    if r.band is not None:
        _number("band", r.band[0], infinite_ok=True)
        _number("band", r.band[1], infinite_ok=True)
        if r.band[0] > r.band[1]:
            raise _Bad("band", f"band {list(r.band)} has its low end above its high end")
    if r.measurement is not None:
        if len(r.measurement.samples) > MAX_SAMPLES:
            raise _Bad("measurement.samples", f"{len(r.measurement.samples)} samples; at most {MAX_SAMPLES}")
        for j, s in enumerate(r.measurement.samples):
            _number(f"measurement.samples.{j}.value", s.value)
    _check_verdict(r)


def _check_verdict(r: Result) -> None:
    """PASS only when the interval lies inside the band, FAIL only when wholly outside (or a closed
    finding), VOID only while it straddles an edge — core.stats.verdicts.classify, the rule that made it."""
    if r.verdict is Verdict.PASS and r.kind != "census" and (r.interval is None or r.band is None):
        raise _Bad("verdict", "verdict PASS without an interval and a band: only a census passes without "
                   "them, and a verdict is recomputed, never taken as given")
    if r.interval is None or r.band is None or r.verdict not in (Verdict.PASS, Verdict.FAIL, Verdict.VOID):
        return
    truth = classify(r.interval, r.band)
    said = r.verdict
    if said is Verdict.FAIL and truth is Verdict.PASS and r.reason.startswith(CLOSED_FINDING):
        return
    if (said is Verdict.VOID and truth is None) or said is truth:
        return
    where = "inside" if truth is Verdict.PASS else "wholly outside" if truth is Verdict.FAIL else "across an edge of"
    should = truth.value if truth is not None else "VOID"
    raise _Bad("verdict", f"verdict {said.value} but its interval {list(r.interval)} lies {where} the band "
               f"{list(r.band)}, which makes it {should}: verdicts are recomputed, never taken as given")


# What a run writes in place of a skip it turned FAIL (core.run.evaluate._skip): never a SKIP's reason.
_TURNED_FAIL = ("skipped under --strict: ", "a skip on the anchor's own runner is a failure: ")


def _check_skip(r: Result, record: RunRecord) -> None:
    """A SKIP is an anchor that was not measured here, with the reason why (core.run.evaluate):
    it carries a reason and no reading. A FAIL relabelled SKIP still holds its interval, its
    samples or its counts, or a reason the run writes only for a FAIL — each refused here."""
    if r.verdict is not Verdict.SKIP:
        return
    if not r.reason.strip():
        raise _Bad("reason", "verdict SKIP without a reason: a skip always says why the anchor was not "
                   "measured here, and a verdict is re-derived, never taken as given")
    if r.strict_skip or r.open_finding or r.finding_closed:
        field = "strict_skip" if r.strict_skip else "open_finding" if r.open_finding else "finding_closed"
        raise _Bad(field, f"verdict SKIP with {field} set: a run writes {field} only on a FAIL "
                   "(a skip under --strict or on the anchor's own runner fails), so this was not a SKIP")
    if r.reason.startswith(_TURNED_FAIL):
        raise _Bad("verdict", f"verdict SKIP but its reason ({r.reason[:60]!r}...) is the one a run writes "
                   "when a skip is a failure: this result was a FAIL")
    measured = [name for name, value in (("measured", r.measured), ("interval", r.interval),
                                         ("predicted", r.predicted), ("sampling", r.sampling))
                if value is not None]
    if r.measurement is not None and r.measurement.samples:
        measured.append("measurement.samples")
    if r.rates:
        measured.append("rates")
    if measured and not is_retired(r):
        raise _Bad("verdict", f"verdict SKIP but it holds a reading ({', '.join(measured)}): an anchor that "
                   "was measured or predicted is judged PASS, FAIL or VOID, so this was not a SKIP")


def _check_census(r: Result, rules: CensusRules) -> None:
    """A census PASS holds only when its counts break nothing the anchor's rule asks, and a FAIL
    only when they break something (or it is a closed finding, or a skip that failed)."""
    if r.verdict not in (Verdict.PASS, Verdict.FAIL) or r.strict_skip or r.finding_closed:
        return
    spec = rules(r.anchor_id)
    if spec is None:  # an anchor this lawbench does not hold (a plugin not installed here)
        return
    problems = census_problems(spec, census_counts(r))
    if r.verdict is Verdict.PASS and problems:
        raise _Bad("verdict", f"census verdict PASS but its counts break the anchor's rule ({'; '.join(problems[:3])}): "
                   "a census verdict is re-derived from its counts, never taken as given")
    if r.verdict is Verdict.FAIL and not problems:
        raise _Bad("verdict", "census verdict FAIL but its counts meet every expectation of the anchor's rule: "
                   "a census verdict is re-derived from its counts, never taken as given")


def census_counts(r: Result) -> dict[str, int]:
    """The label counts a census result was judged on (Result.census_counts, typed since schema 4;
    an older record's census counts kept in its detail are lifted into it when read). Finite numbers only: a stranger's
    record may say anything there."""
    counts = r.census_counts
    if not isinstance(counts, dict):
        return {}
    return {k: int(v) for k, v in counts.items() if isinstance(k, str) and isinstance(v, (int, float))
            and not isinstance(v, bool) and math.isfinite(v)}
