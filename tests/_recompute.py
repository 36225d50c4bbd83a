"""Recompute a recorded verdict from its record alone (docs/verdicts.md): PASS iff the interval lies
inside the band, FAIL iff they do not meet, VOID otherwise. Shared by the unit tests of
test_verdict_records.py and the real nights of test_nightly_gate.py."""
from __future__ import annotations

from lawbench.core.models import Verdict
from lawbench.core.stats.verdicts import classify


def recomputed(result) -> Verdict:
    if result.interval is None or result.band is None:
        raise AssertionError(f"{result.anchor_id}: a {result.verdict.value} without interval or band")
    return classify(tuple(result.interval), tuple(result.band)) or Verdict.VOID


def check_record(results) -> int:
    checked = 0
    for r in results:
        if r.kind == "census" or r.verdict not in (Verdict.PASS, Verdict.FAIL, Verdict.VOID):
            continue
        if r.open_finding or (r.verdict is Verdict.FAIL and r.reason.startswith("the open finding")):
            continue  # a finding's verdict is inverted by policy after the interval decided it
        if r.expected_void is not None:  # an anchor that expects VOID: PASS iff the interval straddles
            assert (recomputed(r) is Verdict.VOID) == (r.verdict is Verdict.PASS), (r.anchor_id, r.interval, r.band)
            continue
        assert recomputed(r) is r.verdict, (r.anchor_id, r.interval, r.band, r.verdict)
        assert r.statistic, f"{r.anchor_id}: the record does not say what its statistic is"
        if r.kind != "prediction":
            lo, hi = r.interval
            assert lo <= r.measured <= hi, f"{r.anchor_id}: statistic {r.measured} outside its interval"
        checked += 1
    return checked
