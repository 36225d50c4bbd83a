"""The claims inventory: every numeric claim the sources publish, one line each, and which anchors
encode it.

The inventory (anchors/inventory/*.toml) is the denominator of "is the register encoded": a claim
nobody wrote down cannot be found missing. Each line quotes its source verbatim. The link between a
line and the anchors that re-check it is stored once, on the anchor (`claims = [...]`); a line no
anchor can encode says why instead (`unencoded`). `lawbench check` refuses an anchor of a built-in
law that cites nothing, a citation of a line that does not exist, a line that is neither encoded
nor explained, and a line that is both. Lines of a law whose plugin is not installed are pending:
they count as soon as the plugin exists.

    [law.law4]
    title = "Decode speed is a placement identity"

    [[claim]]
    id = "s000.law4.kv-slope-hybrid-16k"
    law = "law4"
    seed = "000_4a91008eeaefec79.txt"        # or register_id = "L-02"
    quote = "tg32 clean baseline 20.02 ± 0.02 → at depth 16384 16.12 ± 0.06 (−19.5%)"
    unencoded = { reason = "no-hardware", detail = "…" }   # only when no anchor can encode it

A line whose obstacle is lawbench's own (an anchor kind, a case field or an engine mode lawbench
has not built yet) adds `work_left = true` to its `unencoded`: it is counted as work left, apart
from the explained lines, so "explained" never hides what lawbench still cannot judge.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Optional

from pydantic import Field, ValidationError, model_validator

from lawbench.core.claims.figures import numbers, repeated_figures, same_number, same_quantity
from lawbench.core.claims.public_record import load_record
from lawbench.core.errors import DataError, validation_error
from lawbench.core.models import Anchor, Id, Strict
from lawbench.core.toml_read import read_toml

if TYPE_CHECKING:
    from lawbench.core.claims.loading import AnchorSet

INVENTORY_PACKAGE = "lawbench.anchors.inventory"

# Why a claim cannot be an anchor. Work left is a state (Unencoded.work_left), not a reason.
Reason = Literal[
    "no-public-model",  # the file it was measured on is not public (and no public file stands in)
    "no-hardware",  # no such hardware exists anywhere a runner could be
    "private-engine",  # an engine lawbench cannot run or whose internals it cannot see
    "engine-capability",  # needs an engine mode the engine itself lacks, or one lawbench does not drive yet (work_left)
    "not-numeric",  # a sentence with no number to check
    "not-published",  # the inputs the number follows from (arms, rows, speeds) were never published
]


# Reasons about what the public record holds: each must name the files of the record it looked at
# (lawbench.core.claims.public_record), so "not published" is a finding someone can re-check, not a guess.
RECORD_REASONS = ("not-published", "no-public-model", "private-engine", "engine-capability")


class Unencoded(Strict):
    reason: Reason
    detail: str = Field(min_length=1)
    # "<owner>/<name>:<path>" of each file of the public record read for this reason
    looked: list[str] = Field(default_factory=list)
    # the obstacle is lawbench's own (an anchor kind, case field or engine mode not built yet): the
    # line is not done; `lawbench check` and REGISTER.md count it as work left, not as explained
    work_left: bool = False


class RecordQuote(Strict):
    """The public record's own words for a line's number or its inputs (lawbench.core.claims.public_record)."""

    repo: str = Field(min_length=3)
    path: str = Field(min_length=1)
    quote: str = Field(min_length=1)


class Claim(Strict):
    id: Id
    law: Id
    seed: Optional[str] = None
    register_id: Optional[str] = None
    # another published document: a file of the public record, "<owner>/<name>:<path>" (e.g.
    # "FedericoTs/quantprobe:tests/smoke.py", the register's planner's own regression anchors); the
    # quote must be in a cached excerpt of it at the pinned commit (lawbench.core.claims.public_record)
    document: Optional[str] = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*:.+$")
    quote: str = Field(min_length=1)  # the source's own words, verbatim
    unencoded: Optional[Unencoded] = None
    record: list[RecordQuote] = Field(default_factory=list)  # the public record behind it, quoted
    # the same published figure as another line, quoted where the source says it again: it is
    # encoded or explained exactly as that line is (so one figure is judged once)
    same_as: Optional[Id] = None
    # numbers of the quote judged with the line's figure though no anchor states them as printed:
    # what it is computed from, the setting it was measured at, the tolerance the source gives it, or
    # the figure itself where its anchor states it in another form ("2x too small" judged as 0.5);
    # each must be in the quote and truly judged by an anchor of the line. The number walks count a
    # quote's number only for the figures its anchors state, these, or, for a line not encoded, all
    # of them; never for a number the line's id or notes merely mention (issue 34)
    also_judged: list[str] = Field(default_factory=list)
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _one_source(self) -> "Claim":
        if sum(x is not None for x in (self.seed, self.register_id, self.document)) != 1:
            raise ValueError("seed: give exactly one source: seed = \"<seed file>\", register_id = \"<id>\" "
                             "or document = \"<owner>/<name>:<path>\" (a file of the public record)")
        return self

    @model_validator(mode="after")
    def _judged_in_quote(self) -> "Claim":
        printed = numbers(self.quote)
        for i, n in enumerate(self.also_judged):
            try:
                value = float(n.replace(",", ""))
            except ValueError:
                raise ValueError(f"also_judged.{i}: {n!r} is not a number") from None
            if not same_number(value, printed):
                raise ValueError(f"also_judged.{i}: {n!r} is not a number of the quote")
        return self

    @model_validator(mode="after")
    def _twin_or_reason(self) -> "Claim":
        if self.same_as is not None and self.unencoded is not None:
            raise ValueError("same_as: a line that repeats another's figure takes that line's status: drop unencoded")
        return self

    @property
    def source(self) -> str:
        if self.register_id:
            return f"register {self.register_id}"
        return f"seed {self.seed}" if self.seed else f"document {self.document}"


class LawTitle(Strict):
    title: str = Field(min_length=1)


class InventoryFile(Strict):
    law: dict[Id, LawTitle] = Field(default_factory=dict)
    claim: list[Claim] = Field(default_factory=list)


@dataclass
class LoadedClaim:
    claim: Claim
    file: str


@dataclass
class Inventory:
    laws: dict[str, str] = field(default_factory=dict)  # law -> title
    claims: dict[str, LoadedClaim] = field(default_factory=dict)


def inventory_files() -> list[Any]:
    from importlib.resources import files

    root = files(INVENTORY_PACKAGE)
    return sorted((p for p in root.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)


def load_inventory(paths: Optional[Iterable[Any]] = None) -> Inventory:
    inv = Inventory()
    law_files: dict[str, str] = {}
    for path in inventory_files() if paths is None else paths:
        name = str(path)
        raw = read_toml(path)
        try:
            data = InventoryFile.model_validate(raw)
        except ValidationError as exc:
            claim_id = _claim_id_at(raw, exc)
            err = validation_error(name, exc)
            field = err.field
            if claim_id and field:  # "claim.3.unencoded.reason" -> "unencoded.reason": the claim is named
                field = re.sub(r"^claim\.\d+\.?", "", field) or None
            raise DataError(name, err.message, field=field, claim=claim_id) from None
        for law, title in data.law.items():
            if law in inv.laws:
                raise DataError(name, f"law {law!r} is titled twice (also in {law_files[law]})", field=f"law.{law}")
            inv.laws[law], law_files[law] = title.title, name
        for c in data.claim:
            if c.id in inv.claims:
                raise DataError(name, f"duplicate claim id (also in {inv.claims[c.id].file})", claim=c.id, field="id")
            inv.claims[c.id] = LoadedClaim(c, name)
    for lc in inv.claims.values():
        if lc.claim.law not in inv.laws:
            raise DataError(lc.file, f"unknown law {lc.claim.law!r} (the inventory titles: "
                                     f"{', '.join(sorted(inv.laws)) or 'none'}; add a [law.{lc.claim.law}] table)",
                            claim=lc.claim.id, field="law")
    return inv


def _claim_id_at(raw: dict, exc: ValidationError) -> Optional[str]:
    loc = exc.errors()[0].get("loc", ())
    if len(loc) >= 2 and loc[0] == "claim" and isinstance(loc[1], int):
        entry = raw.get("claim", [])[loc[1]]
        return entry.get("id") if isinstance(entry, dict) else None
    return None


@dataclass
class LawCoverage:
    lines: int = 0
    encoded: int = 0
    explained: int = 0
    work_left: int = 0  # unencoded, but lawbench's own obstacle: not done
    missing: int = 0
    pending: int = 0  # the law's plugin is not installed: not counted yet

    @property
    def counted(self) -> int:
        return self.lines - self.pending

    @property
    def encoded_share(self) -> float:
        return self.encoded / self.counted if self.counted else 1.0


@dataclass
class Coverage:
    by_law: dict[str, LawCoverage]
    cited_by: dict[str, list[str]]  # claim id -> anchor ids
    reasons: Counter

    @property
    def total(self) -> LawCoverage:
        t = LawCoverage()
        for c in self.by_law.values():
            for f in ("lines", "encoded", "explained", "work_left", "missing", "pending"):
                setattr(t, f, getattr(t, f) + getattr(c, f))
        return t

    def summary(self) -> str:
        t = self.total
        return (f"claims inventory: {t.lines} lines, {t.encoded} encoded ({t.encoded_share:.0%} of "
                f"{t.counted} counted), {t.explained} explained, {t.work_left} work left, {t.missing} missing, "
                f"{t.pending} pending")


def coverage(inv: Inventory, anchor_set: AnchorSet, registered_laws: Iterable[str]) -> Coverage:
    """Which lines are encoded, explained, work left, missing or pending. No checking: see check_inventory."""
    registered = set(registered_laws)
    cited_by: dict[str, list[str]] = {cid: [] for cid in inv.claims}
    citing: dict[str, list[Anchor]] = {cid: [] for cid in inv.claims}
    for la in anchor_set.anchors:
        for cid in la.anchor.claims:
            if cid in cited_by:
                cited_by[cid].append(la.anchor.id)
                citing[cid].append(la.anchor)
    by_law: dict[str, LawCoverage] = {law: LawCoverage() for law in inv.laws}
    reasons: Counter = Counter()
    for cid, lc in inv.claims.items():
        cov = by_law[lc.claim.law]
        cov.lines += 1
        twin = inv.claims.get(lc.claim.same_as) if lc.claim.same_as else None
        if twin is not None and not cited_by[cid]:
            if citing[twin.claim.id] and not same_quantity(lc.claim, citing[twin.claim.id]):
                cov.missing += 1  # the twin's anchors judge another of its figures (check names it)
                continue
            lc, cid = twin, twin.claim.id
        if lc.claim.unencoded is not None and lc.claim.unencoded.work_left:
            cov.work_left += 1
        elif lc.claim.unencoded is not None:
            cov.explained += 1
            reasons[lc.claim.unencoded.reason] += 1
        elif lc.claim.law not in registered:
            cov.pending += 1
        elif cited_by[cid]:
            cov.encoded += 1
        else:
            cov.missing += 1
    return Coverage({k: v for k, v in by_law.items() if v.lines}, cited_by, reasons)


def shipped_files(registry: Any) -> set[str]:
    """The anchor files lawbench's own laws ship: the ones that must cite the inventory. A
    contributor's package that adds anchors (for any law) may cite lines but need not."""
    return {str(f) for name in registry.builtin_laws for f in registry.laws[name].anchor_files()}


def check_inventory(inv: Inventory, anchor_set: AnchorSet, registry: Any,
                    own_files: Optional[set[str]] = None) -> tuple[Coverage, list[DataError]]:
    """Every anchor lawbench ships cites a line, every citation exists, every counted line is
    encoded or explained and never both. Returns every fault (each a DataError naming its file,
    anchor or claim), so one `lawbench check` lists all the work left, not the first item of it."""
    own_files = shipped_files(registry) if own_files is None else own_files
    problems: list[DataError] = []
    for la in anchor_set.anchors:
        a = la.anchor
        for i, cid in enumerate(a.claims):
            if cid not in inv.claims:
                problems.append(DataError(la.file, f"cites claim {cid!r}, which no claims inventory file holds "
                                                   "(anchors/inventory/*.toml)", anchor=a.id, field=f"claims.{i}"))
            elif a.claims.index(cid) != i:
                problems.append(DataError(la.file, f"cites claim {cid!r} twice", anchor=a.id, field=f"claims.{i}"))
        if not a.claims and la.file in own_files:
            problems.append(DataError(la.file, "cites no line of the claims inventory: name the published claim(s) "
                                               "it re-checks in claims = [\"<id>\", …] (anchors/inventory/*.toml)",
                                      anchor=a.id, field="claims"))
    cov = coverage(inv, anchor_set, registry.laws.keys())
    problems += check_record_citations(inv)
    for cid, lc in inv.claims.items():
        c = lc.claim
        if c.unencoded is not None and cov.cited_by[cid]:
            problems.append(DataError(lc.file, f"is marked unencoded ({c.unencoded.reason}) but anchor "
                                               f"{cov.cited_by[cid][0]} encodes it: drop one",
                                      claim=cid, field="unencoded"))
        if c.same_as is not None:
            twin = inv.claims.get(c.same_as)
            if twin is None or twin.claim.same_as is not None:
                problems.append(DataError(lc.file, f"same_as {c.same_as!r}: "
                                                   + ("no such line" if twin is None else "that line is itself a repeat"),
                                          claim=cid, field="same_as"))
            elif not cov.cited_by[cid] and cov.cited_by[c.same_as]:
                twin_anchors = [la.anchor for la in anchor_set.anchors if c.same_as in la.anchor.claims]
                if not same_quantity(c, twin_anchors):
                    figures = ", ".join(sorted(repeated_figures(c)))
                    problems.append(DataError(lc.file, f"same_as {c.same_as!r}: none of its anchors "
                                                       f"({', '.join(cov.cited_by[c.same_as][:3])}) states the figure "
                                                       f"this line repeats ({figures}), so they judge another "
                                                       "quantity: encode it, or drop same_as and give unencoded",
                                              claim=cid, field="same_as"))
            continue
        if c.unencoded is None and c.law in registry.laws and not cov.cited_by[cid]:
            problems.append(DataError(lc.file, "no anchor encodes this claim and none says why: cite it from an "
                                               "anchor (claims = [...]) or give unencoded = { reason, detail }",
                                      claim=cid))
    return cov, problems


def check_record_citations(inv: Inventory, record: Any = None) -> list[DataError]:
    """Every quote of the public record is inside a cached excerpt of its file at the pinned
    commit, and every reason about the record names files of it that the cache lists."""
    rec = load_record() if record is None else record
    problems: list[DataError] = []
    for cid, lc in inv.claims.items():
        c = lc.claim
        if c.document is not None:  # the line's own source is a file of the record: its quote is checked there
            repo, _, path = c.document.partition(":")
            problems += _quote_problems(rec, lc.file, cid, "document", repo, path, c.quote, "quote")
        for i, rq in enumerate(c.record):
            problems += _quote_problems(rec, lc.file, cid, f"record.{i}.repo", rq.repo, rq.path, rq.quote,
                                        f"record.{i}.quote")
        u = c.unencoded
        if u is None or u.reason not in RECORD_REASONS:
            continue
        if not u.looked:
            problems.append(DataError(lc.file, f"reason {u.reason} names no place in the public record it looked at: "
                                               "list the files read in looked = [\"<owner>/<name>:<path>\", …]",
                                      claim=cid, field="unencoded.looked"))
        for i, ref in enumerate(u.looked):
            repo, _, path = ref.partition(":")
            if rec.file(repo, path) is None:
                problems.append(DataError(lc.file, f"looked at {ref!r}, which the public record's cache does not list "
                                                   f"({rec.where}: add a [[file]] for it)",
                                          claim=cid, field=f"unencoded.looked.{i}"))
            elif not rec.excerpts(repo, path):
                # a file named as looked at shows the lines read: a list of names alone is a guess
                problems.append(DataError(lc.file, f"looked at {ref!r}, but the cache holds no line of it that was read "
                                                   f"(cache the lines that bear on the reason: `lawbench record add`)",
                                          claim=cid, field=f"unencoded.looked.{i}"))
            elif u.looked.index(ref) != i:
                problems.append(DataError(lc.file, f"looked at {ref!r} twice", claim=cid, field=f"unencoded.looked.{i}"))
    return problems


def _quote_problems(rec: Any, file: str, cid: str, repo_field: str, repo: str, path: str, quote: str,
                    quote_field: str) -> list[DataError]:
    if repo not in rec.repos:
        return [DataError(file, f"quotes repository {repo!r}, which the public record does not pin "
                                f"(pinned: {', '.join(rec.repos)})", claim=cid, field=repo_field)]
    piece = rec.missing_piece(repo, path, quote)
    if piece is not None:
        return [DataError(file, f"{piece[:70]!r} is not in any cached excerpt of {repo}:{path} "
                                f"({rec.where}; cache it with `lawbench record add`)", claim=cid, field=quote_field)]
    return []
