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
from pathlib import Path
from typing import Callable, Optional

from lawbench.core.engines import build_trust
from lawbench.core.engines.build import build_llamacpp, wanted_tools
from lawbench.core.engines.llamacpp import LlamaCpp, build_key
from lawbench.core.engines.sources import VendoredSource
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


def build_request(key_dir: Path) -> Optional[dict]:
    """How to make the build in ``key_dir`` again (build_llamacpp's arguments), read from its
    build_info.json when that is the one its manifest names; None otherwise."""
    if build_trust.problem(key_dir) is not None:
        return None
    try:
        record = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
        request = {"version": str(record["version"]), "backend": str(record["backend"]),
                   "cache_dir": key_dir.parent, "commit": record.get("commit")}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("cuda_arch"):
        request["cuda_arch"] = str(record["cuda_arch"])
    source = record.get("source")
    if isinstance(source, dict) and source.get("package"):
        request["source"] = VendoredSource(str(source["version"]), str(source["package"]))
        request["version"] = "11434.0.0"  # unused with a source (build_llamacpp's docstring)
    key = request["source"].key if "source" in request else request["version"]
    # the arguments must lead back to this folder, or a rebuild would land beside it
    return request if build_key(key, request["backend"], request.get("cuda_arch", "90")) == key_dir.name else None


