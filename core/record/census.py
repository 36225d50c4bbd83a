"""The rule a [census] table is judged by: the run applies it to an engine's label counts
(lawbench.core.run.evaluate), the record's checks re-apply it to an imported record's counts
(lawbench.core.record.checks), and a law's own census command uses it through lawbench.host."""
from __future__ import annotations

from lawbench.core.engines.loadlog import census_amount as amount
from lawbench.core.models.anchor import CensusSpec


def census_problems(spec: CensusSpec, counts: dict[str, int]) -> list[str]:
    """Every expectation of a [census] table that the counts break, one line each, naming the
    label, what was counted and what was expected. An empty list: the census holds."""
    problems = []
    for label, want in spec.exact.items():
        got = counts.get(label, 0)
        if got != want:
            problems.append(f"{label}: counted {amount(label, got)}, expected exactly {amount(label, want)}")
    for label, want in spec.minimum.items():
        got = counts.get(label, 0)
        if got < want:
            problems.append(f"{label}: counted {amount(label, got)}, expected at least {amount(label, want)}")
    for label, want in spec.maximum.items():
        if label not in counts:
            problems.append(f"{label}: not counted by this run, expected at most {amount(label, want)}")
        elif counts[label] > want:
            problems.append(f"{label}: counted {amount(label, counts[label])}, expected at most {amount(label, want)}")
    for label in spec.forbidden:
        got = counts.get(label, 0)
        if got:
            problems.append(f"{label}: counted {amount(label, got)}, must never appear")
    return problems


def judged_labels(spec: CensusSpec, counts: dict[str, int]) -> dict[str, int]:
    """The counts of the labels a [census] table names, in its order: what the verdict rests on."""
    labels = [*spec.exact, *spec.minimum, *spec.maximum, *spec.forbidden]
    return {label: counts.get(label, 0) for label in dict.fromkeys(labels)}
