"""A run's outputs are plugins of its own hook: run.json, the history row, the step summary and
report.html are written by built-in `lawbench_run_finished` implementations, registered on the
registry's plugin manager like any third party's (pytest's terminal report and JUnit XML are
plugins of pytest's hooks the same way).

A third-party output is a plugin package with one hook (docs/plugins.md):

    @lawbench.hookimpl
    def lawbench_run_finished(record, outputs):
        if outputs.folder is not None:
            (outputs.folder / "mine.txt").write_text(record.run_id)

The Run calls lawbench's own outputs first, in the order of BUILTIN_OUTPUTS, then every other
plugin's, one plugin at a time: an exporter's bug is one line naming it and never costs another
output or the verdicts. An output that could not be written says so with ``outputs.failed``: the
run's exit code becomes at least 1, and a lost run.json or history row keeps the record elsewhere.
"""
from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from lawbench.core.errors import LawbenchError
from lawbench.core.history.store import History
from lawbench.core.laws.hookspecs import hookimpl
from lawbench.core.models.run_record import RunRecord
from lawbench.core.record import reports
from lawbench.core.record.summaries import append_step_summary

if TYPE_CHECKING:
    from lawbench.core.laws.registry import Registry


@dataclass
class RunOutputs:
    """Where a finished run's outputs go, handed to every `lawbench_run_finished` implementation.

    :param folder: the run's --out folder; None for a run that keeps its record in memory.
    :param history: whether the run appends to ``folder``/history.sqlite.
    :param notes: the run's mode's lines said before its record joins the history
        (lawbench.core.run.mode.Mode.notes).
    """

    folder: Optional[Path] = None
    history: bool = True
    notes: Callable[[RunRecord, History], list[str]] = lambda record, history: []
    written: dict[str, Path] = field(default_factory=dict)  # output name -> the file written
    problems: list[str] = field(default_factory=list)  # outputs that could not be written, for people
    record_lost: bool = False  # run.json or the history row failed: the Run keeps a copy elsewhere

    def wrote(self, name: str, path: Optional[Path]) -> None:
        """Say that output ``name`` was written at ``path`` (None: nothing to write here)."""
        if path is not None:
            self.written[name] = Path(path)

    def failed(self, problem: str, record_lost: bool = False) -> None:
        """Say that an output could not be written (one line for people: what, where, why); the
        run's exit code becomes at least 1. ``record_lost``: the run record itself was not kept."""
        self.problems.append(problem)
        self.record_lost = self.record_lost or record_lost


class RunJson:
    """OUT/run.json: the record, written atomically."""

    @hookimpl
    def lawbench_run_finished(self, record: RunRecord, outputs: RunOutputs) -> None:
        if outputs.folder is None:
            return
        target = outputs.folder / "run.json"
        try:
            outputs.wrote("run.json", reports.write_json(record, target))
        except OSError as exc:
            outputs.failed(f"cannot write the run record {target}: {exc.strerror or exc}", record_lost=True)


class HistoryRow:
    """A row of OUT/history.sqlite, after the mode's notes on the runs already there."""

    @hookimpl
    def lawbench_run_finished(self, record: RunRecord, outputs: RunOutputs) -> None:
        if outputs.folder is None or not outputs.history:
            return
        target = outputs.folder / "history.sqlite"
        try:
            with History(target) as history:
                for line in outputs.notes(record, history):
                    print(f"lawbench: note: {line}", flush=True)
                history.append(record)
            outputs.wrote("history.sqlite", target)
        except (LawbenchError, OSError, sqlite3.Error) as exc:
            outputs.failed(f"cannot append run {record.run_id} to the history: {exc}", record_lost=True)


class StepSummary:
    """The run's Markdown, appended to `$GITHUB_STEP_SUMMARY` when it is set."""

    @hookimpl
    def lawbench_run_finished(self, record: RunRecord, outputs: RunOutputs) -> None:
        try:
            outputs.wrote("step summary", append_step_summary(record))
        except LawbenchError as exc:  # a view of the record: the record itself is safe
            outputs.failed(str(exc))


class HtmlReport:
    """OUT/report.html when matplotlib is installed (lawbench[plots])."""

    @hookimpl
    def lawbench_run_finished(self, record: RunRecord, outputs: RunOutputs) -> None:
        if outputs.folder is None:
            return
        from lawbench.core.html import write_run_report  # matplotlib, only when a page is made

        target = outputs.folder / "report.html"
        problem = write_run_report(record, target)
        if problem:
            outputs.failed(problem)
        elif target.is_file():
            outputs.wrote("report.html", target)


# lawbench's own outputs, by plugin name, in the order they are written: the record before its views
BUILTIN_OUTPUTS: dict[str, Any] = {
    "lawbench.outputs.run-json": RunJson(),
    "lawbench.outputs.history": HistoryRow(),
    "lawbench.outputs.step-summary": StepSummary(),
    "lawbench.outputs.report-html": HtmlReport(),
}


def register_outputs(registry: "Registry") -> None:
    """Register lawbench's own outputs on the registry's plugin manager (once per registry)."""
    for name, plugin in BUILTIN_OUTPUTS.items():
        if registry.pm.get_plugin(name) is None:
            registry.pm.register(plugin, name=name)
            registry.origins[id(plugin)] = f"plugin {name}"


def call_run_finished(registry: "Registry", record: RunRecord, outputs: RunOutputs, builtin: bool) -> None:
    """Each `lawbench_run_finished` through pluggy, one plugin at a time: lawbench's own outputs
    (``builtin``) in BUILTIN_OUTPUTS' order, or every other plugin's in registration order. An
    exception is one line naming the plugin; it never stops another plugin or changes a verdict."""
    pm = registry.pm
    impls = pm.hook.lawbench_run_finished.get_hookimpls()
    if builtin:
        order = list(BUILTIN_OUTPUTS)
        chosen = sorted((i for i in impls if i.plugin_name in BUILTIN_OUTPUTS), key=lambda i: order.index(i.plugin_name))
    else:
        chosen = [i for i in impls if i.plugin_name not in BUILTIN_OUTPUTS]
    for impl in chosen:
        others = [i.plugin for i in impls if i.plugin is not impl.plugin]
        try:
            pm.subset_hook_caller("lawbench_run_finished", remove_plugins=others)(record=record, outputs=outputs)
        except Exception as exc:
            origin = registry.origins.get(id(impl.plugin), f"plugin {impl.plugin_name}")
            print(f"lawbench: error: lawbench_run_finished of {origin} failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
