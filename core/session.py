"""One anchor run inside pytest: what to collect, the policy, shared resources, the run record."""
from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from lawbench.core import progress
from lawbench.core.errors import LawbenchError
from lawbench.core.evaluate import RunPolicy
from lawbench.core.items import SESSION_NAME, AnchorFile, AnchorItem, history_results, keyword_filter
from lawbench.core.loading import LoadedAnchor, load_all
from lawbench.core.models import Result
from lawbench.core.signals import StopSignals


class RunContext:
    """Everything a run needs before the first anchor: registry, profiles, policy, anchors.

    Built once: by `lawbench run` (which turns a LawbenchError into exit 2 before pytest starts)
    and handed to pytest as a plugin object, or by the pytest plugin when pytest is driven
    directly. The anchor session hangs itself on it (``session``) so the CLI can read the record.
    """

    session: Optional["AnchorSession"] = None

    def __init__(self, profile_id: str, *, laws: tuple[str, ...] = (), strict: bool = False,
                 llama_dir: Optional[str] = None, cadence: Optional[str] = "full",
                 gate: Any = None, deadline_min: Optional[float] = None):
        from lawbench.core.hardware.detect import fingerprint_machine, match_profile, profile_matches
        from lawbench.core.hardware.profiles import get_profile, plugin_profiles
        from lawbench.core.registry import get_registry

        self.registry = get_registry()
        self.profiles = plugin_profiles(self.registry)
        self.machine = fingerprint_machine()
        self.detected, self.detect_reasons = match_profile(self.machine, self.profiles)
        if profile_id in ("", "detect", None):
            profile_id = self.detected
        profile = get_profile(profile_id, self.profiles)
        for law in laws:
            self.registry.law(law)  # unknown law -> PluginError naming the known ones
        self.laws = tuple(laws)
        self.policy = RunPolicy(profile=profile, profiles=self.profiles,
                                on_own_runner=profile_matches(self.machine, profile), strict=strict,
                                mismatch=mismatch_reasons(self.machine, profile))
        # None: the profile's own default (default_cadence); a command that names anchors passes "full".
        self.cadence = cadence or default_cadence(profile)
        if strict and not self.policy.on_own_runner:
            announce_mismatched_runner(self.machine, profile, self.detected)
        # A bad anchor file of a plugin this run did not select is set aside (and named);
        # of a selected law it is exit 2 before anything runs.
        unselected = [law for law in self.registry.laws if laws and law not in laws]
        self.anchor_set = load_all(self.registry, profiles=self.profiles.keys(), lenient=unselected)
        self.llama_dir = llama_dir
        self.gate = gate  # lawbench.core.gate.GateSetup for `--gate baseline`; None: absolute
        # --deadline: from now, the run stops taking anchors whose worst case no longer fits
        self.deadline = None if deadline_min is None else time.monotonic() + 60 * deadline_min

    def bound_elsewhere(self) -> dict[str, int]:
        """Other profiles this machine matches, with how many measured anchors bind to them and
        not to the chosen one: a measured profile (`lawbench profiles measure`) out-ranks the
        generic cpu profile in detection, and the cpu anchors then do not run unless asked for."""
        from lawbench.core.hardware.detect import profile_matches

        chosen = self.policy.profile.id
        out = {}
        for pid, profile in self.profiles.items():
            if pid == chosen or not profile_matches(self.machine, profile):
                continue
            n = sum(1 for la in self.anchor_set.anchors if la.anchor.kind != "prediction" and la.anchor.runs
                    and pid in la.anchor.profiles and chosen not in la.anchor.profiles
                    and (not self.laws or la.anchor.law in self.laws))
            if n:
                out[pid] = n
        return out

    def left_by_cadence(self) -> int:
        """Runnable anchors this profile and law selection would run under `--cadence full` but not now."""
        full = RunContext.__new__(RunContext)
        full.__dict__.update(self.__dict__, cadence="full")
        return sum(1 for la in self.anchor_set.anchors
                   if la.anchor.runs and full.selected(la) and not self.selected(la))

    def weekly_anchors(self) -> list[str]:
        """This profile's runnable anchors the weekly run takes and this run does not (the morning view)."""
        from lawbench.core.plan import weekly_cadence

        weekly = RunContext.__new__(RunContext)
        weekly.__dict__.update(self.__dict__, cadence=weekly_cadence(self.policy.profile))
        return sorted(la.anchor.id for la in self.anchor_set.anchors
                      if la.anchor.runs and weekly.selected(la) and not self.selected(la))

    def selected(self, loaded: LoadedAnchor) -> bool:
        a = loaded.anchor
        if self.laws and a.law not in self.laws:
            return False
        if not a.in_cadence(self.cadence):
            return False
        if a.kind == "prediction":
            return True  # predictions run anywhere, with the constants of the profile they bind to
        return not a.profiles or self.policy.profile.id in a.profiles

    def files(self) -> list[Path]:
        # History anchors are reported, never collected (items.history_results): a file holding
        # only history for this profile has no item, and pytest refuses a path that yields none.
        return sorted({Path(la.file).resolve() for la in self.anchor_set.anchors
                       if self.selected(la) and la.anchor.runs})


def default_cadence(profile: Any) -> str:
    """What a run selects when neither --cadence nor anchors are named: a first look on the generic
    profile (any machine), a night's worth on a specific one (the weekly rest is one flag away)."""
    return "quick" if profile.fingerprint.generic else "nightly"


def mismatch_reasons(machine: Any, profile: Any) -> tuple[str, ...]:
    """What this machine lacks of the profile's fingerprint, one "no: …" line per check."""
    from lawbench.core.hardware.detect import match_reasons

    return tuple(r for r in match_reasons(machine, profile)[1] if r.startswith("no: "))


def announce_mismatched_runner(machine: Any, profile: Any, detected: str) -> None:
    """--strict is how a runner job runs: on a machine that is not the profile's own, every
    measurement anchor fails with the reason (lawbench.core.evaluate) while the predictions run,
    and the run fails even when nothing measured was selected (RunContext.runner_mismatch). This
    says once, up front, on stderr and in the step summary, why and where the job belongs."""
    import sys

    from lawbench.core.summaries import append_step_summary_text

    gpus = ", ".join(f"{g.name} (cc {g.compute_capability}, via {g.source})" for g in machine.gpus) or "none found"
    lines = [f"this machine does not match profile {profile.id!r}, and --strict (a runner job) measures its "
             f"own hardware or fails: every measurement anchor fails, the predictions still run:",
             *(f"  {r}" for r in mismatch_reasons(machine, profile)),
             f"  detected profile: {detected}; GPUs: {gpus}",
             "  fix: run this job on the runner labelled " + " + ".join(profile.runner_labels or ["(none)"])
             + "; on a GPU runner check the driver (`nvidia-smi`) and `lawbench profiles detect`"]
    append_step_summary_text("### lawbench: runner refused\n\n```\n" + "\n".join(lines) + "\n```")
    print("lawbench: error: " + "\n".join(lines), file=sys.stderr, flush=True)


def start_session(config: pytest.Config) -> "AnchorSession":
    """Register the anchor session, on the CLI's RunContext when `lawbench run` passed one."""
    opt = config.getoption
    ctx = next((p for p in config.pluginmanager.get_plugins() if isinstance(p, RunContext)), None)
    if ctx is None:
        try:
            ctx = RunContext(opt("lawbench_profile"), laws=tuple(opt("lawbench_law")),
                             strict=opt("lawbench_strict"), llama_dir=opt("lawbench_llama_dir"),
                             cadence=opt("lawbench_cadence"))
        except LawbenchError as exc:
            raise pytest.UsageError(str(exc)) from None
    session = AnchorSession(config, ctx)
    config.pluginmanager.register(session, SESSION_NAME)
    return session


class AnchorSession:
    """Registered as a pytest plugin for the duration of an anchor run."""

    def __init__(self, config: pytest.Config, ctx: RunContext):
        self.config = config
        opt = config.getoption
        self.ctx = ctx
        ctx.session = self
        progress.install_for_pytest(config)  # a build or a download is seen while it runs
        self.registry = self.ctx.registry
        self.policy = self.ctx.policy
        self.results: list[Result] = []
        # History anchors are not items, so pytest's -k never sees them: it is applied here.
        matches = keyword_filter(opt("keyword") or None)  # pytest's default is ""
        self.history = [la for la in self.ctx.anchor_set.anchors
                        if self.ctx.selected(la) and not la.anchor.runs and matches(la)]
        self._by_file: dict[Path, list[LoadedAnchor]] = {}
        for la in self.ctx.anchor_set.anchors:
            if self.ctx.selected(la) and la.anchor.runs:
                self._by_file.setdefault(Path(la.file).resolve(), []).append(la)
        from lawbench.core.resources import Resources

        self.resources = Resources(llama_dir=self.ctx.llama_dir, profile=self.policy.profile)
        self.out_dir = Path(opt("lawbench_out"))
        self.stop = StopSignals()
        self.started: Optional[str] = None
        self.environment: dict[str, Any] = {}
        self.record: Any = None
        self.record_path: Optional[Path] = None
        self.fallback_path: Optional[Path] = None  # the copy kept when an output in out_dir failed
        self.output_errors: list[str] = []  # outputs that could not be written, for people
        self.not_reached: list[str] = []  # anchors left when the --deadline came near

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Optional[bool]:
        """Near the --deadline, an anchor whose worst case no longer fits is not started: the run
        ends with an honest partial record naming it, instead of a job killed with no record."""
        from lawbench.core.plan import worst_case_s

        if self.ctx.deadline is None or not isinstance(item, AnchorItem):
            return None
        if self.not_reached or time.monotonic() + worst_case_s(item.anchor) > self.ctx.deadline:
            self.not_reached.append(item.anchor.id)
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
        from lawbench.core.hardware.detect import environment_snapshot
        from lawbench.core.reports import utc_now

        self.started = utc_now()
        self.stop.install()
        try:
            self.environment = environment_snapshot()
        except Exception as exc:  # the snapshot is evidence, never a reason to lose a run
            self.environment = {"error": f"{type(exc).__name__}: {exc}"}

    # Innermost wrapper: the record is written before any plugin's own sessionfinish (JUnit XML
    # may fail on a bad path), and such a failure is reported here, inside the terminal
    # reporter's wrapper, which then still prints the summary.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        self.stop.closing = True
        self.resources.close()
        # A run that measured nothing (no anchor selected, a -k pytest could not parse, only
        # collecting) leaves no record: the history holds runs, and those were not runs.
        nothing_ran = exitstatus in (pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.USAGE_ERROR) \
            or self.config.getoption("collectonly", False)
        if not nothing_ran or self.stop.received:
            self._record(exitstatus)
        if self.record is not None and self.record.interrupted:
            session.exitstatus = self.record.exit_code  # pytest returns it: 130 / 143, as a shell would
        try:
            return (yield)
        except OSError as exc:  # pytest's JUnit XML writer is the one output written after ours
            junit = self.config.getoption("xmlpath", None)
            what = exc.filename or (f"the JUnit XML {junit}" if junit else "an output")
            self._output_error(f"cannot write {what}: {exc.strerror or exc}")
            return None

    def _record(self, exitstatus: int) -> None:
        from lawbench.core.reports import RunRecord

        interrupted = self.stop.received
        if exitstatus == pytest.ExitCode.INTERRUPTED and not interrupted:
            interrupted = "KeyboardInterrupt"  # pytest.exit() or an interrupt no handler saw
        record = RunRecord.new(
            self.policy.profile.id, detected_profile=self.ctx.detected,
            profile_matches=self.policy.on_own_runner, strict=self.policy.strict, cadence=self.ctx.cadence,
            argv=sys.argv,
            machine=self.ctx.machine.model_dump(mode="json"), environment=self.environment,
            engine=self.resources.engine_info(), started=self.started)
        record.finish(self.results + history_results(self), interrupted=interrupted, not_reached=self.not_reached,
                      gate=self.ctx.gate.judge if self.ctx.gate is not None else None)
        if exitstatus == pytest.ExitCode.INTERNAL_ERROR and record.exit_code == 0:
            record.exit_code = 1  # the run broke down: never record it as a success
        self.record = record
        self._save(record)
        for impl in self.registry.pm.hook.lawbench_run_finished.get_hookimpls():
            try:
                impl.function(record=record)
            except Exception as exc:  # an exporter's bug must not change the verdicts
                origin = self.registry.origins.get(id(impl.plugin), f"plugin {impl.plugin_name}")
                print(f"lawbench: error: lawbench_run_finished of {origin} failed: {type(exc).__name__}: {exc}",
                      file=sys.stderr)

    def _save(self, record: Any) -> None:
        """run.json, the history row and the step summary. What fails is named; when run.json or
        the history row fails, the record is also kept where no later run overwrites it."""
        from lawbench.core.history import History
        from lawbench.core.reports import write_fallback, write_json
        from lawbench.core.summaries import append_step_summary

        failed = []
        try:
            self.record_path = write_json(record, self.out_dir / "run.json")
        except OSError as exc:
            failed.append(f"cannot write the run record {self.out_dir / 'run.json'}: {exc.strerror or exc}")
        if not self.config.getoption("lawbench_no_history"):
            try:
                with History(self.out_dir / "history.sqlite") as history:
                    history.append(record)
            except (LawbenchError, OSError, sqlite3.Error) as exc:
                failed.append(f"cannot append run {record.run_id} to the history: {exc}")
        if failed:  # run.json itself may have been written: both places are named
            self.fallback_path = write_fallback(record)
            self.record_path = self.record_path or self.fallback_path
        try:
            append_step_summary(record)
        except LawbenchError as exc:  # a view of the record: the record itself is safe
            failed.append(str(exc))
        from lawbench.core.html import write_run_report  # report.html: a view too (lawbench[plots])
        failed += filter(None, [write_run_report(record, self.out_dir / "report.html")])
        for problem in failed:
            self._output_error(problem)

    def _output_error(self, problem: str) -> None:
        kept = [str(p) for p in dict.fromkeys([self.record_path, getattr(self, "fallback_path", None)]) if p]
        where = f"the run record is kept at {' and '.join(kept)}" if kept else \
            "no folder took the run record, so it was printed to stderr"
        self.output_errors.append(problem)
        # on a line of its own: pytest's progress line is still open when the outputs are written
        print(f"\nlawbench: error: {problem}; {where}", file=sys.stderr, flush=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        progress.uninstall()
        self.stop.restore()
        self.resources.close()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.record is None:
            return
        from lawbench.core.summaries import print_table

        print_table(self.record)  # its first line is the headline
        from lawbench.core.gate_view import gate_text

        for line in gate_text(self.record):  # the gate's colour decides the exit status: said last
            terminalreporter.write_line(line)
        if self.record.interrupted:
            terminalreporter.write_line(f"run interrupted by {self.record.interrupted}: the anchors "
                                        f"finished so far and the one that was running are recorded")
        copy = self.fallback_path if self.fallback_path not in (None, self.record_path) else None
        terminalreporter.write_line(f"run record: {self.record_path or '(printed to stderr)'}"
                                    + (f" (a copy kept at {copy})" if copy else ""))
        if self.output_errors:  # the headline judged the verdicts; the exit code judges the outputs too
            terminalreporter.write_line(f"lawbench: exit 1: {len(self.output_errors)} output(s) could not be "
                                        f"written (the errors above); the verdicts stand as shown")
