"""pytest, the front end of `lawbench run`: what to collect, the -k of retired anchors, the --deadline,
JUnit properties, the VOID letter and the terminal summary. The run itself — resources, signals,
evaluation, the exit code, the record — is the Run (lawbench.core.run) that the items call."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

import pytest

from lawbench.core import progress
from lawbench.core.errors import LawbenchError
from lawbench.core.run.evaluate import retired_result
from lawbench.core.run.items import SESSION_NAME, AnchorFile, AnchorItem, keyword_filter
from lawbench.core.claims.loading import LoadedAnchor
from lawbench.core.run.run import Run
from lawbench.core.run.context import RunContext

__all__ = ["AnchorSession", "start_session"]


def start_session(config: pytest.Config) -> "AnchorSession":
    """Register the anchor session on the Run `lawbench run` passed, or on one made from the
    pytest options when pytest is driven directly."""
    opt = config.getoption
    run = next((p for p in config.pluginmanager.get_plugins() if isinstance(p, Run)), None)
    if run is None:
        try:
            ctx = RunContext(opt("lawbench_profile"), laws=tuple(opt("lawbench_law")),
                             strict=opt("lawbench_strict"), llama_dir=opt("lawbench_llama_dir"),
                             cadence=opt("lawbench_cadence"))
        except LawbenchError as exc:
            raise pytest.UsageError(str(exc)) from None
        run = Run(ctx, out=Path(opt("lawbench_out")), history=not opt("lawbench_no_history"))
    session = AnchorSession(config, run)
    config.pluginmanager.register(session, SESSION_NAME)
    return session


class AnchorSession:
    """Registered as a pytest plugin for the duration of an anchor run."""

    def __init__(self, config: pytest.Config, run: Run):
        self.config = config
        self.run = run
        self.ctx = run.ctx
        self.registry = self.ctx.registry
        progress.install_for_pytest(config)  # a build or a download is seen while it runs
        # Retired anchors are not items, so pytest's -k never sees them: it is applied here.
        matches = keyword_filter(config.getoption("keyword") or None)  # pytest's default is ""
        self.retired = [la for la in self.ctx.anchor_set.anchors
                        if self.ctx.selected(la) and not la.anchor.runs and matches(la)]
        run.listed = [retired_result(la.anchor, run.policy.profile.id) for la in self.retired]
        self._by_file: dict[Path, list[LoadedAnchor]] = {}
        for la in self.ctx.anchor_set.anchors:
            if self.ctx.selected(la) and la.anchor.runs:
                self._by_file.setdefault(Path(la.file).resolve(), []).append(la)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Optional[bool]:
        """Near the --deadline, an anchor whose worst case no longer fits is not started: the run
        ends with an honest partial record naming it, instead of a job killed with no record."""
        from lawbench.core.run.plan import worst_case_s

        if self.ctx.deadline is None or not isinstance(item, AnchorItem):
            return None
        if self.run.not_reached or time.monotonic() + worst_case_s(item.anchor) > self.ctx.deadline:
            self.run.not_reached.append(item.anchor.id)
            return True  # handled: pytest neither runs nor reports it
        return None

    def anchors_in(self, path: Path) -> list[LoadedAnchor]:
        return self._by_file.get(Path(path).resolve(), [])

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector):
        if file_path.resolve() in self._by_file:
            return AnchorFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if isinstance(item, AnchorItem) and report.when == "call" and item.result is not None:
            r = item.result
            report.lawbench_verdict = r.verdict.value
            for key in ("verdict", "kind", "published", "predicted", "statistic", "measured", "interval",
                        "band", "unit", "reason"):
                value = getattr(r, key)
                if value is not None and value != "":
                    item.user_properties.append((key, value.value if key == "verdict" else value))
        return report

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config):
        verdict = getattr(report, "lawbench_verdict", None)
        if verdict == "VOID":
            return "void", "V", "VOID"
        if verdict == "ERROR":
            return "error", "E", "ERROR"
        return None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.run.start()

    # Innermost wrapper: the record is written before any plugin's own sessionfinish (JUnit XML
    # may fail on a bad path), and such a failure is reported here, inside the terminal
    # reporter's wrapper, which then still prints the summary.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        run = self.run
        # A run that measured nothing (no anchor selected, a -k pytest could not parse, only
        # collecting) leaves no record: the history holds runs, and those were not runs.
        nothing_ran = exitstatus in (pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.USAGE_ERROR) \
            or self.config.getoption("collectonly", False)
        if not nothing_ran and not run.stop.received and exitstatus != pytest.ExitCode.INTERNAL_ERROR:
            run.mode.measured(run)  # an engine upgrade night: still under the box lock, signals live
        run.stop.closing = True
        run.resources.close()
        if not nothing_ran or run.stop.received:
            interrupted = run.stop.received
            if exitstatus == pytest.ExitCode.INTERRUPTED and not interrupted:
                interrupted = "KeyboardInterrupt"  # pytest.exit() or an interrupt no handler saw
            # pytest's own failure (an item that failed outside its anchor's verdict) is never a
            # success; under --gate baseline the gate, not the verdicts, says red or green
            broke_down = exitstatus == pytest.ExitCode.INTERNAL_ERROR or (
                exitstatus == pytest.ExitCode.TESTS_FAILED and self.ctx.gate is None)
            run.finish(interrupted=interrupted, broke_down=broke_down)
            run.save()
            session.exitstatus = run.exit_code  # what pytest returns: the Run's
        try:
            return (yield)
        except OSError as exc:  # pytest's JUnit XML writer is the one output written after ours
            junit = self.config.getoption("xmlpath", None)
            what = exc.filename or (f"the JUnit XML {junit}" if junit else "an output")
            run.output_error(f"cannot write {what}: {exc.strerror or exc}")
            return None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        progress.uninstall()
        self.run.close()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        run = self.run
        if run.record is None:
            return
        from lawbench.core.record.summaries import print_table

        print_table(run.record)  # its first line is the headline
        from lawbench.core.record.gate_view import gate_text

        for line in gate_text(run.record):  # the gate's colour decides the exit status: said last
            terminalreporter.write_line(line)
        if run.record.interrupted:
            terminalreporter.write_line(f"run interrupted by {run.record.interrupted}: the anchors "
                                        f"finished so far and the one that was running are recorded")
        copy = run.fallback_path if run.fallback_path not in (None, run.record_path) else None
        terminalreporter.write_line(f"run record: {run.record_path or '(printed to stderr)'}"
                                    + (f" (a copy kept at {copy})" if copy else ""))
        if run.output_errors:  # the headline judged the verdicts; the exit code judges the outputs too
            terminalreporter.write_line(f"lawbench: exit 1: {len(run.output_errors)} output(s) could not be "
                                        f"written (the errors above); the verdicts stand as shown")
