"""A case's model reference, read one way for every law: its form (`ModelRef`, `ModelReference`
for a case model's field), what `lawbench check` can say of it (`check_model_ref`) and the file it
names on this machine (`model_file`)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import AfterValidator

from lawbench.core.errors import NotApplicable
from lawbench.core.store.catalog import catalog_ids
from lawbench.core.store.real import ModelStore, ModelUnavailable

MODEL_KINDS = ("gguf", "path", "manifest")
MODEL_REF_FORMS = "gguf:<catalogue id>, path:<file.gguf> or manifest:<id>"


@dataclass(frozen=True)
class ModelRef:
    """A case's ``model``, in the one form every law writes it:

    ``gguf:<catalogue id>`` a verified file the model store fetches or builds (this catalogue);
    ``path:<file>``         a runner's own file (``~`` and ``$VARS`` expand);
    ``manifest:<id>``       an architecture without weights, read by the law that ships manifests.
    """

    kind: str
    name: str

    @classmethod
    def parse(cls, ref: str) -> "ModelRef":
        """:raises ValueError: one line naming the reference and the forms it may take."""
        kind, sep, name = str(ref).partition(":")
        if not sep or kind not in MODEL_KINDS or not name:
            raise ValueError(f"model {ref!r}: use {MODEL_REF_FORMS}")
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"

    def local_path(self) -> Path:
        """A path: reference's file name with ``~`` and ``$VARS`` expanded (it may not exist)."""
        return Path(os.path.expandvars(os.path.expanduser(self.name)))


def _reference_form(ref: str) -> str:
    ModelRef.parse(ref)  # its ValueError is pydantic's error for the field: "model 'x': use …"
    return ref


# A case's `model` field in a law's case model: the reference's form is checked where the case is
# validated; whether the catalogue declares it is check_model_ref's (lawbench check).
ModelReference = Annotated[str, AfterValidator(_reference_form)]


def check_model_ref(ref: str) -> ModelRef:
    """A reference `lawbench check` can judge without this machine: its form, and for gguf: that
    the catalogue declares the id (a path is this machine's business; a manifest the law's).

    :raises ValueError: one line; the law names its anchor and field around it.
    """
    parsed = ModelRef.parse(ref)
    if parsed.kind == "gguf" and parsed.name not in catalog_ids():
        raise ValueError(f"no model {parsed.name!r} in the model catalogue (`lawbench check` lists the "
                         "catalogue files)")
    return parsed


def model_file(ref: Union[str, ModelRef], resources: Any = None, *, fetch: bool = True) -> Path:
    """The file a model reference names, on this machine.

    :param resources: the run's Resources; with ``fetch`` a gguf: model is fetched or built
        through its store (under the box lock). Without them, or with ``fetch=False`` (a
        prediction never downloads), nothing is fetched and no engine runs: a real model must
        already be in the cache (a synthetic F16 is written by the gguf factory alone).
    :raises NotApplicable: the file is not on this machine (a SKIP; a FAIL on its own runner),
        or the reference names an architecture manifest, which has no weights.
    :raises ModelStoreError: an unknown catalogue id, or a file that fails its checksum (ERROR).
    """
    parsed = ref if isinstance(ref, ModelRef) else ModelRef.parse(ref)
    if parsed.kind == "manifest":
        raise NotApplicable(f"model {str(parsed)!r} is an architecture manifest without weights; "
                            "measure a gguf:<catalogue id> or path:<file> model")
    if parsed.kind == "path":
        path = parsed.local_path()
        if os.path.lexists(path) and not path.is_file():
            # There, but a folder, a pipe or a device: a data error naming what it is (reading a
            # pipe would wait for a writer), never "not on this machine".
            from lawbench.core.store.gguf_header import GGUFHeaderError, _kind_of

            what = _kind_of(os.stat(path).st_mode) if os.path.exists(path) else "a broken link"
            raise GGUFHeaderError(str(path), f"is {what}, not a regular file; give the path of a .gguf file")
        if not path.is_file():
            named = f" (named {str(parsed)!r})" if str(path) != parsed.name else ""  # which $VAR it read
            raise NotApplicable(f"model file {path} is not on this machine{named}")
        return path

    if fetch and resources is not None:
        try:
            return Path(resources.model(parsed.name))
        except ModelUnavailable as exc:  # a runner's own file is absent: a SKIP
            raise NotApplicable(str(exc)) from None  # a bad checksum or download stays an ERROR
    try:
        return ModelStore().path(parsed.name, fetch=False)
    except ModelUnavailable as exc:  # never fetched here (a prediction never downloads): a SKIP
        raise NotApplicable(f"catalogue model {parsed.name!r} is not available here: {exc}") from None
