"""A Run owns one run of lawbench, whatever command started it: the context, one Resources, the
stop signals, every anchor's evaluation, the exit code and the saving of the record.

    run = Run(ctx, out=Path("lawbench-out"))          # mode "run", "ab" or "plant"
    record = run.measure(lambda: [run.evaluate(la.anchor, la.file) for la in anchors])
    return run.exit_code

`lawbench run` drives the same object through pytest (lawbench.core.run.session: its items call
``evaluate``, its session hooks call ``start``, ``finish`` and ``save``); `lawbench ab` and
`lawbench census plant` call ``measure``. Every mode writes the same RunRecord — run.json, a
history row, the step summary, report.html — and calls the `lawbench_run_finished` hook, so an
A/B or a planted-fault proof has a past and a report like any night.
"""
from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from lawbench.core.run import signals
from lawbench.core.errors import EngineInterrupted, LawbenchError
from lawbench.core.run.evaluate import evaluate
from lawbench.core.models import Anchor, Result, Verdict
from lawbench.core.models.run_record import CacheRepair, RunRecord, utc_now
from lawbench.core.laws.resources import Resources


class Run:
    """One run: evaluate anchors (or take a mode's own results), then finish and save once.

    :param ctx: the run's lawbench.core.run.context.RunContext.
    :param mode: "run", "ab" or "plant" (RunRecord.mode).
    :param out: the folder for run.json, history.sqlite and report.html (None: the record is
        only kept in memory, for a caller that saves nothing).
    :param history: append the record to OUT/history.sqlite.
    :param engine: the llama.cpp build this run's resources use instead of choosing one (the A/B's
        engine A, whose llama-quantize also makes the synthetic models).
    """

    def __init__(self, ctx: Any, *, mode: str = "run", out: Optional[Path] = None, history: bool = True,
                 engine: Any = None, settings: Optional[dict[str, Any]] = None):
        self.ctx, self.mode, self.policy = ctx, mode, ctx.policy
        self.out = None if out is None else Path(out)
        self.keep_history = history
        self.settings = dict(settings or {})
        self.resources = Resources(llama_dir=ctx.llama_dir, profile=ctx.policy.profile, engine=engine)
        # `lawbench` installed the handlers for the whole command; pytest driven directly did not
        self._own_signals = signals.installed() is None
        self.stop = signals.install()
        self.results: list[Result] = []
        self.listed: list[Result] = []  # retired anchors: carried in the record, never run
        self.not_reached: list[str] = []  # anchors left when the --deadline came near
        self.engine: Optional[dict[str, Any]] = None  # the record's engine; default: the resources'
        self.started: Optional[str] = None
        self.environment: dict[str, Any] = {}
        self.record: Optional[RunRecord] = None
        self.engine_upgrade: Any = None  # EngineUpgrade: an engine upgrade night's pairs (pair_engine_upgrade)
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

    def evaluate(self, anchor: Anchor, file: Optional[str] = None) -> Result:
        """One anchor to a Result (lawbench.core.run.evaluate), kept in the record. A stop signal ends
        the run after the anchor: the engine was ended and its samples kept, then KeyboardInterrupt
        goes on up (an anchor stopped outside its engine is recorded as an ERROR that says so)."""
        law = self.ctx.registry.law(anchor.law)
        started = time.monotonic()
        try:
            result = evaluate(anchor, law, self.policy, self.resources, file=file)
        except KeyboardInterrupt as exc:
            result = interrupted_result(anchor, self.policy.profile.id, EngineInterrupted.signal_of(exc))
            result.duration_s = round(time.monotonic() - started, 3)
            self.results.append(result)
            raise
        self.results.append(result)
        if self.stop.received:
            raise KeyboardInterrupt(self.stop.received)
        return result

    def add(self, result: Result) -> None:
        """A result a mode made itself (an A/B's pairs, a planted fault's proof)."""
        self.results.append(result)

    def measure(self, body: Callable[[], Any]) -> RunRecord:
        """Start, run ``body`` (which evaluates or adds), then finish and save — also when a stop
        signal ends it early: the record keeps what ran and says which signal."""
        self.start()
        interrupted = None
        try:
            body()
        except KeyboardInterrupt as exc:
            interrupted = self.stop.received or EngineInterrupted.signal_of(exc)
        except BaseException:  # an error for people (the box is busy, …): no record, nothing held
            self.resources.close()
            raise
        if interrupted is None:
            self.pair_engine_upgrade()
            interrupted = self.stop.received
        record = self.finish(interrupted=interrupted)
        self.save()
        return record

    def pair_engine_upgrade(self) -> None:
        """Under `--gate baseline`, a night whose engine build replaces the accepted night's pairs its
        rate series on both builds before the record is finished (lawbench.core.run.upgrade). A stop
        signal ends the pairing; ``stop.received`` then says the run was interrupted."""
        if self.mode != "run" or self.ctx.gate is None:
            return
        from lawbench.core.run.upgrade import pair_upgrade

        try:
            self.engine_upgrade = pair_upgrade(self)
        except KeyboardInterrupt as exc:
            self.stop.received = self.stop.received or EngineInterrupted.signal_of(exc)
        except Exception as exc:  # the night's record must still be written: an unpaired upgrade is red
            from lawbench.core.models.upgrade import EngineUpgrade
            from lawbench.core.run.upgrade import ALPHA, TOLERANCE

            why = " ".join(f"{type(exc).__name__}: {exc}".split())
            self.engine_upgrade = EngineUpgrade(replaced="?", tonight="?", accepted_run_id="?", alpha=ALPHA,
                                                tolerance=TOLERANCE, error=f"the pairing failed: {why}")

    # ------------------------------------------------------------------ the end

    def finish(self, interrupted: Optional[str] = None, broke_down: bool = False) -> RunRecord:
        """The record, with its exit code decided by the one rule (RunRecord.finish): the verdicts,
        the gate under `--gate baseline`, 128 + the signal's number when a signal stopped it.
        ``broke_down``: the front end failed outside any anchor (pytest's internal error)."""
        self.stop.closing = True  # a further signal must not cut the record in half
        self.resources.close()
        ctx = self.ctx
        record = RunRecord.new(
            self.policy.profile.id, detected_profile=ctx.detected, profile_matches=self.policy.on_own_runner,
            strict=self.policy.strict, cadence=ctx.cadence if self.mode == "run" else None, argv=sys.argv,
            machine=ctx.machine.model_dump(mode="json"), environment=self.environment,
            engine=self.engine if self.engine is not None else self.resources.engine_info(),
            started=self.started, mode=self.mode, settings=self.settings)
        if self.mode == "run":
            record.weekly_slice = ctx.weekly_slice
        from lawbench.core.store import repairs

        # what the cache had to make again (a planted build, a swapped model) is the night's evidence too
        record.cache_repairs = [CacheRepair.model_validate(r) for r in repairs.take()]

        record.engine_upgrade = self.engine_upgrade  # judged by the gate with the rest of the night
        gate = ctx.gate.judge if ctx.gate is not None and self.mode == "run" else None
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
        """run.json, the history row, the step summary, report.html, then the `lawbench_run_finished`
        hook. What fails is named; when run.json or the history row fails, the record is also kept
        where no later run overwrites it."""
        from lawbench.core.record import reports
        from lawbench.core.history.store import History
        from lawbench.core.record.summaries import append_step_summary

        record = self.record
        assert record is not None, "save() after finish()"
        failed = []
        if self.out is not None:
            try:
                self.record_path = reports.write_json(record, self.out / "run.json")
            except OSError as exc:
                failed.append(f"cannot write the run record {self.out / 'run.json'}: {exc.strerror or exc}")
            if self.keep_history:
                try:
                    with History(self.out / "history.sqlite") as history:
                        self._said_since_last_run(record, history)
                        history.append(record)
                except (LawbenchError, OSError, sqlite3.Error) as exc:
                    failed.append(f"cannot append run {record.run_id} to the history: {exc}")
        if failed:  # run.json itself may have been written: both places are named
            self.fallback_path = reports.write_fallback(record)
            self.record_path = self.record_path or self.fallback_path
        try:
            append_step_summary(record)
        except LawbenchError as exc:  # a view of the record: the record itself is safe
            failed.append(str(exc))
        if self.out is not None:
            from lawbench.core.html import write_run_report  # report.html: a view too (lawbench[plots])
            failed += filter(None, [write_run_report(record, self.out / "report.html")])
        for problem in failed:
            self.output_error(problem)
        self._run_finished_hooks(record)

    def _said_since_last_run(self, record: RunRecord, history: Any) -> None:
        """An absolute run (a developer's) says which rates moved since the previous run of the same
        profile, machine and engine in its local history; the nightly gate judges rates itself."""
        if record.gate is not None or self.mode != "run":
            return
        from lawbench.core.history.gate import baseline_of
        from lawbench.core.history.rates import since_last_run

        nights = baseline_of(record, history).nights
        for line in since_last_run(record, nights[-1]) if nights else []:
            print(f"lawbench: note: {line}", flush=True)

    def output_error(self, problem: str) -> None:
        """An output that could not be written: said on stderr with where the record is, and the
        exit code becomes at least 1."""
        kept = [str(p) for p in dict.fromkeys([self.record_path, self.fallback_path]) if p]
        where = f"the run record is kept at {' and '.join(kept)}" if kept else \
            "no folder took the run record, so it was printed to stderr"
        self.output_errors.append(problem)
        # on a line of its own: pytest's progress line is still open when the outputs are written
        print(f"\nlawbench: error: {problem}; {where}", file=sys.stderr, flush=True)

    def _run_finished_hooks(self, record: RunRecord) -> None:
        """Each plugin's `lawbench_run_finished` through pluggy, one plugin at a time: an
        exporter's bug is one line naming it and never costs another exporter or the verdicts."""
        registry = self.ctx.registry
        pm = registry.pm
        impls = pm.hook.lawbench_run_finished.get_hookimpls()
        for impl in impls:
            others = [i.plugin for i in impls if i.plugin is not impl.plugin]
            try:
                pm.subset_hook_caller("lawbench_run_finished", remove_plugins=others)(record=record)
            except Exception as exc:
                origin = registry.origins.get(id(impl.plugin), f"plugin {impl.plugin_name}")
                print(f"lawbench: error: lawbench_run_finished of {origin} failed: {type(exc).__name__}: {exc}",
                      file=sys.stderr)

    def close(self) -> None:
        """Release the resources and, when this Run installed the stop handlers, restore them."""
        self.resources.close()
        if self._own_signals:
            signals.restore()
            self._own_signals = False


def interrupted_result(anchor: Any, profile_id: str, signal_name: str) -> Result:
    """The anchor that was running when the run was stopped outside the engine (building it,
    fetching a model): an ERROR that says so, so the record shows where the run stopped."""
    return Result(anchor_id=anchor.id, law=anchor.law, kind=anchor.kind, profile=profile_id,
                  quantity=anchor.quantity, unit=anchor.unit, published=anchor.value,
                  verdict=Verdict.ERROR, reason=f"interrupted by {signal_name} before the anchor finished")
