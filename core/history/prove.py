"""The gate proves its own power on a runner (issue 31): `lawbench gate prove`.

The runner's accepted nights (one set-up: profile, machine fingerprint, engine build — the gate's
own baseline_of) are replayed through the gate's own rate hook (rates.rate_news, the code a real
night's gate calls). Each accepted night in turn is "tonight" and the other accepted nights its
baseline (leave one out: the nights are exchangeable when nothing changed, and a runner with k
nights gives k trials instead of one). Tonight is judged as it was measured (a `slower` or
`faster` is a false alarm: nothing was planted), then with every rate of one format — and then of
every format — planted X % slower (values, geometric mean and interval all scaled by 1 − X, as an
engine that ran X % slower would report them). A planted night counts as detected when the gate
says `slower` on a series of the planted format (for all formats: on any series).

Pure given the records: no clock, no engine. Core names no law: formats are the series' own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence

from lawbench.core.history.gate import accepted, baseline_of, machine_fingerprint
from lawbench.core.history.rates import ALPHA, rate_news
from lawbench.core.record.run_keys import engine_key

if TYPE_CHECKING:
    from lawbench.core.history.store import History
    from lawbench.core.models.run_record import RunRecord

SIZES = (0.02, 0.03, 0.05, 0.10, 0.20, 0.40)
ALL = "all formats"


@dataclass
class Power:
    """Detection of one planted size on one target (a format, or every format)."""

    target: str
    size: float
    trials: int = 0
    detected: int = 0

    @property
    def rate(self) -> Optional[float]:
        return self.detected / self.trials if self.trials else None


@dataclass
class Proof:
    """What the replay found: the power per target and size, and false alarms on unplanted nights."""

    nights: int  # accepted nights of the set-up replayed
    judged: int = 0  # nights where at least one series could be analysed
    false_alarms: int = 0  # of the judged nights, those with a slower / faster as measured
    alarms: list[str] = field(default_factory=list)  # "night <run id>: <news line>" for each
    series: int = 0  # series seen over the nights
    power: list[Power] = field(default_factory=list)
    setup: str = ""  # "profile · fingerprint · engine" the nights share
    note: str = ""  # why nothing could be judged, when so

    def row(self, target: str, size: float) -> Optional[Power]:
        return next((p for p in self.power if p.target == target and p.size == size), None)


def plant(record: RunRecord, fmt: Optional[str], size: float) -> RunRecord:
    """A copy of ``record`` whose rates of format ``fmt`` (None: of every format) read ``size`` slower."""
    k = 1.0 - size
    results = []
    for result in record.results:
        rates = [r.model_copy(update={"values": [v * k for v in r.values], "recheck": [v * k for v in r.recheck],
                                      "measured": None if r.measured is None else r.measured * k,
                                      "interval": None if r.interval is None else (r.interval[0] * k, r.interval[1] * k)})
                 if fmt is None or r.series.format == fmt else r for r in result.rates]
        results.append(result.model_copy(update={"rates": rates}))
    return record.model_copy(update={"results": results})


def _formats(record: RunRecord) -> dict[str, str]:
    """series key -> format of tonight's measured rates."""
    return {r.series.key: r.series.format or "-" for res in record.results for r in res.rates
            if r.measured is not None}


def prove(nights: Sequence[Any], sizes: Sequence[float] = SIZES, alpha: float = ALPHA) -> Proof:
    """Replay ``nights`` (accepted RunRecords of one set-up, oldest first) with planted slowdowns."""
    nights = [n for n in nights if _formats(n)]
    proof = Proof(nights=len(nights))
    keys: set[str] = set()
    power: dict[tuple[str, float], Power] = {}
    for i, tonight in enumerate(nights):
        others = list(nights[:i]) + list(nights[i + 1:])
        formats = _formats(tonight)
        keys.update(formats)
        news, unanalysed = rate_news(tonight, others, alpha)
        if len(unanalysed) == len(formats):  # nothing the test could judge tonight
            proof.note = unanalysed[0] if unanalysed else ""
            continue
        proof.judged += 1
        if news:
            proof.false_alarms += 1
            proof.alarms += [f"night {tonight.run_id[:12]}: {n.why}" for n in news]
        judged = {k: f for k, f in formats.items() if not any(line.startswith(f"cannot analyse {k}:") for line in unanalysed)}
        for target in sorted(set(judged.values())) + [ALL]:
            for size in sizes:
                planted = plant(tonight, None if target == ALL else target, size)
                found, _ = rate_news(planted, others, alpha)
                hit = any(n.kind == "slower" and (target == ALL or
                                                  judged.get(n.anchor_id.removeprefix("rate: ")) == target)
                          for n in found)
                p = power.setdefault((target, size), Power(target, size))
                p.trials += 1
                p.detected += hit
    proof.series = len(keys)
    proof.power = sorted(power.values(), key=lambda p: (p.target == ALL, p.target, p.size))
    return proof


def runner_nights(history: History, profile: str) -> tuple[list[Any], str]:
    """The accepted nights of ``profile``'s newest set-up in ``history`` (oldest first), and that
    set-up in words; the gate's own rule (core/history/gate.py: baseline_of, accepted)."""
    runs = [r for r in history.runs(profile=profile, limit=None) if r.finished is not None]
    latest = next((rec for rec in (history.record(r.run_id) for r in runs) if rec.mode == "run"), None)
    if latest is None:
        return [], ""
    base = baseline_of(latest, history)
    nights = base.accepted + ([latest] if accepted(latest) and latest.profile_matches else [])
    return nights, f"{profile} · {machine_fingerprint(latest.machine)} · {engine_key(latest.engine)}"


def _pct(x: float) -> str:
    return f"{x * 100:g} %"


def proof_markdown(proof: Proof) -> str:
    """The proof as a Markdown table: detections / trials per planted size and target, then the
    false alarms on the unplanted nights (the figure the ≤ 1 % per runner-night goal is about)."""
    sizes = sorted({p.size for p in proof.power})
    targets = list(dict.fromkeys(p.target for p in proof.power))
    lines = [f"gate prove: {proof.setup}" if proof.setup else "gate prove",
             f"{proof.nights} accepted nights, {proof.series} rate series; each night in turn is tonight and "
             f"the others its accepted nights; {proof.judged} nights could be judged.", "",
             "| planted slowdown on | " + " | ".join(_pct(s) for s in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for t in targets:
        cells = []
        for s in sizes:
            p = proof.row(t, s)
            cells.append(f"{p.detected}/{p.trials}" if p and p.trials else "-")
        lines.append(f"| {t if t == ALL else 'one format: ' + t} | " + " | ".join(cells) + " |")
    rate = proof.false_alarms / proof.judged if proof.judged else 0.0
    lines += ["", f"false alarms: {proof.false_alarms} of {proof.judged} unplanted nights ({rate:.1%})"]
    lines += [f"- {a}" for a in proof.alarms]
    return "\n".join(lines)
