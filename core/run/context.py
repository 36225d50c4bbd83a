"""What a run needs before the first anchor: the registry, the profiles, this machine, the policy
and the anchors it selects. Every measuring command builds one (a LawbenchError is exit 2)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from lawbench.core.run.evaluate import RunPolicy
from lawbench.core.claims.loading import LoadedAnchor, load_all


class RunContext:
    """Everything a run needs before the first anchor: registry, profiles, policy, anchors.

    Built once per command, before anything runs (a LawbenchError here is exit 2): by `lawbench
    run`, `ab` and `census plant`, or by the pytest plugin when pytest is driven directly. A Run
    (lawbench.core.run.run) runs on it.
    """

    def __init__(self, profile_id: str, *, laws: tuple[str, ...] = (), strict: bool = False,
                 llama_dir: Optional[str] = None, cadence: Optional[str] = "full",
                 gate: Any = None, deadline_min: Optional[float] = None, weekly_slice: Optional[int] = None):
        from lawbench.core.hardware.detect import fingerprint_machine, match_profile, profile_matches
        from lawbench.core.hardware.profiles import get_profile, plugin_profiles
        from lawbench.core.laws.registry import get_registry

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
        # A weekly larger than its window runs one slice a week (core/run/slices.py): this week's,
        # or the one `--slice` names. The rotation is the whole weekly's, whatever --law / -k pick.
        self.rotation, self.weekly_slice = weekly_rotation(self.cadence, profile, self.profiles, self.anchor_set,
                                                          weekly_slice)
        self.llama_dir = llama_dir
        self.gate = gate  # lawbench.core.history.gate_inputs.GateSetup for `--gate baseline`; None: absolute
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
        """Runnable anchors this profile and law selection would run under `--cadence full` but not now
        (a rotating weekly's other slices are not counted: the run says them with its slice)."""
        full = RunContext.__new__(RunContext)
        full.__dict__.update(self.__dict__, cadence="full")
        return sum(1 for la in self.anchor_set.anchors
                   if la.anchor.runs and full.selected(la) and not self.selected(la)
                   and not (self.rotation is not None and la.anchor.in_cadence(self.cadence)))

    def weekly_anchors(self) -> list[str]:
        """This profile's runnable anchors the weekly run takes and this run does not (the morning view)."""
        from lawbench.core.run.plan import weekly_cadence

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
        if self.cadence == "weekly" and self.rotation is not None and self.weekly_slice is not None \
                and a.id not in self.rotation.slices[self.weekly_slice.index]:
            return False
        if a.kind == "prediction":
            return True  # predictions run anywhere, with the constants of the profile they bind to
        return not a.profiles or self.policy.profile.id in a.profiles

    def absences(self) -> dict[str, tuple[str, str]]:
        """For each anchor of the anchor set this run does not select: (gate news kind, why), so the
        nightly gate names every anchor of its accepted night gone tonight (issue 30 item 7; the
        kinds are lawbench.core.models.gate.GONE_NEWS). An anchor selected here and still not run
        was left out by -k. An id missing here is no longer in the anchors TOML (the gate says so)."""
        out: dict[str, tuple[str, str]] = {}
        profile = self.policy.profile.id
        for la in self.anchor_set.anchors:
            a = la.anchor
            if not a.runs:
                by = f" by {a.successor}" if a.successor else ""
                why = f": {a.retired_reason}" if a.retired_reason else ""
                out[a.id] = ("retired", f"status {a.status}{by}{why}")
            elif self.laws and a.law not in self.laws:
                out[a.id] = ("not-run", f"--law selects {', '.join(self.laws)} tonight")
            elif not a.in_cadence(self.cadence):
                out[a.id] = ("moved", f"its cadence is {a.effective_cadence}; tonight runs {self.cadence}")
            elif a.kind != "prediction" and a.profiles and profile not in a.profiles:
                out[a.id] = ("moved", f"binds to profile(s) {', '.join(a.profiles)}, not {profile}")
            elif not self.selected(la):
                out[a.id] = ("not-run", "in another slice of the rotating weekly")
            else:
                out[a.id] = ("not-run", "selected by profile, law and cadence; left out by -k")
        return out

    def files(self) -> list[Path]:
        # Retired anchors are reported, never collected (items.history_results): a file holding
        # only history for this profile has no item, and pytest refuses a path that yields none.
        return sorted({Path(la.file).resolve() for la in self.anchor_set.anchors
                       if self.selected(la) and la.anchor.runs})


def weekly_rotation(cadence: str, profile: Any, profiles: dict[str, Any], anchor_set: Any,
                    chosen: Optional[int]) -> tuple[Any, Any]:
    """(the rotation, the WeeklySlice this run takes) of a weekly run; (None, None) otherwise.

    :raises UsageError: --slice on a run that is not a weekly, or a slice the rotation lacks.
    """
    from lawbench.core.errors import UsageError
    from lawbench.core.models.run_record import WeeklySlice
    from lawbench.core.run.plan import plan
    from lawbench.core.run.slices import iso_week

    if cadence != "weekly":
        if chosen is not None:
            raise UsageError(f"--slice {chosen}: only a weekly rotates in slices; give --cadence weekly too")
        return None, None
    rotation = plan(profile, anchor_set, "weekly", profiles=profiles).rotation
    if chosen is not None and not 0 <= chosen < rotation.count:
        raise UsageError(f"--slice {chosen}: profile {profile.id}'s weekly has {rotation.count} slice(s), 0 to "
                         f"{rotation.count - 1} (`lawbench plan --profile {profile.id} --cadence weekly`)")
    index = rotation.this_week() if chosen is None else chosen
    return rotation, WeeklySlice(index=index, count=rotation.count, week=iso_week(), chosen=chosen is not None)


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
    measurement anchor fails with the reason (lawbench.core.run.evaluate) while the predictions run,
    and the run fails even when nothing measured was selected (RunContext.runner_mismatch). This
    says once, up front, on stderr and in the step summary, why and where the job belongs."""
    import sys

    from lawbench.core.record.summaries import append_step_summary_text

    gpus = ", ".join(f"{g.name} (cc {g.compute_capability}, via {g.source})" for g in machine.gpus) or "none found"
    lines = [f"this machine does not match profile {profile.id!r}, and --strict (a runner job) measures its "
             f"own hardware or fails: every measurement anchor fails, the predictions still run:",
             *(f"  {r}" for r in mismatch_reasons(machine, profile)),
             f"  detected profile: {detected}; GPUs: {gpus}",
             "  fix: run this job on the runner labelled " + " + ".join(profile.runner_labels or ["(none)"])
             + "; on a GPU runner check the driver (`nvidia-smi`) and `lawbench profiles detect`"]
    append_step_summary_text("### lawbench: runner refused\n\n```\n" + "\n".join(lines) + "\n```")
    print("lawbench: error: " + "\n".join(lines), file=sys.stderr, flush=True)
