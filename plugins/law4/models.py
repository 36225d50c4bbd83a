"""Where Law 4 reads a model's shape: the case's model reference (lawbench.store, the one reader for
every law) resolved to an architecture manifest (anchors/manifests) or a GGUF header."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

from lawbench import DataError
from lawbench.plugins.law4.case import CASE_FILE
from lawbench.plugins.law4.shape import ModelShape


@dataclasses.dataclass(frozen=True)
class Models:
    """Where one predict() call reads its model files: the run's resources it was handed, and
    whether it may fetch or build through them. Lives for one call: the law keeps no run state."""

    resources: Any = None
    fetch: bool = False


@functools.lru_cache(maxsize=64)
def _manifest(manifest_id: str) -> ModelShape:
    from lawbench.plugins.law4.manifest import load_manifest

    return load_manifest(manifest_id)


def load_model(ref: str, anchor_id: str = "", resources: Any = None, *, fetch: bool = False) -> ModelShape:
    """A ModelShape for "manifest:<id>", "path:<file.gguf>" or "gguf:<catalogue id>" (one reader
    of model references for every law: lawbench.store.ModelRef).

    :param resources: the run's Resources; with ``fetch`` a "gguf:" model is fetched or built
        through its store. Otherwise nothing is downloaded and no engine runs (a prediction
        never downloads).
    """
    from lawbench.store import ModelRef, model_file

    try:
        parsed = ModelRef.parse(ref)
    except ValueError as exc:
        raise DataError(CASE_FILE, str(exc), anchor=anchor_id or None, field="case.model") from None
    if parsed.kind == "manifest":
        try:
            return _manifest(parsed.name)
        except DataError as exc:
            if exc.message.startswith("no manifest"):  # a typo in the case, not in a manifest
                raise DataError(CASE_FILE, exc.message, anchor=anchor_id or None,
                                field="case.model") from None
            raise
    from lawbench import read_gguf_header

    return ModelShape.from_header(read_gguf_header(model_file(parsed, resources, fetch=fetch)))


def check_model_ref(ref: str, anchor_id: str, field: str) -> None:
    """A manifest or catalogue model a case names must exist (a path is this machine's business)."""
    from lawbench.store import check_model_ref as check_form

    try:
        parsed = check_form(ref)
    except ValueError as exc:
        raise DataError(CASE_FILE, str(exc), anchor=anchor_id, field=field) from None
    if parsed.kind == "manifest":
        try:
            _manifest(parsed.name)
        except DataError as exc:
            if not exc.message.startswith("no manifest"):
                raise  # the manifest file itself is malformed: named by its own path
            raise DataError(CASE_FILE, exc.message, anchor=anchor_id, field=field) from None
