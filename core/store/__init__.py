"""The model store: real GGUF files from the catalogue (fetched, verified, cached) and synthetic ones."""
from lawbench.core.store.catalog import Catalog, ModelSource, PypiMember, RealModel, load_catalog
from lawbench.core.store.real import ModelStore, ModelStoreError

__all__ = ["Catalog", "ModelSource", "ModelStore", "ModelStoreError", "PypiMember", "RealModel",
           "load_catalog"]
