"""The mode of `lawbench run`: verify the selected anchors, each judged by its own band.

pytest is its front end (lawbench.core.run.session): its items hand each anchor to the Run, which
calls :meth:`Verify.evaluate`. Only this mode takes a cadence and a weekly slice, is judged by the
gate under `--gate baseline`, pairs an engine upgrade night, and says which rates moved since the
previous run of its local history.
"""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from lawbench.core.errors import EngineInterrupted
from lawbench.core.models import Anchor, Result, Verdict
from lawbench.core.models.run_record import any_blocking
from lawbench.core.run.evaluate import evaluate
from lawbench.core.run.mode import Mode, Stopped
from lawbench.core.run.recheck import recheck_slower

if TYPE_CHECKING:
    from lawbench.core.claims.loading import LoadedAnchor
    from lawbench.core.run.context import RunContext
    from lawbench.core.history.store import History
    from lawbench.core.models.run_record import RunRecord
    from lawbench.core.run.run import Run


class Verify(Mode):
    """`lawbench run`: every selected anchor that runs, evaluated (predict, measure, decide)."""

    name = "run"
    exit_rule = staticmethod(any_blocking)

    def select(self, ctx: "RunContext") -> "list[LoadedAnchor]":
        return [la for la in ctx.anchor_set.anchors if ctx.selected(la) and la.anchor.runs]

    def evaluate(self, run: "Run", loaded: "LoadedAnchor") -> list[Result]:
        """One anchor to its Result (lawbench.core.run.evaluate). Stopped outside its engine, the
        anchor is kept as an ERROR that says so."""
        anchor = loaded.anchor
        law = run.ctx.registry.law(anchor.law)
        started = time.monotonic()
        try:
            return [evaluate(anchor, law, run.policy, run.resources, file=loaded.file)]
        except KeyboardInterrupt as exc:
            signal = EngineInterrupted.signal_of(exc)
            result = interrupted_result(anchor, run.policy.profile.id, signal)
            result.duration_s = round(time.monotonic() - started, 3)
            raise Stopped(signal, [result]) from None

    def finish(self, run: "Run") -> dict[str, Any]:
        ctx = run.ctx
        return {"settings": {}, "cadence": ctx.cadence, "weekly_slice": ctx.weekly_slice,
                "gate": ctx.gate.judge if ctx.gate is not None else None}

    def measured(self, run: "Run") -> None:
        """Under `--gate baseline`, a night whose engine build replaces the accepted night's pairs its
        rate series on both builds before the record is finished (lawbench.core.run.upgrade), and
        a series that read slower is read again (lawbench.core.run.recheck)."""
        if run.ctx.gate is None:
            return
        from lawbench.core.run.upgrade import pair_upgrade

        try:
            run.engine_upgrade = pair_upgrade(run)
        except KeyboardInterrupt as exc:
            run.stop.received = run.stop.received or EngineInterrupted.signal_of(exc)
        except Exception as exc:  # the night's record must still be written: an unpaired upgrade is red
            from lawbench.core.models.upgrade import EngineUpgrade
            from lawbench.core.history.rates import ALPHA, TOLERANCE

            why = " ".join(f"{type(exc).__name__}: {exc}".split())
            run.engine_upgrade = EngineUpgrade(replaced="?", tonight="?", accepted_run_id="?", alpha=ALPHA,
                                               tolerance=TOLERANCE, error=f"the pairing failed: {why}")
        if run.stop.received:
            return
        try:  # a series that read slower is read again before the gate calls it (core/run/recheck.py)
            recheck_slower(run)
        except KeyboardInterrupt as exc:
            run.stop.received = run.stop.received or EngineInterrupted.signal_of(exc)
        except Exception as exc:  # the record must still be written: the first round is judged as read (red if slower)
            print(f"lawbench: a slower rate series could not be read again: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)

    def notes(self, record: "RunRecord", history: "History") -> list[str]:
        """An absolute run (a developer's) says which rates moved since the previous run of the same
        profile, machine and engine in its local history; the nightly gate judges rates itself."""
        if record.gate is not None:
            return []
        from lawbench.core.history.gate import baseline_of
        from lawbench.core.history.rates import since_last_run

        nights = baseline_of(record, history).nights
        return list(since_last_run(record, nights[-1])) if nights else []


def interrupted_result(anchor: Anchor, profile_id: str, signal_name: str) -> Result:
    """The anchor that was running when the run was stopped outside the engine (building it,
    fetching a model): an ERROR that says so, so the record shows where the run stopped."""
    return Result(anchor_id=anchor.id, law=anchor.law, kind=anchor.kind, profile=profile_id,
                  quantity=anchor.quantity, unit=anchor.unit, published=anchor.value,
                  verdict=Verdict.ERROR, reason=f"interrupted by {signal_name} before the anchor finished")

