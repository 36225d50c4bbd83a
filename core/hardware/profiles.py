"""Load hardware profiles: the TOML files shipped in lawbench.hardware_profiles plus plugin folders.

One file is one profile. Every problem becomes a DataError naming the file and the field
("tiers.0.bandwidth_spec_gbs.value", "laws.<law>.<its field>"), never a pydantic traceback.
Each law's table ([laws.<law>]) is validated by that law's ``profile_model`` as the file loads.
"""
from __future__ import annotations

import os
import typing
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Union

from pydantic import BaseModel, ValidationError

from lawbench.core.errors import DataError, UsageError, named_field, typo_first
from lawbench.core.toml_read import read_toml
from lawbench.core.models import HardwareProfile

if typing.TYPE_CHECKING:
    from importlib.resources.abc import Traversable

Folder = Union["Traversable", str, os.PathLike]

BUILTIN_PACKAGE = "lawbench.hardware_profiles"
PROFILE_DIRS_ENV = "LAWBENCH_PROFILE_DIRS"  # extra hardware-profile folders, os.pathsep-separated


def builtin_dir() -> "Traversable":
    return resources.files(BUILTIN_PACKAGE)


# The laws whose tables a profile is validated against: name -> Law (or anything with a
# ``profile_model``), handed by the caller (the registry's ``laws``): this layer never asks the
# registry. None: no law's table is checked (core's own fields still are).
Laws = Optional[Mapping[str, Any]]


def load_profiles(extra_dirs: Iterable[Folder] = (), laws: Laws = None) -> dict[str, HardwareProfile]:
    """Every profile: the shipped ones, then each extra folder (plugins, a contributor's own).

    A profile id defined twice is an error naming both files.
    """
    profiles: dict[str, HardwareProfile] = {}
    origin: dict[str, str] = {}
    for folder in [builtin_dir(), *extra_dirs]:
        for entry in _toml_files(folder):
            profile = load_profile_file(entry, laws)
            label = _label(entry)
            if profile.id in profiles:
                raise DataError(label, f"profile id {profile.id!r} is already defined in "
                                       f"{origin[profile.id]}; ids must be unique — rename one",
                                field="id")
            profiles[profile.id] = profile
            origin[profile.id] = label
    return dict(sorted(profiles.items()))


def plugin_profiles(registry: Any, strict: bool = False) -> dict[str, HardwareProfile]:
    """The built-in profiles and every plugin's (see usable_plugin_dirs)."""
    return load_profiles(extra_dirs=usable_plugin_dirs(registry, strict), laws=registry.laws)


def usable_plugin_dirs(registry: Any, strict: bool = False) -> list[Any]:
    """The plugins' profile folders. Unless ``strict`` (``lawbench check``), a folder that is
    missing or holds a bad profile is reported by its distribution and set aside."""
    if strict:
        return list(registry.profile_dirs)
    good = []
    for folder, origin in zip(registry.profile_dirs, registry.profile_dir_origins):
        try:
            load_profiles([folder], laws=registry.laws)
        except DataError as exc:
            if origin.startswith(PROFILE_DIRS_ENV):  # the user's own setting: a typo must not change the profile
                raise UsageError(f"{PROFILE_DIRS_ENV}: {exc}") from None
            registry.report(f"{origin}: {exc} (its profiles are set aside)")
            continue
        good.append(folder)
    return good


def get_profile(profile_id: str, profiles: dict[str, HardwareProfile]) -> HardwareProfile:
    try:
        return profiles[profile_id]
    except KeyError:
        known = ", ".join(sorted(profiles)) or "(none)"
        raise UsageError(f"unknown hardware profile {profile_id!r}; known profiles: {known}. "
                         "Run `lawbench profiles` to list them.") from None


def load_profile_file(entry: Folder, laws: Laws = None) -> HardwareProfile:
    """Parse and validate one TOML file (a path or an importlib Traversable)."""
    return validate_profile(read_toml(entry), _label(entry), laws)


def validate_profile(data: dict[str, Any], label: str, laws: Laws = None) -> HardwareProfile:
    """Validate a parsed profile, and each law's table in it with that law's ``profile_model``;
    `label` names where it came from in errors."""
    try:
        profile = HardwareProfile.model_validate(data)
    except ValidationError as exc:
        raise _data_error(exc, label) from None
    for name, law in (laws or {}).items():
        model = getattr(law, "profile_model", None)
        if model is None:
            continue
        try:
            profile.law_table(name, model)
        except ValidationError as exc:
            raise _data_error(exc, label, model, ("laws", name)) from None
    return profile


# --------------------------------------------------------------------------- errors for people


# A rule of a whole model names its field first: "ram_gb_min: …", "tiers: …". A law's table is
# validated on its own: `model` is its profile_model and `prefix` its place ("laws", "law4").
def _data_error(exc: ValidationError, label: str, model: type[BaseModel] = HardwareProfile,
                prefix: tuple[str, ...] = ()) -> DataError:
    errors = exc.errors(include_url=False)
    first, hint = typo_first(errors)
    inner = tuple(first.get("loc", ()))
    loc = (*prefix, *inner)
    field = ".".join(str(part) for part in loc) or None
    named = named_field(first)
    if named:  # the field goes after the model's own place: "tiers.1" + "bandwidth_spec_gbs.value"
        field = ".".join(str(part) for part in (*loc, named.group(1)))
        message = named.group(2)
    else:
        message = f"unknown field {loc[-1]!r}{hint}" if hint else _describe(first, loc, model, inner)
    more = len(errors) - (2 if hint else 1)
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return DataError(label, message, field=field)


def _describe(error: dict[str, Any], loc: tuple, model: type[BaseModel], inner: tuple) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        allowed = _allowed_fields(model, inner[:-1])
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"unknown field {loc[-1]!r}{hint}"
    if kind == "missing":
        return "required field is missing"
    msg = str(error.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    # A rule of the whole profile would quote the whole file back: say only what is wrong.
    if "input" in error and loc and kind not in ("model_type", "dict_type", "list_type"):
        return f"{msg} (got {error['input']!r})"
    return msg


def _allowed_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names allowed at `loc` in `model`, found by walking its annotations."""
    current: Any = model
    for part in loc:
        current = _step(current, part)
        if current is None:
            return []
    current = _unwrap_optional(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return []


def _step(annotation: Any, part: Any) -> Any:
    annotation = _unwrap_optional(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(str(part))
        return field.annotation if field else None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) is Union:
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return annotation


# --------------------------------------------------------------------------- files


def _toml_files(folder: Folder) -> list[Any]:
    node = Path(folder) if isinstance(folder, (str, os.PathLike)) else folder
    label = _label(node)
    if not node.is_dir():
        raise DataError(label, "hardware-profile folder does not exist or is not a folder")
    return sorted((e for e in node.iterdir() if e.name.endswith(".toml") and e.is_file()),
                  key=lambda e: e.name)


def _label(entry: Any) -> str:
    return os.fspath(entry) if isinstance(entry, (str, os.PathLike)) else str(entry)
