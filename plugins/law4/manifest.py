"""Architecture manifests: a model's shapes and types as data, each with its source.

A manifest (anchors/manifests/<id>.toml) stands in for a GGUF header when Law 4 prices a published
architecture that is not on disk. Tensors are templates: a name with "{i}" repeats over the layers
(all of them, or `layers = "1-26"`), shapes are GGUF order (ne0 first), and the weight type defaults
to the manifest's `weight_type` (1-D tensors default to F32, as llama.cpp's converter keeps them).
Where a source printed byte totals instead of shapes, a tensor is a *byte group*: `role` plus
`size_gib` (and `n_params` where stated), spread evenly over the layers its name covers.

    id = "qwen3-30b-a3b"
    architecture = "qwen3moe"
    source = "model config: Qwen/Qwen3-30B-A3B/config.json"
    weight_type = "BF16"
    [metadata]                      # GGUF keys without the architecture prefix
    block_count = 48
    attention.head_count_kv = 4     # TOML dotted keys: read back as "attention.head_count_kv"
    [[tensor]]
    name = "blk.{i}.attn_q.weight"
    shape = [2048, 4096]
"""
from __future__ import annotations

import math
import re
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, ValidationError, field_validator, model_validator

from lawbench import DataError, Id, Strict, validation_error
from lawbench.host import read_toml
from lawbench.plugins.law4.shape import ROLES, ModelShape, TensorEntry, layer_of, role_of, tensor_bytes
from lawbench.plugins.law4.shape_checks import ShapeError, check_metadata

MANIFEST_PACKAGE = "lawbench.anchors.manifests"
_RANGE_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


class TensorTemplate(Strict):
    name: str  # llama.cpp tensor name; "{i}" repeats it per layer
    shape: Optional[list[int]] = None  # GGUF order (ne0 first)
    type: Optional[str] = None  # ggml type name; default: the manifest's weight_type (F32 for 1-D)
    layers: Optional[str] = None  # "0", "1-26"; default: every layer when the name has {i}
    role: Optional[str] = None  # required for a byte group; else derived from the name
    size_gib: Optional[float] = Field(default=None, gt=0)  # byte group: total over its layers
    n_params: Optional[float] = Field(default=None, gt=0)  # byte group: total parameters, if stated
    source: Optional[str] = None  # where a byte group's numbers were printed

    @field_validator("role")
    @classmethod
    def _known_role(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and v not in ROLES:
            raise ValueError(f"unknown role {v!r}; one of {', '.join(ROLES)}")
        return v

    @model_validator(mode="after")
    def _shape_or_bytes(self) -> "TensorTemplate":
        if (self.shape is None) == (self.size_gib is None):
            raise ValueError("a tensor gives exactly one of: shape (with an optional type), "
                             "or size_gib with a role (a byte group)")
        if self.size_gib is not None and self.role is None:
            raise ValueError("a byte group (size_gib) needs a role: the name does not say it")
        if self.shape is not None and any(d <= 0 for d in self.shape):
            raise ValueError("shape dimensions must be positive")
        if self.layers is not None and "{i}" not in self.name:
            raise ValueError("layers applies only to a name with {i}")
        return self


class Manifest(Strict):
    id: Id
    name: str
    architecture: str
    source: str  # "model config: <repo>/config.json", or the register entry the numbers come from
    quote: Optional[str] = None  # the source's own words, where a seed or the register printed them
    notes: Optional[str] = None
    weight_type: str = "BF16"
    metadata: dict[str, Any]
    tensor: list[TensorTemplate] = Field(default_factory=list)


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML dotted keys come back as nested tables; GGUF keys are dotted strings."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _layers(spec: Optional[str], n_layer: int, file: str, field: str) -> list[int]:
    if spec is None:
        return list(range(n_layer))
    out: list[int] = []
    for part in spec.split(","):
        m = _RANGE_RE.match(part)
        if not m:
            raise DataError(file, f"layers {spec!r} is not a list of ranges like '0' or '1-26'", field=field)
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi or hi >= n_layer:
            raise DataError(file, f"layers {spec!r} runs outside 0-{n_layer - 1}", field=field)
        out.extend(range(lo, hi + 1))
    return out


def _expand(m: Manifest, meta: dict[str, Any], file: str) -> tuple[TensorEntry, ...]:
    n_layer = meta.get("block_count")
    if m.tensor and not isinstance(n_layer, int):
        raise DataError(file, "tensors need metadata.block_count (an integer)", field="metadata.block_count")
    out: list[TensorEntry] = []
    for ti, t in enumerate(m.tensor):
        field = f"tensor.{ti}"
        names = ([t.name.replace("{i}", str(i)) for i in _layers(t.layers, n_layer, file, f"{field}.layers")]
                 if "{i}" in t.name else [t.name])
        if t.size_gib is not None:
            # Spread a printed byte total evenly; the remainder lands on the last layer.
            total = round(t.size_gib * 2 ** 30)
            params = round(t.n_params) if t.n_params is not None else None
            for j, name in enumerate(names):
                last = j == len(names) - 1
                nb = total // len(names) + (total % len(names) if last else 0)
                npar = None if params is None else params // len(names) + (params % len(names) if last else 0)
                out.append(TensorEntry(name, t.role or "other", nb, layer_of(name), (), "", npar))
            continue
        shape = tuple(t.shape or ())
        type_name = (t.type or ("F32" if len(shape) == 1 else m.weight_type)).upper()
        try:
            nb = tensor_bytes(type_name, shape, f"tensor {t.name!r} ")
        except ShapeError as exc:
            raise DataError(file, str(exc), field=f"{field}.{exc.key or 'shape'}") from None
        n_el = math.prod(shape)
        for name in names:
            out.append(TensorEntry(name, t.role or role_of(name), nb, layer_of(name), shape,
                                   type_name, n_el))
    return tuple(out)


def manifest_path(manifest_id: str) -> Any:
    """The shipped manifest for an id (a Traversable), or a DataError listing the known ones."""
    root = resources.files(MANIFEST_PACKAGE)
    entry = root / f"{manifest_id}.toml"
    if not entry.is_file():
        known = sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))
        raise DataError(str(entry), f"no manifest {manifest_id!r}; shipped: {', '.join(known) or '(none)'}")
    return entry


def load_manifest(source: Any) -> ModelShape:
    """A ModelShape from a manifest: a path, a Traversable, or a shipped manifest id."""
    if isinstance(source, str) and not source.endswith(".toml") and "/" not in source:
        source = manifest_path(source)
    file = str(source)
    data = read_toml(source if not isinstance(source, str) else Path(source))
    try:
        m = Manifest.model_validate(data)
    except ValidationError as exc:
        raise validation_error(file, exc) from None
    stem = Path(file).name[:-5] if file.endswith(".toml") else None
    if stem is not None and stem != m.id:
        raise DataError(file, f"id {m.id!r} does not match the file name {stem!r}.toml", field="id")
    meta = _flatten(m.metadata)
    try:
        check_metadata(meta)  # before _expand: a huge block_count must not build a huge list
    except ShapeError as exc:
        raise DataError(file, str(exc), field=f"metadata.{exc.key}") from None
    tensors = _expand(m, meta, file)
    notes = tuple(x for x in (m.source, m.quote, m.notes) if x)
    return ModelShape(id=m.id, architecture=m.architecture, source=f"manifest:{m.id}",
                      metadata=meta, tensors=tensors, notes=notes)
