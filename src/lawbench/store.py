"""Model files a law reads: one way to name a model in a case, and one way to get its file.

A case names its model ``gguf:<catalogue id>`` (a verified file the run's model store fetches or
builds: anchors/models*.toml and the ``lawbench_model_catalogs`` hook), ``path:<file>`` (a
runner's own file) or ``manifest:<id>`` (an architecture without weights)::

    from lawbench.store import check_model_ref, model_file

    check_model_ref(case.model)            # in check_anchor: ValueError on a bad form or id
    path = model_file(case.model, resources)  # in sampler/predict: NotApplicable where absent
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from lawbench._surface import lazy

_EXPORTS = {
    "ModelRef": "lawbench.core.store.references",
    "ModelReference": "lawbench.core.store.references",
    "check_model_ref": "lawbench.core.store.references",
    "model_file": "lawbench.core.store.references",
    "catalog_ids": "lawbench.core.store.catalog",
    "load_catalog": "lawbench.core.store.catalog",
    # Resources.model(id) raises it where a file is not on this machine (model_file makes it a SKIP)
    "ModelUnavailable": "lawbench.core.store.real",
    "sha256_of": "lawbench.core.store.real",
    # the synthetic GGUF factory: any shape, random weights (honest for speed, never for quality)
    "SyntheticSpec": "lawbench.core.store.synthetic",
    "WEIGHT_TYPES": "lawbench.core.store.synthetic",
    # lawbench's cache folder ($LAWBENCH_CACHE): where a law keeps what it builds from a model
    "cache_root": "lawbench.core.paths",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

if TYPE_CHECKING:
    from lawbench.core.paths import cache_root  # noqa: F401
    from lawbench.core.store.catalog import catalog_ids, load_catalog  # noqa: F401
    from lawbench.core.store.references import ModelRef, ModelReference, check_model_ref, model_file  # noqa: F401
    from lawbench.core.store.real import ModelUnavailable, sha256_of  # noqa: F401
    from lawbench.core.store.synthetic import WEIGHT_TYPES, SyntheticSpec  # noqa: F401
