"""A finding is a claim, with evidence `lawbench check` verifies (issue 30): an open finding turns an
anchor's FAIL into news that does not fail the build, so whoever adds one must show the FAIL.

* a **prediction**'s evidence is computed here: the law's number, priced on every profile the
  anchor runs on, lies outside the band (else the finding has closed, or never was);
* a **measured** anchor names a committed run record under results/ (``finding_evidence``) whose
  verdict for that anchor, on one of its profiles, is a measured FAIL — not a skip under --strict,
  not a closed finding; a renamed anchor has no such record, so renaming cannot hide a FAIL.

Findings committed before evidence was asked for, which no committed record shows yet, are listed
with why in anchors/findings_without_evidence.toml; the list only shrinks (its test holds it), and
an entry whose anchor now has evidence, or no finding, is refused.
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Optional

from lawbench.core.models.base import Id, Strict

PENDING_FILE = "findings_without_evidence.toml"


class PendingFinding(Strict):
    anchor: Id
    why: str  # why no committed record shows this finding's FAIL yet


class PendingFile(Strict):
    pending: list[PendingFinding]


def pending_path() -> Any:
    from importlib.resources import files

    return files("lawbench.anchors") / PENDING_FILE


def load_pending(path: Any = None) -> dict[str, PendingFinding]:
    """:raises DataError: the file is malformed (one line: file, field)."""
    from pydantic import ValidationError

    from lawbench.core.toml_read import read_toml
    from lawbench.core.errors import validation_error

    source = path if path is not None else pending_path()
    if not source.is_file():
        return {}
    try:
        return {p.anchor: p for p in PendingFile.model_validate(read_toml(source)).pending}
    except ValidationError as exc:
        raise validation_error(str(source), exc) from None


def evidence_file(evidence: str, anchor_file: str) -> Optional[Path]:
    """``results/…`` as committed beside the anchor: in the repository holding the anchor file (a
    checkout, an editable install), else in the current folder's (a checkout whose lawbench is
    installed), else in lawbench's own (a plugin installed beside an editable lawbench, as its
    example Law 2 is). None when none holds it."""
    from importlib.resources import files

    starts = [Path(anchor_file).resolve().parent, Path.cwd().resolve(), Path(str(files("lawbench.anchors"))).resolve()]
    for start in starts:
        for folder in (start, *start.parents):
            if (folder / evidence).is_file():
                return folder / evidence
    return None


def _measured_evidence(a: Any, file: str) -> Optional[str]:
    """Why ``a``'s finding_evidence does not show its FAIL (None: it does)."""
    from lawbench.core.errors import DataError
    from lawbench.core.models import Verdict
    from lawbench.core.record.checks import check_record
    from lawbench.core.record.reports import read_json

    path = PurePosixPath(a.finding_evidence)
    if path.parts[:1] != ("results",) or ".." in path.parts or path.suffix != ".json":
        return f"{a.finding_evidence!r} is not a run record under results/ (results/…/NAME.json)"
    found = evidence_file(a.finding_evidence, file)
    if found is None:
        return f"{a.finding_evidence} is not a committed file of this repository"
    try:
        record = read_json(found)
        check_record(record, a.finding_evidence)
    except DataError as exc:
        return f"{a.finding_evidence} is not a valid run record ({exc})"
    hit = next((r for r in record.results if r.anchor_id == a.id), None)
    if hit is None:
        return f"{a.finding_evidence} (profile {record.profile}) has no result for this anchor"
    if a.profiles and record.profile not in a.profiles:
        return f"{a.finding_evidence} is a run of profile {record.profile}, not of {', '.join(a.profiles)}"
    if hit.verdict is not Verdict.FAIL or hit.strict_skip or hit.finding_closed or hit.measured is None:
        what = "a skip under --strict" if hit.strict_skip else ("a closed finding" if hit.finding_closed
                                                               else hit.verdict.value)
        return f"{a.finding_evidence} shows {what} for this anchor, not a measured FAIL"
    return None


def _prediction_evidence(a: Any, law: Any, profiles: dict[str, Any]) -> Optional[str]:
    """Why the law's number does not lie outside ``a``'s band on each profile it runs on (None: it does)."""
    from lawbench.core.models import Verdict
    from lawbench.core.run.evaluate import RunPolicy, evaluate
    from lawbench.core.laws.resources import Resources

    for pid in a.profiles or sorted(profiles):
        if pid not in profiles:
            continue  # an unknown profile is the anchor check's to refuse
        profile = profiles[pid]
        r = evaluate(a, law, RunPolicy(profile=profile, profiles=profiles, on_own_runner=False),
                     Resources(profile=profile))
        if r.finding_closed:
            return (f"on profile {pid} the law predicts {r.predicted:.6g} {a.unit}, inside the band: the finding has "
                    "closed (remove `finding`, or correct the anchor)")
        if r.verdict is not Verdict.FAIL or r.open_finding is None:
            return f"on profile {pid} check cannot price it ({r.verdict.value}: {r.reason})"
    return None


def finding_problems(anchors: Any, registry: Any, profiles: dict[str, Any],
                     pending: Optional[dict[str, PendingFinding]] = None) -> list[str]:
    """What `lawbench check` refuses about findings, one line each naming file, anchor and field."""
    from lawbench.core.errors import DataError

    try:
        waiting = load_pending() if pending is None else pending
    except DataError as exc:
        return [str(exc)]
    problems: list[str] = []
    seen: set[str] = set()
    for la in anchors.anchors:
        a = la.anchor
        if not (a.finding and a.runs):
            continue
        seen.add(a.id)
        where = f"{la.file}: anchor {a.id}: field"
        if a.kind == "prediction":
            law = registry.laws.get(a.law)
            why = _prediction_evidence(a, law, profiles) if law is not None else None
            if why:
                problems.append(f"{where} finding: {why}")
            continue
        if a.id in waiting:
            if a.finding_evidence:
                problems.append(f"{where} finding_evidence: given, so remove the anchor from anchors/{PENDING_FILE}")
            continue
        if not a.finding_evidence:
            problems.append(f"{where} finding_evidence: an open finding on a measured anchor names the committed "
                            "run record that shows its FAIL (finding_evidence = \"results/…/run.json\")")
            continue
        why = _measured_evidence(a, la.file)
        if why:
            problems.append(f"{where} finding_evidence: {why}")
    for anchor_id in sorted(set(waiting) - seen):
        problems.append(f"anchors/{PENDING_FILE}: anchor {anchor_id}: field pending: no active anchor with an open "
                        "finding by that id: remove the entry")
    for anchor_id in sorted(set(waiting) & seen):
        a = anchors.by_id()[anchor_id].anchor
        if a.kind == "prediction":
            problems.append(f"anchors/{PENDING_FILE}: anchor {anchor_id}: field pending: a prediction's evidence "
                            "is computed by check: remove the entry")
    return problems
