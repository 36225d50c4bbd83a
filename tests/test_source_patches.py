"""Patched-source builds (issue 34, register V-14): a source patch lawbench ships, pinned by sha256,
applied with `git apply` to the extracted source before configure, and part of the build key and
the signed manifest.

The shipped patch is applied to the real pinned sdists (b11434, and b10103, the gtx1060 engine of
record) and the patched file read back; the build kind itself runs end to end on a tiny real cmake
project laid out like the sdist (tests/test_engine_build.py), where a patch changes what the built
tool prints. The real CPU build of patched b11434 (about 10 min on 2 cores) is a nightly test.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from test_engine_build import TOOL_CPP, plant_sdist

from lawbench.core.engines import build, build_trust, patches
from lawbench.core.engines.build import build_llamacpp
from lawbench.core.engines.llamacpp import build_key
from lawbench.core.engines.specs import parse_engine
from lawbench.core.errors import EngineError, LawbenchError, UsageError
from lawbench.core.paths import cache_root
from lawbench.core.record.run_keys import engine_key

GRAPHS = patches.PATCHES["cuda-graphs-pre-volta"]
CUDA_FILE = Path("ggml/src/ggml-cuda/ggml-cuda.cu")


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


# --------------------------------------------------------------------------- the shipped patch, on the real sdists


def test_the_shipped_patch_is_the_one_pinned_and_says_what_it_is():
    assert patches.sha256_of(GRAPHS.path) == GRAPHS.sha256
    text = GRAPHS.path.read_text(encoding="utf-8")
    assert "GGML_CUDA_FORCE_GRAPHS" in text and "V-14" in text and "#48" in text
    assert text.count("diff --git") == 1 and f"a/{CUDA_FILE.as_posix()}" in text


@pytest.mark.parametrize("version", ["11434.0.0", "10103.0.0"])
def test_the_patch_applies_to_the_pinned_sdist_and_changes_only_the_graph_check(tmp_path, version):
    # the archive through lawbench's own fetch: from the cache when it hashes to its pin, else pip
    sdist = build._fetch_sdist(version, cache_root() / "llama.cpp" / "downloads")
    src = build._extract(sdist, tmp_path / "src")
    before = _digests(src)
    stock = (src / CUDA_FILE).read_text(encoding="utf-8")
    patches.apply([GRAPHS], src)
    after = _digests(src)
    assert {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)} == {str(CUDA_FILE)}
    patched = (src / CUDA_FILE).read_text(encoding="utf-8")
    diff = [line for line in difflib.unified_diff(stock.splitlines(), patched.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert diff == [
        "-        if (ggml_cuda_info().devices[cuda_ctx->device].cc < GGML_CUDA_CC_VOLTA) {",
        "+        // GGML_CUDA_FORCE_GRAPHS set: keep CUDA graphs on below Volta (quantprobe prereg #48, register V-14)",
        "+        static const bool force_graphs = getenv(\"GGML_CUDA_FORCE_GRAPHS\") != nullptr;",
        "+        if (ggml_cuda_info().devices[cuda_ctx->device].cc < GGML_CUDA_CC_VOLTA && !force_graphs) {",
    ]
    # the switch sits in ggml_cuda_graph_set_enabled, right above the check it skips
    body = patched.split("static bool ggml_cuda_graph_set_enabled(", 1)[1].split("\n}\n", 1)[0]
    assert "force_graphs = getenv(\"GGML_CUDA_FORCE_GRAPHS\")" in body
    assert body.index("&& !force_graphs") < body.index("disabling CUDA graphs due to GPU architecture")
    assert patched.count("GGML_CUDA_FORCE_GRAPHS") == 2  # the comment and the getenv, nowhere else
    # applied twice, it does not apply: refused naming the file, the tree left as it was
    with pytest.raises(EngineError) as exc:
        patches.apply([GRAPHS], src)
    assert str(GRAPHS.path) in str(exc.value) and "does not apply" in str(exc.value)
    assert _digests(src) == after


def test_a_source_tree_inside_a_git_checkout_is_patched_like_any_other(tmp_path):
    """A cache under a checkout: git apply still patches the tree itself, by the patch's own paths."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    src = tmp_path / "deep" / "llama.cpp"
    patch = _write_patch(tmp_path, "tool.cpp", "a line\n", "a changed line\n")
    (src).mkdir(parents=True)
    (src / "tool.cpp").write_text("a line\n", encoding="utf-8")
    patches.apply([patch], src)
    assert (src / "tool.cpp").read_text(encoding="utf-8") == "a changed line\n"


# --------------------------------------------------------------------------- the build kind, on a tiny real project


def _write_patch(folder: Path, name: str, old: str, new: str, *, pin: bool = True) -> patches.SourcePatch:
    """A patch of one file, written as a unified diff (difflib), pinned at its digest."""
    text = "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))
    path = folder / f"{name.replace('.', '-')}-{hashlib.sha256(text.encode()).hexdigest()[:6]}.patch"
    path.write_text(text, encoding="utf-8")
    return patches.SourcePatch(name=path.stem.lower(), path=path,
                               sha256=patches.sha256_of(path) if pin else "0" * 64,
                               written_for="a test project", why="test")


def _usage(llama) -> str:
    return subprocess.run([str(llama.llama_bench)], capture_output=True, text=True, check=False).stdout.strip()


PATCHED_CPP = TOOL_CPP.replace('printf("usage: %s\\n"', 'printf("patched usage: %s\\n"')


@pytest.fixture
def usage_patch(tmp_path, monkeypatch):
    assert PATCHED_CPP != TOOL_CPP
    patch = _write_patch(tmp_path, "tool.cpp", TOOL_CPP, PATCHED_CPP)
    monkeypatch.setitem(patches.PATCHES, patch.name, patch)
    monkeypatch.delenv(build_trust.KEY_ENV, raising=False)
    return patch


def test_a_patched_build_has_its_own_key_record_and_manifest(tmp_path, usage_patch):
    plant_sdist(tmp_path, "4747.0.0")
    lines: list[str] = []
    stock = build_llamacpp("4747.0.0", cache_dir=tmp_path, jobs=2)
    patched = build_llamacpp("4747.0.0", cache_dir=tmp_path, jobs=2, patches=(usage_patch,), progress=lines.append)
    stock_dir, patched_dir = stock.bin_dir.parent.parent, patched.bin_dir.parent.parent
    assert stock_dir.name == build_key("4747.0.0", "cpu")
    assert patched_dir.name == build_key(f"4747.0.0+{usage_patch.name}.{usage_patch.sha256[:12]}", "cpu")
    assert any(f"applying {usage_patch.name}" in line for line in lines)
    # the patch is what runs: the built tool prints the patched line, the stock one does not
    assert _usage(stock).startswith("usage: ") and _usage(patched).startswith("patched usage: ")
    info = json.loads((patched_dir / "build_info.json").read_text(encoding="utf-8"))
    assert info["patches"] == [usage_patch.record()] and patched.build_info["patches"] == [usage_patch.record()]
    assert "patches" not in json.loads((stock_dir / "build_info.json").read_text(encoding="utf-8"))
    man_p = json.loads((patched_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    man_s = json.loads((stock_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    assert man_p["patches"] == [usage_patch.record()] and man_s["patches"] == []
    assert man_p["source_sha256"] == man_s["source_sha256"]  # one source archive, two builds
    tool = "src/llama.cpp/tool.cpp"
    assert man_p["tree"][tool] != man_s["tree"][tool] and man_p["files"] != man_s["files"]
    # cached: asked again, the same build, not configured again
    again = build_llamacpp("4747.0.0", cache_dir=tmp_path, patches=(usage_patch,))
    assert again.bin_dir == patched.bin_dir
    assert (tmp_path / "configured.txt").read_text(encoding="utf-8").count("configured") == 2
    # the manifest's word: this build is not the stock one, and not one with a patch pinned otherwise
    assert build_trust.problem(patched_dir, (usage_patch,)) is None
    assert "built with source patches" in build_trust.problem(patched_dir, ())
    assert "built with source patches none" in build_trust.problem(stock_dir, (usage_patch,))
    repinned = dataclasses.replace(usage_patch, sha256="1" * 64)
    patches.PATCHES[usage_patch.name] = repinned
    assert "not one lawbench pins now" in build_trust.problem(patched_dir)
    patches.PATCHES[usage_patch.name] = usage_patch
    # the run record names the patched build apart from the stock one
    base = {"name": "llama.cpp", "build_number": 4747, "backend": "cpu"}
    assert engine_key({**base, "patches": [usage_patch.record()]}) == f"llama.cpp b4747 cpu +{usage_patch.name}"
    assert engine_key(base) == "llama.cpp b4747 cpu"


def test_a_changed_patch_file_is_refused_naming_it_even_with_a_cached_build(tmp_path, usage_patch):
    plant_sdist(tmp_path, "4848.0.0")
    build_llamacpp("4848.0.0", cache_dir=tmp_path, jobs=2, patches=(usage_patch,))
    with open(usage_patch.path, "a", encoding="utf-8") as fh:
        fh.write("+    a line nobody reviewed\n")
    with pytest.raises(EngineError) as exc:
        build_llamacpp("4848.0.0", cache_dir=tmp_path, patches=(usage_patch,))
    msg = str(exc.value)
    assert f"source patch {usage_patch.path} hashes to sha256" in msg and usage_patch.sha256 in msg
    assert "refusing to build from a changed patch" in msg


def test_a_patch_that_does_not_apply_is_refused_and_leaves_no_half_patched_tree(tmp_path, usage_patch, monkeypatch):
    plant_sdist(tmp_path, "4949.0.0")
    stale = _write_patch(tmp_path, "tool.cpp", TOOL_CPP.replace("usage", "USAGE"), "int main() { return 1; }\n")
    monkeypatch.setitem(patches.PATCHES, stale.name, stale)
    # the first patch applies, the second does not: nothing is configured, no tree is left
    with pytest.raises(EngineError) as exc:
        build_llamacpp("4949.0.0", cache_dir=tmp_path, patches=(usage_patch, stale))
    msg = str(exc.value)
    assert f"source patch {stale.path} does not apply" in msg and "git apply exit 1" in msg
    assert "nothing was built from a half-patched tree" in msg
    key_dir = tmp_path / build_key(f"4949.0.0+{usage_patch.key}+{stale.key}", "cpu")
    assert not (key_dir / "src").exists() and not (key_dir / "build_info.json").exists()
    assert not (tmp_path / "configured.txt").exists()


def test_a_patch_name_lawbench_does_not_ship_is_refused_with_those_it_ships():
    with pytest.raises(LawbenchError, match="ships no source patch named 'nope'.*cuda-graphs-pre-volta"):
        patches.named(["nope"])
    with pytest.raises(LawbenchError, match="named twice"):
        patches.named([GRAPHS.name, GRAPHS.name])


# --------------------------------------------------------------------------- naming the patched engine


def test_an_engine_spec_names_a_patch():
    spec = parse_engine(f"llama.cpp+patch={GRAPHS.name}+env=GGML_CUDA_FORCE_GRAPHS=1", "--b")
    assert spec.patches == (GRAPHS.name,) and spec.bench_env == (("GGML_CUDA_FORCE_GRAPHS", "1"),)
    assert parse_engine("llama.cpp", "--a").patches == ()
    with pytest.raises(UsageError, match="--b 'llama.cpp\\+patch=nope'.*ships no source patch named 'nope'"):
        parse_engine("llama.cpp+patch=nope", "--b")
    with pytest.raises(UsageError, match="cannot be patched"):
        parse_engine(f"dir:/opt/llama/bin+patch={GRAPHS.name}", "--b")


def test_a_case_names_patches_lawbench_ships_and_runs_them_in_llama_bench_only():
    from lawbench.plugins.law4.bench_case import BenchCase

    assert BenchCase(n_gen=8, patches=[GRAPHS.name]).patches == [GRAPHS.name]
    with pytest.raises(ValidationError, match="ships no source patch named 'nope'"):
        BenchCase(n_gen=8, patches=["nope"])
    with pytest.raises(ValidationError, match="patches: the engine switches are passed to llama-bench only"):
        BenchCase(n_gen=8, tool="batched-bench", patches=[GRAPHS.name])


def test_the_v14_arms_run_one_patched_build_with_the_switch_set_and_unset():
    from importlib import resources as ir

    from lawbench.core.claims.loading import load_anchors
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.plugins.law4.measure import arm_cases

    loaded = load_anchors([ir.files("lawbench.anchors.law4") / "gtx1060.toml"], laws=["law4"],
                          profiles=load_profiles()).anchors
    v14 = [la.anchor for la in loaded if la.anchor.id.endswith(".v14")]
    assert {a.value for a in v14} == {1.032, 1.0} and all(a.profiles == ["gtx1060"] for a in v14)
    for anchor in v14:
        arms = arm_cases(anchor)
        assert arms["a"].bench.patches == arms["b"].bench.patches == [GRAPHS.name], anchor.id
        assert arms["a"].bench.env == {"GGML_CUDA_FORCE_GRAPHS": "1"} and arms["b"].bench.env == {}, anchor.id
        assert "reg.v-14" in anchor.claims


class _Built:
    """build_llamacpp stand-in: which builds a run asked for."""

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, version, **kwargs):
        from lawbench.core.engines.llamacpp import LlamaCpp

        self.calls.append({"version": version, **kwargs})
        names = tuple(p.name for p in kwargs.get("patches", ()))
        info = {"build_number": 10103, "commit": "unknown",
                **({"patches": [p.record() for p in kwargs["patches"]]} if names else {})}
        return LlamaCpp(bin_dir=Path(f"/builds/{'+'.join(names) or 'stock'}/build/bin"), version=version,
                        backend=kwargs.get("backend", "cpu"), build_info=info)


def test_a_run_hands_an_arm_the_patched_build_of_its_own_source(monkeypatch):
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.laws.resources import Resources
    from lawbench.plugins.law4.case import Law4Case
    from lawbench.plugins.law4.measure import engine_for

    built = _Built()
    monkeypatch.setattr(build, "build_llamacpp", built)
    monkeypatch.setattr(Resources, "lock", lambda self: None)
    monkeypatch.delenv("LAWBENCH_LLAMA_DIR", raising=False)
    monkeypatch.delenv("LAWBENCH_LLAMA_VERSION", raising=False)
    res = Resources(profile=load_profiles()["gtx1060"])
    patched_case = Law4Case.model_validate({"quantity": "decode_tok_s", "model": "gguf:x",
                                            "bench": {"n_gen": 8, "patches": [GRAPHS.name]}})
    stock_case = Law4Case.model_validate({"quantity": "decode_tok_s", "model": "gguf:x", "bench": {"n_gen": 8}})
    patched, stock = engine_for(res, patched_case), engine_for(res, stock_case)
    assert engine_for(res, patched_case) is patched  # built once a run
    assert patched.bin_dir != stock.bin_dir
    # the same source either way: the profile's engine of record (b10098 as 10103.0.0), for sm_61
    assert [c["version"] for c in built.calls] == ["10103.0.0", "10103.0.0"]
    assert built.calls[0]["patches"] == (GRAPHS,) and "patches" not in built.calls[1]  # the stock build
    assert all(c["backend"] == "cuda" and c["cuda_arch"] == "61" for c in built.calls)
    info = res.engine_info()
    assert info["bin_dir"] == str(stock.bin_dir) and "patches" not in info
    assert info["patched_builds"][0]["patches"] == [GRAPHS.name]
    assert info["patched_builds"][0]["bin_dir"] == str(patched.bin_dir)


def test_a_runner_s_own_build_cannot_be_patched(tmp_path, monkeypatch):
    from lawbench.core.laws.resources import Resources

    monkeypatch.setattr(Resources, "lock", lambda self: None)
    res = Resources(llama_dir=str(tmp_path))
    with pytest.raises(EngineError) as exc:
        res.llama(patches=(GRAPHS.name,))
    assert "source patch cuda-graphs-pre-volta" in str(exc.value) and str(tmp_path) in str(exc.value)
    assert "cannot patch" in str(exc.value)
    with pytest.raises(EngineError, match="ships no source patch named 'nope'"):
        Resources(llama_dir=str(tmp_path)).llama(patches=("nope",))


# --------------------------------------------------------------------------- nightly: the real patched build


@pytest.mark.integration
@pytest.mark.serial
@pytest.mark.nightly  # a second full llama.cpp build (about 10 min on 2 cores), then from the cache
def test_real_patched_build_runs_an_interleaved_ratio_of_its_switch(llama_stock, tmp_path):
    """The stand-in for the gtx1060's V-14 anchors: the same code (bench.patches -> the run's
    patched build -> interleaved llama-bench arms with the switch set and unset) on this CPU,
    where the switch changes nothing, so the ratio of the arms sits at 1."""
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.laws.resources import Resources
    from lawbench.core.models import Verdict
    from lawbench.plugins.law4.law import Law4
    from lawbench.testing import evaluate_anchor, make_anchor

    patched = build_llamacpp(patches=(GRAPHS,), progress=None)
    key_dir = patched.bin_dir.parent.parent
    assert key_dir != llama_stock.bin_dir.parent.parent and f"+{GRAPHS.key}" in key_dir.name
    assert "force_graphs" in (key_dir / "src" / "llama.cpp" / CUDA_FILE).read_text(encoding="utf-8")
    assert patched.build_info["patches"] == [GRAPHS.record()] and patched.build_number == 11434
    manifest = json.loads((key_dir / build_trust.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["patches"] == [GRAPHS.record()] and build_trust.problem(key_dir, (GRAPHS,)) is None
    case = {"quantity": "decode_tok_s", "model": "gguf:syn-25m-q4_0",
            "bench": {"n_gen": 16, "reps": 3, "patches": [GRAPHS.name]}}
    anchor = make_anchor(id="law4.test.patched-switch", law="law4", claim="test", quantity="decode_ratio",
                         unit="x", kind="ratio", value=1.0, band={"rel": 0.10}, profiles=["cpu"], case=case,
                         arms={"a": {"bench": {"env": {"GGML_CUDA_FORCE_GRAPHS": "1"}}}, "b": {}},
                         budget={"min_samples": 3, "max_samples": 6, "batch": 3, "timeout_s": 600},
                         provenance={"seed": "000_4a91008eeaefec79.txt", "register_id": "V-14", "quote": "test",
                                     "band_rationale": "test"})
    res = Resources(profile=load_profiles()["cpu"])
    try:
        r = evaluate_anchor(anchor, Law4(), profile=load_profiles()["cpu"], resources=res)
        # one binary, a switch a CPU build never reads: the arms cannot differ, so the ratio's interval
        # holds 1 (on a busy 2-core box it may be too wide to pass: VOID, never FAIL)
        print(f"patched build, switch set / unset on CPU: {r.measured:.3f} {r.interval} {r.verdict.value}")
        assert r.verdict in (Verdict.PASS, Verdict.VOID), r.reason
        assert r.interval[0] <= 1.0 <= r.interval[1], r.reason
        protocol = r.measurement.protocol
        assert protocol["patches"] == {"a": [GRAPHS.name], "b": [GRAPHS.name]}
        assert protocol["bin_dirs"] == {"a": str(patched.bin_dir), "b": str(patched.bin_dir)}
        assert res.engine_info()["patched_builds"][0]["sources"] == [GRAPHS.record()]
    finally:
        res.close()


@pytest.fixture(scope="module")
def llama_stock():
    if os.environ.get("LAWBENCH_LLAMA_DIR"):
        pytest.skip("a runner's own build cannot be patched; the nightly builds lawbench's own")
    return build_llamacpp(progress=None)
