"""Load and cross-check the anchor TOML files. Errors name the file, the anchor id and the field."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from pydantic import ValidationError

from lawbench.core.errors import DataError
from lawbench.core.models import Anchor

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def read_toml(path: Any) -> dict:
    """Parse one TOML file (a path or an importlib.resources Traversable)."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(name, "file not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(name, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(name, f"malformed TOML: {exc}") from None


def field_path(loc: tuple) -> str:
    """pydantic's error location as a dotted field path: ('band', 'rel') -> 'band.rel'."""
    return ".".join(str(p) for p in loc) or "(top level)"


def validation_error(file: str, exc: ValidationError, anchor: Optional[str] = None,
                     prefix: str = "") -> DataError:
    err = exc.errors()[0]
    where = field_path(tuple(err.get("loc", ())))
    if prefix:
        where = f"{prefix}.{where}" if where != "(top level)" else prefix
    msg = err.get("msg", "invalid")
    if err.get("type") == "extra_forbidden":
        msg = "unknown field (check the spelling; see `lawbench schema`)"
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return DataError(file, msg, anchor=anchor, field=where)


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
        for ref_field in ("superseded_by", "refuted_by"):
            ref = getattr(a, ref_field)
            if ref is not None and ref not in seen:
                raise DataError(la.file, f"refers to anchor {ref!r}, which does not exist",
                                anchor=a.id, field=ref_field)
            if ref == a.id:
                raise DataError(la.file, "an anchor cannot supersede or refute itself", anchor=a.id, field=ref_field)
    return AnchorSet(loaded)


def law_anchor_files(registry: Any) -> list[Any]:
    files: list[Any] = []
    for law in registry.laws.values():
        files.extend(law.anchor_files())
    return files


def load_all(registry: Any, profiles: Optional[Iterable[str]] = None) -> AnchorSet:
    return load_anchors(law_anchor_files(registry), laws=registry.laws.keys(), profiles=profiles)


def as_path(traversable: Any) -> Path:
    """A real filesystem path for a packaged file (pytest collects files, not Traversables)."""
    return Path(str(traversable))
