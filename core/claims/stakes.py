"""Stakes: lawbench's own predictions, written down and locked before the run that tests them.

The register's house rule is pre-registration: a number is staked before it is measured and then
scored hit / near-miss / miss, misses published. lawbench keeps the same rule for its own
amendments to the laws (a new relation tested on a new GPU, a new term): the stake file
(anchors/stakes/<name>.toml) says which anchor's statistic is expected where, and anchors/stakes/LOCK
holds each file's SHA-256 from the moment it was staked. `lawbench check` refuses a stake file whose
bytes no longer match its lock line, or a lock line whose file is gone: a stake is never edited, a
revised expectation is a new stake. After a run, `lawbench stakes score RUN.json` scores every staked
anchor the run measured and writes the score beside the record; stake and score are both kept.

    [stake]
    id = "lb-h200-gpu-tier"
    staked = "2026-12-01T15:10:00+00:00"
    by = "lawbench issue 9"
    why = "…"

    [[stake.prediction]]
    anchor = "law4.h200.agree.format.q4_0-over-q4_k_m.syn-3.4b"
    band = { lo = 0.9, hi = 1.1 }      # where the anchor's statistic (its `measured`) will land
    rationale = "…"
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Optional

from pydantic import Field, ValidationError

from lawbench.core.errors import DataError, UsageError, validation_error
from lawbench.core.models import Band, Id, Strict
from lawbench.core.toml_read import read_toml

STAKES_PACKAGE = "lawbench.anchors.stakes"
LOCK_NAME = "LOCK"

Score = Literal["hit", "near-miss", "miss", "VOID", "not run"]


class StakedPrediction(Strict):
    anchor: Id
    band: Band  # on the anchor's own statistic, in its unit (an agreement anchor: measured/predicted)
    center: Optional[float] = None  # for a ±abs / ±rel band
    rationale: str = Field(min_length=1)


class Stake(Strict):
    id: Id
    staked: str = Field(min_length=10)  # ISO date-time, before the first run that measures it
    by: str = Field(min_length=1)
    why: str = Field(min_length=1)
    prediction: list[StakedPrediction] = Field(min_length=1)


class StakeFile(Strict):
    stake: Stake


@dataclass
class LoadedStake:
    stake: Stake
    file: str
    sha256: str


def _package_root() -> Any:
    from importlib.resources import files

    return files(STAKES_PACKAGE)


def stake_files(root: Any = None) -> list[Any]:
    root = _package_root() if root is None else root
    return sorted((p for p in root.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)


def read_lock(root: Any = None) -> dict[str, str]:
    """file name -> locked sha256. A missing LOCK is an empty one."""
    root = _package_root() if root is None else root
    lock = root / LOCK_NAME
    if not lock.is_file():
        return {}
    locked: dict[str, str] = {}
    for n, line in enumerate(lock.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[0]) != 64:
            raise DataError(str(lock), f"line {n} is not '<sha256>  <file name>'", field=f"line {n}")
        locked[parts[1]] = parts[0]
    return locked


def load_stakes(root: Any = None, *, anchors: Optional[Iterable[str]] = None,
                require_lock: bool = True) -> list[LoadedStake]:
    """Every stake file, validated, each checked against its lock line (and the anchors it names
    against the anchor ids, when given). The first fault is a DataError naming file and field."""
    root = _package_root() if root is None else root
    locked = read_lock(root) if require_lock else {}
    known = set(anchors) if anchors is not None else None
    out: list[LoadedStake] = []
    seen: dict[str, str] = {}
    for path in stake_files(root):
        name = str(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        try:
            stake = StakeFile.model_validate(read_toml(path)).stake
        except ValidationError as exc:
            raise validation_error(name, exc) from None
        if require_lock:
            if path.name not in locked:
                raise DataError(name, "is not locked: run `lawbench stakes lock` before the run that measures "
                                      "it (a stake counts only if it was written down first)", field="stake")
            if locked[path.name] != digest:
                raise DataError(name, f"was edited after it was staked (sha256 {digest[:12]}…, locked "
                                      f"{locked[path.name][:12]}…): a stake is never edited; write the revised "
                                      "expectation as a new stake file", field="stake")
        if stake.id in seen:
            raise DataError(name, f"duplicate stake id (also in {seen[stake.id]})", field="stake.id")
        seen[stake.id] = name
        for i, p in enumerate(stake.prediction):
            if known is not None and p.anchor not in known:
                raise DataError(name, f"stakes anchor {p.anchor!r}, which does not exist", field=f"stake.prediction.{i}.anchor")
            if (p.band.abs is not None or p.band.rel is not None) and p.center is None:
                raise DataError(name, "a ±abs or ±rel band needs center", field=f"stake.prediction.{i}.center")
        out.append(LoadedStake(stake, name, digest))
    if require_lock:
        names = {Path(s.file).name for s in out}
        for gone in sorted(set(locked) - names):
            raise DataError(str(root / LOCK_NAME), f"locks {gone}, which is gone: a stake is kept, scored or not",
                            field=gone)
    return out


def lock_new(root: Path) -> list[str]:
    """Append a lock line for every stake file not locked yet; never touch an existing line."""
    locked = read_lock(root)
    added = []
    lines = []
    for path in stake_files(root):
        if path.name not in locked:
            lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
            added.append(path.name)
    if lines:
        lock = root / LOCK_NAME
        with open(lock, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    return added


def score_one(p: StakedPrediction, result: Optional[dict]) -> tuple[Score, str]:
    """hit: the run's whole interval lies in the staked band; miss: wholly outside it and the point
    more than one band width away; near-miss: wholly outside but the point within one band width of
    the nearer edge; VOID: the interval straddles an edge or the anchor itself was VOID."""
    if result is None or result.get("verdict") in ("SKIP", "ERROR") or result.get("measured") is None:
        return "not run", (result or {}).get("reason", "the run did not measure this anchor")
    lo, hi = p.band.interval(p.center)
    m = float(result["measured"])
    ilo, ihi = result.get("interval") or (m, m)
    if result.get("verdict") == "VOID" and not (lo <= ilo and ihi <= hi):
        return "VOID", f"measured {m:.4g} [{ilo:.4g}, {ihi:.4g}]: the run could not resolve its own band"
    where = f"measured {m:.4g} [{ilo:.4g}, {ihi:.4g}] against staked [{lo:.4g}, {hi:.4g}]"
    if lo <= ilo and ihi <= hi:
        return "hit", where
    if ihi < lo or ilo > hi:
        width = hi - lo
        off = lo - m if m < lo else m - hi
        return ("near-miss" if off <= width else "miss"), where
    return "VOID", where + ": the interval straddles a staked edge"


def score_run(record_path: Path, stakes: list[LoadedStake]) -> list[dict]:
    try:
        text = Path(record_path).read_text(encoding="utf-8")
        if not text.strip():
            raise UsageError(f"{record_path}: the file is empty, not a run record")
        record = json.loads(text)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{record_path}: cannot read a run record ({exc})") from None
    results = record.get("results") if isinstance(record, dict) else None
    if not (isinstance(results, list) and record.get("run_id") and all(isinstance(r, dict) for r in results)):
        # scoring something else would list every stake as "not run": a silent pass
        raise UsageError(f"{record_path}: not a lawbench run record (it needs run_id and a results list; "
                         f"`lawbench run` writes one as OUT/run.json, docs/run-record.md)")
    by_id = {r.get("anchor_id"): r for r in results}
    scores = []
    for ls in stakes:
        for p in ls.stake.prediction:
            score, why = score_one(p, by_id.get(p.anchor))
            scores.append({"stake": ls.stake.id, "stake_sha256": ls.sha256, "anchor": p.anchor,
                           "run_id": record.get("run_id"), "profile": record.get("profile"),
                           "score": score, "why": why})
    return scores
