"""A build's extra tools, asked for by the engine module about to run one (llama-server,
llama-imatrix, llama-batched-bench): a lawbench build made without the tool gets it compiled
into its own tree then (lawbench.core.engines.build says how), so only a selection that runs the
tool pays for it; a runner's own build without it is refused with the cmake target to build.

The tool is compiled only from a tree whose every file is the one the build's signed manifest
names (build_trust.tree_problem, checked under the build's lock): a planted source file, CMake
cache or object is never compiled into a tool that the manifest then vouches for. A tree that fails
is set aside and the build made again, with the tool (``build_llamacpp(tools=...)``).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from lawbench.core.engines import build_trust
from lawbench.core.engines.build import (EXTRA_TOOLS, _run_logged, _say, build_llamacpp, build_targets,
                                         build_timeout, wanted_tools)
from lawbench.core.engines.llamacpp import TOOLS, LlamaCpp, build_key
from lawbench.core.errors import EngineError


def require_tool(llama: LlamaCpp, tool: str,
                 progress: Optional[Callable[[str], None]] = None) -> Path:
    """The path of ``tool`` in ``llama``'s build, compiled now into that build's own tree when
    it is a lawbench build made without it (under the build's lock, as a build is; the build is
    made again first when its tree is not the one its manifest names).

    :raises EngineError: a runner's own build (or a source tree) without the tool, a lawbench build
        that is no longer the one its manifest names, or the compile failed (names the build log).
    """
    wanted_tools([tool])
    path = Path(llama.bin_dir) / tool
    if path.is_file():
        return path
    key_dir = Path(llama.bin_dir).parent.parent
    info_file = key_dir / "build_info.json"
    if info_file.is_file() and (key_dir / "build" / "bin").resolve() == Path(llama.bin_dir).resolve():
        request = build_request(key_dir)
        if request is None:
            raise EngineError(f"the llama.cpp build in {key_dir} lacks {tool} and is not the build lawbench "
                              f"made ({build_trust.problem(key_dir)}); run again and lawbench rebuilds it")
        if progress is None:
            from lawbench.core.progress import report as progress
        build_llamacpp(**request, tools=[tool], progress=progress)
        if path.is_file():
            return path
    raise EngineError(f"the llama.cpp build at {llama.bin_dir} has no {tool}: lawbench adds it to its own "
                      f"builds when a run needs it; a runner's own build needs the target "
                      f"(`cmake --build <build> --target {tool}`)")


def missing_targets(key_dir: Path, extra: Sequence[str] = ()) -> list[str]:
    """The targets a finished build in ``key_dir`` lacks, or has without its record saying how
    they were built, among the three and the asked-for ``extra`` tools its source has."""
    try:
        record = json.loads((key_dir / "build_info.json").read_text())
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
    record = json.loads(info_file.read_text())
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
    with open(log_path, "a") as log:
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
    tmp.write_text(json.dumps(record, indent=2))
    os.replace(tmp, info_file)
    build_trust.record_added(key_dir)  # the new tools join the manifest, or the next run sets the build aside


def extra_targets(key_dir: Path) -> list[str]:
    """The extra tools a finished build recorded (so a build made again keeps them)."""
    try:
        targets = json.loads((key_dir / "build_info.json").read_text()).get("targets", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [t for t in targets if isinstance(t, str) and t in EXTRA_TOOLS]


def build_request(key_dir: Path) -> Optional[dict]:
    """How to make the build in ``key_dir`` again (build_llamacpp's arguments), read from its
    build_info.json when that is the one its manifest names; None otherwise."""
    if build_trust.problem(key_dir) is not None:
        return None
    try:
        record = json.loads((key_dir / "build_info.json").read_text())
        request = {"version": str(record["version"]), "backend": str(record["backend"]),
                   "cache_dir": key_dir.parent, "commit": record.get("commit")}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("cuda_arch"):
        request["cuda_arch"] = str(record["cuda_arch"])
    source = record.get("source")
    if isinstance(source, dict) and source.get("package"):
        from lawbench.core.engines.sources import VendoredSource

        request["source"] = VendoredSource(str(source["version"]), str(source["package"]))
        request["version"] = "11434.0.0"  # unused with a source (build_llamacpp's docstring)
    key = request["source"].key if "source" in request else request["version"]
    # the arguments must lead back to this folder, or a rebuild would land beside it
    return request if build_key(key, request["backend"], request.get("cuda_arch", "90")) == key_dir.name else None


