"""A Run owns one run of lawbench, whatever command started it: the context, one Resources, the
stop signals, every anchor's evaluation, the exit code and the saving of the record.

    run = Run(ctx, mode=Verify(), out=Path("lawbench-out"))   # or AB(…), Plant(…): lawbench.core.run.mode
    record = run.measure()                                    # the mode's anchors, evaluated and saved
    return run.exit_code

The Run holds a mode object and never asks which one: the mode selects the anchors, evaluates each
one, names the record's fields it decides and the exit rule. `lawbench run` drives the same object
through pytest (lawbench.core.run.session: its items call ``evaluate``, its session hooks call
``start``, ``finish`` and ``save``); `lawbench ab` and `lawbench census plant` call ``measure``.
Every mode's record is written by the same `lawbench_run_finished` plugins — run.json, a history
row, the step summary, report.html (lawbench.core.run.outputs) — and any third party's, so an
A/B or a planted-fault proof has a past and a report like any night.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from lawbench.core.errors import EngineInterrupted
from lawbench.core.models import Result
from lawbench.core.models.run_record import CacheRepair, RunRecord, utc_now
from lawbench.core.run import signals
from lawbench.core.run.mode import Mode, Stopped
from lawbench.core.run.outputs import RunOutputs, call_run_finished, register_outputs
from lawbench.core.laws.resources import Resources
from lawbench.core.run.verify import Verify

if TYPE_CHECKING:
    from lawbench.core.claims.loading import LoadedAnchor



class Run:
    """One run: its mode evaluates anchors, then the run finishes and saves once.

    :param ctx: the run's lawbench.core.run.context.RunContext.
    :param mode: what the run does (lawbench.core.run.mode.Mode; default Verify, `lawbench run`).
    :param out: the folder for run.json, history.sqlite and report.html (None: the record is
        only kept in memory, for a caller that saves nothing).
    :param history: append the record to OUT/history.sqlite.
    :param engine: the llama.cpp build this run's resources use instead of choosing one (the A/B's
        engine A, whose llama-quantize also makes the synthetic models).
    """

    def __init__(self, ctx: Any, *, mode: Optional[Mode] = None, out: Optional[Path] = None, history: bool = True,
                 engine: Any = None):
        self.ctx, self.policy = ctx, ctx.policy
        self.mode: Mode = mode if mode is not None else Verify()
        self.out = None if out is None else Path(out)
        self.keep_history = history
        self.resources = Resources(llama_dir=ctx.llama_dir, profile=ctx.policy.profile, engine=engine)
        # `lawbench` installed the handlers for the whole command; pytest driven directly did not
        self._own_signals = signals.installed() is None
        self.stop = signals.install()
        register_outputs(ctx.registry)  # run.json, the history row, …: lawbench_run_finished plugins
        self.results: list[Result] = []
        self.listed: list[Result] = []  # retired anchors: carried in the record, never run
        self.not_reached: list[str] = []  # anchors left when the --deadline came near
        self.started: Optional[str] = None
        self.environment: dict[str, Any] = {}
        self.record: Optional[RunRecord] = None
        self.engine_upgrade: Any = None  # EngineUpgrade: an engine upgrade night's pairs (Verify.measured)
        self.record_path: Optional[Path] = None
        self.fallback_path: Optional[Path] = None  # the copy kept when an output in out failed
        self.output_errors: list[str] = []  # outputs that could not be written, for people

    # ------------------------------------------------------------------ measuring

    def start(self) -> None:
        from lawbench.core.hardware.detect import environment_snapshot

        self.started = utc_now()
        try:
            self.environment = environment_snapshot()
        except Exception as exc:  # the snapshot is evidence, never a reason to lose a run
            self.environment = {"error": f"{type(exc).__name__}: {exc}"}

    def evaluate(self, loaded: "LoadedAnchor") -> list[Result]:
        """One selected anchor (a LoadedAnchor) to its results, by the mode, kept in the record. A
        stop signal ends the run after the anchor: what the mode's interrupt keeps (Stopped.kept)
        is recorded, then KeyboardInterrupt goes on up."""
        try:
            results = self.mode.evaluate(self, loaded)
        except Stopped as exc:
            self.results += exc.kept
            raise
        self.results += results
        if self.stop.received:
            raise KeyboardInterrupt(self.stop.received)
        return results

    def measure(self, anchors: "Optional[list[LoadedAnchor]]" = None) -> RunRecord:
        """Start, evaluate ``anchors`` (default: the mode's selection) one by one, then finish and
        save — also when a stop signal ends it early: the record keeps what ran and says which signal."""
        chosen = self.mode.select(self.ctx) if anchors is None else anchors
        self.start()
        interrupted = None
        try:
            for loaded in chosen:
                self.evaluate(loaded)
        except KeyboardInterrupt as exc:
            interrupted = self.stop.received or EngineInterrupted.signal_of(exc)
        except BaseException:  # an error for people (the box is busy, …): no record, nothing held
            self.resources.close()
            raise
        if interrupted is None:
            self.mode.measured(self)
            interrupted = self.stop.received
        record = self.finish(interrupted=interrupted)
        self.save()
        return record

    def record_so_far(self) -> RunRecord:
        """The night as measured so far, not finished: what a mode's ``measured`` step may judge
        before the record is (core/run/recheck.py reads its rates against the accepted nights)."""
        record = RunRecord.new(self.policy.profile.id, profile_matches=self.policy.on_own_runner,
                               machine=self.ctx.machine.model_dump(mode="json"), engine=self.resources.engine_info(),
                               started=self.started, mode=self.mode.name)
        return record.model_copy(update={"results": list(self.results)})

    # ------------------------------------------------------------------ the end

    def finish(self, interrupted: Optional[str] = None, broke_down: bool = False) -> RunRecord:
        """The record, with its exit code decided by the one rule (RunRecord.finish): the verdicts,
        the gate under `--gate baseline`, 128 + the signal's number when a signal stopped it.
        ``broke_down``: the front end failed outside any anchor (pytest's internal error)."""
        self.stop.closing = True  # a further signal must not cut the record in half
        self.resources.close()
        ctx = self.ctx
        fields = dict(self.mode.finish(self))
        gate = fields.pop("gate", None)
        weekly_slice = fields.pop("weekly_slice", None)
        if "engine" not in fields:  # a mode that names its own (an A/B's two builds) is not asked
            fields["engine"] = self.resources.engine_info()
        record = RunRecord.new(
            self.policy.profile.id, detected_profile=ctx.detected, profile_matches=self.policy.on_own_runner,
            strict=self.policy.strict, argv=sys.argv, machine=ctx.machine.model_dump(mode="json"),
            environment=self.environment, started=self.started, mode=self.mode.name, **fields)
        record.weekly_slice = weekly_slice
        from lawbench.core.store import repairs

        # what the cache had to make again (a planted build, a swapped model) is the night's evidence too
        record.cache_repairs = [CacheRepair.model_validate(r) for r in repairs.take()]

        record.engine_upgrade = self.engine_upgrade  # judged by the gate with the rest of the night
        self.record = record.finish(self.results + self.listed, interrupted=interrupted,
                                    not_reached=self.not_reached, gate=gate, broke_down=broke_down)
        return self.record

    @property
    def exit_code(self) -> int:
        """The command's exit status: the record's, and 1 when an output could not be written (the
        verdicts stand; the record says them). Read after finish()."""
        if self.record is None or self.record.exit_code is None:
            raise RuntimeError("Run.exit_code is read before Run.finish()")
        code = self.record.exit_code
        return max(code, 1) if self.output_errors else code

    def save(self) -> None:
        """The `lawbench_run_finished` plugins: lawbench's own outputs first — run.json, the history
        row, the step summary, report.html (lawbench.core.run.outputs) — then every other plugin's.
        What fails is named; when run.json or the history row fails, the record is also kept where
        no later run overwrites it."""
        from lawbench.core.record import reports

        record = self.record
        assert record is not None, "save() after finish()"
        outputs = RunOutputs(folder=self.out, history=self.keep_history, notes=self.mode.notes)
        registry = self.ctx.registry
        call_run_finished(registry, record, outputs, builtin=True)
        self.record_path = outputs.written.get("run.json")
        if outputs.record_lost:  # run.json itself may have been written: both places are named
            self.fallback_path = reports.write_fallback(record)
            self.record_path = self.record_path or self.fallback_path
        for problem in outputs.problems:
            self.output_error(problem)
        outputs.problems.clear()
        call_run_finished(registry, record, outputs, builtin=False)
        for problem in outputs.problems:  # another plugin's output that it says could not be written
            self.output_error(problem)

    def output_error(self, problem: str) -> None:
        """An output that could not be written: said on stderr with where the record is, and the
        exit code becomes at least 1."""
        kept = [str(p) for p in dict.fromkeys([self.record_path, self.fallback_path]) if p]
        where = f"the run record is kept at {' and '.join(kept)}" if kept else \
            "no folder took the run record, so it was printed to stderr"
        self.output_errors.append(problem)
        # on a line of its own: pytest's progress line is still open when the outputs are written
        print(f"\nlawbench: error: {problem}; {where}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Release the resources and, when this Run installed the stop handlers, restore them."""
        self.resources.close()
        if self._own_signals:
            signals.restore()
            self._own_signals = False

