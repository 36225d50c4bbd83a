"""One anchor run inside pytest: what to collect, the policy, shared resources, the run record."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from lawbench.core.evaluate import RunPolicy
from lawbench.core.law import LawbenchError
from lawbench.core.loading import LoadedAnchor, load_all
from lawbench.core.models import Result


class RunContext:
    """Everything a run needs before the first anchor: registry, profiles, policy, anchors.

    Built once by the CLI (which turns a LawbenchError into exit 2 before pytest starts) and again
    by the pytest plugin when pytest is driven directly.
    """

    def __init__(self, profile_id: str, *, laws: tuple[str, ...] = (), strict: bool = False,
                 llama_dir: Optional[str] = None):
        from lawbench.core.hardware.detect import fingerprint_machine, match_profile, profile_matches
        from lawbench.core.hardware.profiles import get_profile, load_profiles
        from lawbench.core.registry import get_registry

        self.registry = get_registry()
        self.profiles = load_profiles(extra_dirs=self.registry.profile_dirs)
        self.machine = fingerprint_machine()
        self.detected, self.detect_reasons = match_profile(self.machine, self.profiles)
        if profile_id in ("", "detect", None):
            profile_id = self.detected
        profile = get_profile(profile_id, self.profiles)
        for law in laws:
            self.registry.law(law)  # unknown law -> PluginError naming the known ones
        self.laws = tuple(laws)
        self.policy = RunPolicy(profile=profile, profiles=self.profiles,
                                on_own_runner=profile_matches(self.machine, profile), strict=strict)
        self.anchor_set = load_all(self.registry, profiles=self.profiles.keys())
        self.llama_dir = llama_dir
        self.bandwidth: Optional[dict] = None

    def selected(self, loaded: LoadedAnchor) -> bool:
        a = loaded.anchor
        if self.laws and a.law not in self.laws:
            return False
        if a.kind == "prediction":
            return True  # predictions run anywhere, with the constants of the profile they bind to
        return not a.profiles or self.policy.profile.id in a.profiles

    def measures_here(self) -> bool:
        return self.policy.on_own_runner and any(
            la.anchor.runs and la.anchor.kind != "prediction" and self.selected(la)
            for la in self.anchor_set.anchors)

    def complete_generic_profile(self) -> None:
        """The generic `cpu` profile ships no RAM bandwidth: measure it here, in this run, so the
        law prices decode with the bandwidth this machine has now (it drifts under load)."""
        profile = self.policy.profile
        ram = next((t for t in profile.tiers if t.kind == "ram"), None)
        if not profile.fingerprint.generic or ram is None or ram.bandwidth_measured_gbs or ram.bandwidth_spec_gbs:
            return
        if not self.measures_here():
            return
        from lawbench.core.hardware.bandwidth import measure_ram_bandwidth, measured_profile

        result = measure_ram_bandwidth()
        print(f"lawbench: measured RAM read bandwidth {result.median_gbs:g} GB/s "
              f"(median of {len(result.samples)}, {result.threads} threads) for profile {profile.id}", flush=True)
        measured = measured_profile(profile, result, self.machine, profile_id=profile.id)
        # keep the generic fingerprint: this is still the catch-all profile, now with a number
        measured = measured.model_copy(update={"fingerprint": profile.fingerprint})
        self.policy.profile = measured
        self.profiles[profile.id] = measured
        self.bandwidth = result.model_dump()

    def files(self) -> list[Path]:
        return sorted({Path(la.file).resolve() for la in self.anchor_set.anchors if self.selected(la)})


class AnchorSession:
    """Registered as a pytest plugin for the duration of an anchor run."""

    def __init__(self, config: pytest.Config):
        self.config = config
        opt = config.getoption
        try:
            self.ctx = RunContext(opt("lawbench_profile"), laws=tuple(opt("lawbench_law")),
                                  strict=opt("lawbench_strict"), llama_dir=opt("lawbench_llama_dir"))
            self.ctx.complete_generic_profile()
        except LawbenchError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.registry = self.ctx.registry
        self.policy = self.ctx.policy
        self.results: list[Result] = []
        self.history = [la for la in self.ctx.anchor_set.anchors
                        if self.ctx.selected(la) and not la.anchor.runs]
        self._by_file: dict[Path, list[LoadedAnchor]] = {}
        for la in self.ctx.anchor_set.anchors:
            if self.ctx.selected(la) and la.anchor.runs:
                self._by_file.setdefault(Path(la.file).resolve(), []).append(la)
        from lawbench.core.resources import Resources

        self.resources = Resources(llama_dir=self.ctx.llama_dir, profile=self.policy.profile)
        self.out_dir = Path(opt("lawbench_out"))
        self.record: Any = None

    def anchors_in(self, path: Path) -> list[LoadedAnchor]:
        return self._by_file.get(Path(path).resolve(), [])

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector):
        if file_path.resolve() in self._by_file:
            from lawbench.core.pytest_plugin import AnchorFile

            return AnchorFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from lawbench.core.history import History
        from lawbench.core.hardware.detect import environment_snapshot
        from lawbench.core.pytest_plugin import history_results
        from lawbench.core.reports import RunRecord, append_step_summary, write_json

        self.resources.close()
        record = RunRecord.new(
            self.policy.profile.id, detected_profile=self.ctx.detected,
            profile_matches=self.policy.on_own_runner, strict=self.policy.strict, argv=sys.argv,
            machine=self.ctx.machine.model_dump(mode="json"),
            environment={**environment_snapshot(), "ram_bandwidth": self.ctx.bandwidth},
            engine=self.resources.engine_info())
        record.finish(self.results + history_results(self))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        write_json(record, self.out_dir / "run.json")
        append_step_summary(record)
        if not self.config.getoption("lawbench_no_history"):
            with History(self.out_dir / "history.sqlite") as history:
                history.append(record)
        self.record = record
        try:
            self.registry.pm.hook.lawbench_run_finished(record=record)
        except Exception as exc:  # an exporter's bug must not change the verdicts
            print(f"lawbench: a lawbench_run_finished hook failed: {type(exc).__name__}: {exc}", file=sys.stderr)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.record is None:
            return
        from lawbench.core.reports import print_table

        print_table(self.record)  # its first line is the headline
        terminalreporter.write_line(f"run record: {self.out_dir / 'run.json'}")
