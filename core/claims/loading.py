"""Load and cross-check the anchor TOML files. Errors name the file, the anchor id and the field."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from pydantic import ValidationError

from lawbench.core.errors import DataError, LawbenchError, PluginError, field_path, validation_error  # noqa: F401
from lawbench.core.models import Anchor
from lawbench.core.models.anchor import SUCCESSOR_FIELDS
from lawbench.core.toml_read import read_toml

@dataclass
class LoadedAnchor:
    anchor: Anchor
    file: str


@dataclass
class AnchorSet:
    anchors: list[LoadedAnchor] = field(default_factory=list)

    def by_id(self) -> dict[str, LoadedAnchor]:
        return {a.anchor.id: a for a in self.anchors}

    def for_law(self, law: str) -> list[LoadedAnchor]:
        return [a for a in self.anchors if a.anchor.law == law]


def load_anchor_file(path: Any) -> list[LoadedAnchor]:
    name = str(path)
    data = read_toml(path)
    extra = set(data) - {"anchor"}
    if extra:
        raise DataError(name, f"unknown top-level table {sorted(extra)[0]!r}; anchors go in [[anchor]] tables",
                        field=sorted(extra)[0])
    entries = data.get("anchor", [])
    if not isinstance(entries, list):
        raise DataError(name, "'anchor' must be an array of tables: write [[anchor]]", field="anchor")
    if not entries:  # an emptied file would otherwise drop its law's anchors without a word
        raise DataError(name, "holds no [[anchor]] table: an anchor file must define at least one anchor "
                              "(delete the file to drop its anchors)", field="anchor")
    out = []
    for i, raw in enumerate(entries):
        anchor_id = raw.get("id") if isinstance(raw, dict) else None
        try:
            anchor = Anchor.model_validate(raw)
        except ValidationError as exc:
            raise validation_error(name, exc, anchor=anchor_id or f"#{i + 1} (no id)") from None
        out.append(LoadedAnchor(anchor, name))
    return out


def load_anchors(files: Iterable[Any], *, laws: Optional[Iterable[str]] = None,
                 profiles: Optional[Iterable[str]] = None) -> AnchorSet:
    """Load every file, then check what no single file can: ids, laws, profiles, references."""
    loaded: list[LoadedAnchor] = []
    for f in files:
        loaded.extend(load_anchor_file(f))
    seen: dict[str, LoadedAnchor] = {}
    for la in loaded:
        prev = seen.get(la.anchor.id)
        if prev is not None:
            raise DataError(la.file, f"duplicate anchor id (also defined in {prev.file})",
                            anchor=la.anchor.id, field="id")
        seen[la.anchor.id] = la
    law_names = set(laws) if laws is not None else None
    profile_ids = set(profiles) if profiles is not None else None
    for la in loaded:
        a = la.anchor
        if law_names is not None and a.law not in law_names:
            raise DataError(la.file, f"unknown law {a.law!r} (registered: {', '.join(sorted(law_names))})",
                            anchor=a.id, field="law")
        if profile_ids is not None:
            for i, p in enumerate(a.profiles):
                if p not in profile_ids:
                    raise DataError(la.file, f"unknown profile {p!r} (known: {', '.join(sorted(profile_ids))})",
                                    anchor=a.id, field=f"profiles.{i}")
        for ref_field in SUCCESSOR_FIELDS:
            ref = getattr(a, ref_field)
            if ref is not None and ref not in seen:
                raise DataError(la.file, f"refers to anchor {ref!r}, which does not exist",
                                anchor=a.id, field=ref_field)
            if ref == a.id:
                raise DataError(la.file, "an anchor cannot supersede or refute itself", anchor=a.id, field=ref_field)
    _check_lineage(loaded, seen)
    return AnchorSet(loaded)



def _check_lineage(loaded: list[LoadedAnchor], seen: dict[str, LoadedAnchor]) -> None:
    """superseded_by / refuted_by chains must end: in a loop (a -> b -> a) no anchor is the current
    claim. Every reference is known to exist here. A loop is reported at the anchor where the walk
    entered it, with the whole loop and the field of each step."""
    done: set[str] = set()
    for la in loaded:
        # Depth first, without recursion: the path holds (anchor id, the fields still to follow).
        path: list[tuple[str, list[str]]] = [(la.anchor.id, list(SUCCESSOR_FIELDS))]
        taken: list[str] = []  # the field followed out of each anchor on the path but the last
        while path:
            anchor_id, todo = path[-1]
            if not todo:
                done.add(anchor_id)
                path.pop()
                if taken:
                    taken.pop()
                continue
            fld = todo.pop(0)
            ref = getattr(seen[anchor_id].anchor, fld)
            if ref is None or ref in done:
                continue
            on_path = [step[0] for step in path]
            if ref in on_path:
                i = on_path.index(ref)
                _lineage_loop(list(zip(on_path[i:], taken[i:] + [fld])), seen)
            path.append((ref, list(SUCCESSOR_FIELDS)))
            taken.append(fld)


def _lineage_loop(loop: list[tuple[str, str]], seen: dict[str, LoadedAnchor]) -> None:
    first = seen[loop[0][0]]
    steps = " ".join(f"{aid} -{fld}->" for aid, fld in loop)
    elsewhere = sorted({f"{aid} in {seen[aid].file}" for aid, _ in loop if seen[aid].file != first.file})
    where = f" ({'; '.join(elsewhere)})" if elsewhere else ""
    raise DataError(first.file, f"the successor chain (superseded_by, refuted_by, …) loops: {steps} {first.anchor.id}{where}; "
                                "it must end at an anchor that names neither (the current claim)",
                    anchor=first.anchor.id, field=loop[0][1])


def law_anchor_files(registry: Any) -> dict[str, list[Any]]:
    """Every law's anchor files, by law. A law whose anchors_package cannot be read, or holds no
    TOML (package data forgotten in its pyproject), is reported as broken; the others still load."""
    files: dict[str, list[Any]] = {}
    for law in registry.laws.values():
        where = f"{registry.origin_of(law)}: law {law.name!r}: anchors_package {law.anchors_package!r}"
        try:
            found = list(law.anchor_files())
        except (ImportError, OSError, TypeError, ValueError) as exc:
            registry.report(f"{where} cannot be read ({type(exc).__name__}: {exc}); its anchors are not loaded")
            continue
        if law.anchors_package and not found:
            registry.report(f"{where} holds no *.toml anchor files; declare them as package data "
                            "in the plugin's pyproject ([tool.setuptools.package-data])")
        files[law.name] = found
    return files


def load_all(registry: Any, profiles: Optional[Iterable[str]] = None,
             lenient: Iterable[str] = ()) -> AnchorSet:
    """Every law's anchors, cross-checked, each checked by its own law (case, arms, units).

    :param lenient: third-party laws a run did not select (``--law``): when their own anchor
        files are wrong they are reported and set aside, so an unrelated plugin never blocks a
        run. Every other data error is raised (exit 2 before anything runs), as in ``check``.
    """
    by_law = law_anchor_files(registry)
    lenient = set(lenient) - registry.builtin_laws
    kept: list[Any] = []
    for law, files in by_law.items():
        if law in lenient:
            try:
                check_with_laws(load_anchors(files, laws=registry.laws.keys(), profiles=profiles), registry)
            except LawbenchError as exc:
                registry.report(f"{registry.law_origin[law]}: {exc} (its anchors are set aside)")
                continue
        kept.extend(files)
    anchor_set = load_anchors(kept, laws=registry.laws.keys(), profiles=profiles)
    check_with_laws(anchor_set, registry)
    return anchor_set


def check_with_laws(anchor_set: AnchorSet, registry: Any) -> None:
    """Law.check_anchor for every anchor: a data error names the anchor's real file; a law that
    breaks while checking is named by its distribution."""
    for la in anchor_set.anchors:
        law = registry.law(la.anchor.law)
        if la.anchor.harness is not None:  # core's own case: the Anchor model checked it
            continue
        # a planted fault's case is checked as the run will see it: merged over the anchor's own
        variants = [("case", la.anchor)] + [(f"planted[{i}].case", la.anchor.with_fault(f))
                                            for i, f in enumerate(la.anchor.planted)]
        for prefix, anchor in variants:
            try:
                law.check_anchor(anchor)
            except DataError as exc:
                raise exc.located(la.file, la.anchor.id) from None
            except ValidationError as exc:  # a law that validated its case by hand
                raise validation_error(la.file, exc, anchor=la.anchor.id, prefix=prefix) from None
            except LawbenchError as exc:
                raise DataError(la.file, str(exc), anchor=la.anchor.id) from None
            except Exception as exc:
                raise PluginError(f"{registry.origin_of(law)}: law {law.name!r} failed while checking anchor "
                                  f"{la.anchor.id} ({la.file}): {type(exc).__name__}: {exc}") from None


def as_path(traversable: Any) -> Path:
    """A real filesystem path for a packaged file (pytest collects files, not Traversables)."""
    return Path(str(traversable))
