"""A rate series that reads slower tonight is read again before the gate calls it (issue 31).

A night's reading of a series is its fastest visit (lawbench.core.history.rates): a neighbour on the
box can still slow every visit of one anchor when it runs beside the whole anchor. That is what
happened on the 2-core cpu box's night 4 of results/gate-prove/cpu-nights-2026-12-07: another
checkout's `lawbench run` ran beside it, and syn-400m-q2_k's four visits all read 20 % slower; the
mean of the visits hid it in a wide spread, the fastest visit does not.

So under `--gate baseline`, after the night's anchors (and an engine upgrade's pairs), the rate test
is run on what the night read so far against the runner's accepted nights, and every anchor that
measured a series it calls slower is evaluated once more. Its new visits are the series' second
round (RateSample.recheck); the night's reading becomes the fastest visit of both rounds. A
neighbour that slowed the first round has usually gone; a slower engine reads slower again.

Only series that read slower are read again, and more visits can only raise a fastest visit, so a
second round can take a false alarm away but never make one: the test's false-alarm level stays an
upper bound. What it costs the power: a real slowdown is judged on the fastest of more visits,
which sits a little higher. The anchor's own verdict, measured and interval stay the first
round's; the second round's other results are not kept (the anchor was judged once).
"""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from lawbench.core.errors import LawbenchError
from lawbench.core.history.gate import baseline_of
from lawbench.core.history.rates import rate_news
from lawbench.core.run.evaluate import evaluate
from lawbench.core.run.plan import worst_case_s

if TYPE_CHECKING:
    from lawbench.core.run.run import Run


def slower_series(run: Run) -> set[str]:
    """The series the rate test calls slower on the night's results so far."""
    so_far = run.record_so_far()
    news, _ = rate_news(so_far, baseline_of(so_far, run.ctx.gate.history).accepted)
    return {n.anchor_id.removeprefix("rate: ") for n in news if n.kind == "slower"}


def recheck_slower(run: Run) -> list[str]:
    """Read again every anchor that measured a series the night read slower; returns the series
    read again. A stop signal (KeyboardInterrupt) goes on up: the run is interrupted, and what the
    first round read stays the night's reading."""
    if not any(r.rates for r in run.results):
        return []
    slower = slower_series(run)
    if not slower:
        return []
    loaded = {la.anchor.id: la for la in run.ctx.anchor_set.anchors}
    todo = [(i, r) for i, r in enumerate(run.results)
            if r.anchor_id in loaded and any(rate.series.key in slower for rate in r.rates)]
    print(f"lawbench: {len(slower)} rate series read slower than the accepted nights; reading "
          f"{len(todo)} anchor(s) again before the gate judges", file=sys.stderr, flush=True)
    done: set[str] = set()
    for i, first in todo:
        la = loaded[first.anchor_id]
        deadline = run.ctx.deadline
        if deadline is not None and time.monotonic() + worst_case_s(la.anchor) > deadline:
            # the --deadline is the night's window: the first round stands, judged as read
            print(f"  {first.anchor_id}: not read again, its worst case does not fit before the --deadline",
                  file=sys.stderr, flush=True)
            continue
        try:
            again = evaluate(la.anchor, run.ctx.registry.law(la.anchor.law), run.policy, run.resources, file=la.file)
        except LawbenchError as exc:  # the first round stands, and is judged as read
            print(f"  {first.anchor_id}: not read again: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)
            continue
        second = {rate.series.key: rate for rate in again.rates}
        rates = []
        for rate in first.rates:
            more = second.get(rate.series.key)
            if rate.series.key in slower and more is not None and more.values and more.engine == rate.engine:
                rate = rate.model_copy(update={"recheck": list(more.values)})
                done.add(rate.series.key)
                print(f"  {rate.series.key}: fastest visit {rate.first_round_fastest:.4g} -> {rate.fastest:.4g} "
                      f"over {len(rate.values)} + {len(rate.recheck)} visits", file=sys.stderr, flush=True)
            rates.append(rate)
        run.results[i] = first.model_copy(update={"rates": rates})
    return sorted(done)
