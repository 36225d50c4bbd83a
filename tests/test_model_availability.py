"""A model this machine lacks is a SKIP (a FAIL on its own runner); a model file that is there but
wrong is an ERROR. A checksum mismatch must never read as "not applicable here"."""
from __future__ import annotations

import hashlib

import pytest

from lawbench.core.errors import NotApplicable
from lawbench.core.store import Catalog, ModelStore, ModelStoreError, RealModel, load_catalog
from lawbench.core.store.real import ModelUnavailable
from lawbench.plugins.law4.measure import model_file

SMOL = "smollm2-135m-q4_1"


class _Resources:
    """What law4's measure asks of the run's resources: a model by catalogue id."""

    def __init__(self, store: ModelStore):
        self.store = store

    def model(self, model_id: str):
        return self.store.path(model_id)


def _runner_store(tmp_path, monkeypatch, sha256: str, size: int) -> ModelStore:
    raw = load_catalog().get(SMOL).model_dump(exclude_none=True)
    raw["source"] = {"path": "${LAWBENCH_MODEL_DIR}/smol.gguf"}
    raw.update(sha256=sha256, size=size)
    model = RealModel.model_validate(raw)
    monkeypatch.setenv("LAWBENCH_MODEL_DIR", str(tmp_path / "models"))
    return ModelStore(cache_dir=tmp_path / "cache", catalog=Catalog(model=[model], files={SMOL: "test"}))


def test_a_missing_runner_file_is_not_applicable(tmp_path, monkeypatch):
    store = _runner_store(tmp_path, monkeypatch, "0" * 64, 4)
    with pytest.raises(NotApplicable, match="does not exist on this runner"):
        model_file(f"gguf:{SMOL}", _Resources(store))


def test_a_runner_file_with_a_wrong_checksum_is_an_error_not_a_skip(tmp_path, monkeypatch):
    data = b"GGUF not the published file"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smol.gguf").write_bytes(data)
    store = _runner_store(tmp_path, monkeypatch, "f" * 64, len(data))
    with pytest.raises(ModelStoreError, match="checksum mismatch") as exc:
        model_file(f"gguf:{SMOL}", _Resources(store))
    assert not isinstance(exc.value, (NotApplicable, ModelUnavailable))
    good = _runner_store(tmp_path, monkeypatch, hashlib.sha256(data).hexdigest(), len(data))
    assert model_file(f"gguf:{SMOL}", _Resources(good)) == tmp_path / "models" / "smol.gguf"
