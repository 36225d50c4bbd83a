"""What `lawbench run --gate baseline` judges with, read before anything runs: the baseline (a
history.sqlite or the data branch's runs/<profile>/ folder) and the acknowledgements.

A blind night is never taken for a first night (issue 30, item 6; conbench's honest "cannot judge"):
a baseline that is missing, unreadable, holds no run record, holds only refused records, or only
another profile's, makes the night red with a "cannot-judge" news saying which. A first night is
declared (`--first-night`) by the caller that can know it: the nightly's runner script, only when
the data branch was fetched and holds no runs/<profile>/ at all (scripts/nightly_data.sh).
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from lawbench.core.errors import LawbenchError, UsageError
from lawbench.core.history.gate import DRIFT_ALPHA, judge, load_acknowledged, machine_fingerprint
from lawbench.core.history.imports import import_paths
from lawbench.core.history.store import History
from lawbench.core.models.gate import AcknowledgedFile, GateNews, GateVerdict
from lawbench.core.record.run_keys import engine_key

if TYPE_CHECKING:
    from lawbench.core.models.run_record import RunRecord


def _empty_history() -> Any:
    return History(Path(tempfile.mkdtemp(prefix="lawbench-baseline-")) / "history.sqlite")


def _profiles_held(history: History) -> dict[str, int]:
    held: dict[str, int] = {}
    for row in history.runs(limit=None, contributions=False):
        held[row.profile] = held.get(row.profile, 0) + 1
    return held


def _whose(profile: str, held: dict[str, int], where: str) -> Optional[str]:
    """Why ``held`` (runs per profile) cannot judge ``profile``; None when it holds its runs."""
    if held.get(profile):
        return None
    if held:
        others = ", ".join(f"{p} ({n})" for p, n in sorted(held.items()))
        return f"{where} holds only runs of another profile: {others}, none of {profile}"
    return f"{where} holds no run record"


def open_baseline(path: str, profile: str) -> tuple[Any, Optional[str]]:
    """The history to judge ``profile`` against, and why it cannot judge (None: it can).

    A folder of run records is imported into a temporary history, only records beside the binding
    the collect step filed (issue 32); a refused file is named on stderr and left out, the others
    still count. The history returned is empty when nothing could be read."""
    p = Path(path)
    if p.is_file():
        try:
            history = History(p, create=False)
            return history, _whose(profile, _profiles_held(history), f"the history {path}")
        except (LawbenchError, OSError) as exc:
            return _empty_history(), f"the history {path} cannot be read: {' '.join(str(exc).split())}"
    if not p.exists():
        return _empty_history(), (f"the baseline {path} does not exist, and no first night was declared "
                                  "(--first-night: the data branch was fetched and holds no runs of this profile)")
    if not p.is_dir():
        return _empty_history(), f"the baseline {path} is neither a history.sqlite nor a folder of run records"
    try:
        next(p.iterdir(), None)
    except OSError as exc:
        return _empty_history(), f"the baseline folder {path} cannot be read: {exc.strerror or exc}"
    history = _empty_history()
    outcomes = import_paths(history, [str(p)], bound_only=True)  # issue 32: no unbound night counts
    refused = [o for o in outcomes if o.status == "refused"]
    for o in refused:
        print(f"lawbench: warning: baseline: {o.message} (left out)", file=sys.stderr)
    if refused and len(refused) == len(outcomes):
        return history, (f"every record in the baseline folder {path} was refused ({len(refused)}; the first: "
                         f"{' '.join(refused[0].message.split())[:300]})")
    return history, _whose(profile, _profiles_held(history), f"the baseline folder {path}")


@dataclass
class GateSetup:
    """What `lawbench run --gate baseline` judges with: the history and the acknowledgements,
    both opened and validated before anything runs (a bad acknowledgement is exit 2, never a lost
    night; a baseline that cannot judge still lets the night run, and makes it red)."""

    history: Any
    acks: Optional[AcknowledgedFile]
    weekly: list[str] = field(default_factory=list)  # what tonight's cadence left for the weekly run
    blind: Optional[str] = None  # why the baseline cannot judge this night (None: it can)
    first_night: bool = False  # declared by the caller: no run of this profile exists anywhere yet
    deployed: bool = False  # the profile's nightly.deployed: a skip where the anchor ran is red under --strict
    roster: Optional[dict[str, tuple[str, str]]] = None  # RunContext.absences(): why an anchor does not run tonight

    def judge(self, record: RunRecord) -> GateVerdict:
        try:
            verdict = judge(record, self.history, self.acks, not_reached=tuple(record.not_reached),
                            deployed=self.deployed, roster=self.roster).model_copy(update={"weekly": list(self.weekly)})
        except Exception as exc:  # the record must still be written: a gate that cannot judge is red
            why = " ".join(f"{type(exc).__name__}: {exc}".split())
            return GateVerdict(verdict="red", profile=record.profile, fingerprint=machine_fingerprint(record.machine),
                               engine=engine_key(record.engine), alpha=DRIFT_ALPHA, baseline_state="cannot-judge",
                               news=[GateNews(anchor_id="(gate)", kind="cannot-judge",
                                              why=f"cannot judge: the gate failed: {why}")])
        if self.blind is not None:  # every anchor is shown as new, and the night is red for what was not seen
            blind = GateNews(anchor_id="(gate)", kind="cannot-judge", why=f"cannot judge: {self.blind}")
            return verdict.model_copy(update={"verdict": "red", "baseline_state": "cannot-judge", "new_baseline": None,
                                              "news": [blind, *verdict.news]})
        if self.first_night:
            return verdict.model_copy(update={
                "baseline_state": "first-night",
                "new_baseline": f"no run of profile {record.profile} on the data branch (declared with "
                                "--first-night): tonight starts its baseline"})
        return verdict


def gate_setup(profile: str, baseline: Optional[str], acknowledged: Optional[str],
               weekly: Optional[list[str]] = None, first_night: bool = False, *, deployed: bool = False,
               roster: Optional[dict[str, tuple[str, str]]] = None) -> GateSetup:
    """`--gate baseline`'s inputs. Neither --baseline nor --first-night is a usage error (exit 2);
    a malformed acknowledgement file too. A baseline that cannot judge is not: the night runs, red.

    :param deployed: the profile's nightly.deployed (a registered runner: its skips are red under --strict).
    :param roster: the run's RunContext.absences(): why each anchor of its anchor set does not run tonight.
    """
    if not baseline and not first_night:
        raise UsageError("--gate baseline needs --baseline HISTORY (the history.sqlite or folder of run records to "
                         "judge against), or --first-night where no run of this profile exists yet")
    acks = load_acknowledged(profile, acknowledged)
    if first_night and baseline and Path(baseline).exists():  # declared, yet there is something to judge against
        history, _ = open_baseline(baseline, profile)
        return GateSetup(history=history, acks=acks, weekly=list(weekly or []), deployed=deployed, roster=roster,
                         blind=f"--first-night was declared, but the baseline {baseline} exists: a first night "
                               "has no runs of its profile at all")
    if first_night:
        return GateSetup(history=_empty_history(), acks=acks, weekly=list(weekly or []), first_night=True,
                         deployed=deployed, roster=roster)
    assert baseline is not None
    history, blind = open_baseline(baseline, profile)
    return GateSetup(history=history, acks=acks, weekly=list(weekly or []), blind=blind, deployed=deployed,
                     roster=roster)
