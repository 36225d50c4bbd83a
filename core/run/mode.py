"""A Run's mode: what one measuring command does between the run's start and its record.

Every command that measures is a mode of the one Run (lawbench.core.run.run): `lawbench run`
verifies anchors (lawbench.core.run.verify), `lawbench ab` pairs two engine builds
(lawbench.core.run.ab), `lawbench census plant` proves the census anchors with planted faults
(lawbench.core.run.planted). A mode is an object with one interface, and the Run holds one:

- ``select(ctx)``: the anchors it measures, from the run context;
- ``evaluate(run, loaded)``: one selected anchor to its results in the record; a stop signal ends
  it with :class:`Stopped`, which carries what the interrupt keeps;
- ``finish(run)``: the record's fields the mode decides (settings, engine, cadence, the gate);
- ``exit_rule``: which finished records fail (RunRecord.EXIT_RULES names each mode's, so that a
  record from elsewhere is judged by the same rule).

The Run never asks which mode it holds.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional

from lawbench.core.models import Result

if TYPE_CHECKING:
    from lawbench.core.claims.loading import LoadedAnchor
    from lawbench.core.run.context import RunContext
    from lawbench.core.history.store import History
    from lawbench.core.models.run_record import RunRecord
    from lawbench.core.run.run import Run


class Stopped(KeyboardInterrupt):
    """A stop signal ended a mode's anchor: the engine's group was ended, and ``kept`` holds the
    results the record keeps of that anchor (an interrupted ERROR, the pairs taken so far, a
    planted-fault proof so far). A KeyboardInterrupt, so that it ends the run like any stop."""

    def __init__(self, signal_name: str, kept: Optional[list[Result]] = None):
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.kept = list(kept or [])


class Mode:
    """The interface every mode of a Run implements (see the module's docstring)."""

    name: ClassVar[str]  # RunRecord.mode: "run", "ab" or "plant"
    exit_rule: ClassVar[Callable[[Any], bool]]  # RunRecord.EXIT_RULES[name]

    def select(self, ctx: "RunContext") -> "list[LoadedAnchor]":
        """The anchors (LoadedAnchor) of the run context this mode measures.

        :raises UsageError: nothing this mode can measure was selected.
        """
        raise NotImplementedError

    def evaluate(self, run: "Run", loaded: "LoadedAnchor") -> list[Result]:
        """One selected anchor to the record's results, measured with the run's resources.

        :raises Stopped: a stop signal arrived; its ``kept`` are the anchor's results so far.
        """
        raise NotImplementedError

    def finish(self, run: "Run") -> dict[str, Any]:
        """The record's fields this mode decides, as keyword arguments of RunRecord.new plus
        ``gate`` (RunRecord.finish's: None for a record judged by its verdicts alone)."""
        return {"settings": {}, "gate": None}

    def measured(self, run: "Run") -> None:
        """After the last anchor, while the box lock and signals still hold (an engine upgrade
        night pairs its rate series here). A stop signal sets ``run.stop.received``."""

    def notes(self, record: "RunRecord", history: "History") -> list[str]:
        """Lines said before the record joins ``history`` (the run's own history.sqlite)."""
        return []
