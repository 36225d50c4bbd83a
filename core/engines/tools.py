"""A build's extra tools, asked for by the engine module about to run one (llama-server,
llama-imatrix, llama-batched-bench): a lawbench build made without the tool gets it compiled
into its own tree then (lawbench.core.engines.build says how), so only a selection that runs the
tool pays for it; a runner's own build without it is refused with the cmake target to build."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

from filelock import FileLock, Timeout

from lawbench.core.engines.build import (BUILD_LOCK_WAIT_S, _add_targets, _find_compilers, missing_targets,
                                         wanted_tools)
from lawbench.core.engines.llamacpp import LlamaCpp
from lawbench.core.errors import EngineError, LawbenchError


def require_tool(llama: LlamaCpp, tool: str,
                 progress: Optional[Callable[[str], None]] = None) -> Path:
    """The path of ``tool`` in ``llama``'s build, compiled now into that build's own tree when
    it is a lawbench build made without it (under the build's lock, as a build is).

    :raises EngineError: a runner's own build (or a source tree) without the tool, or the
        compile failed (the message names the build log).
    """
    wanted_tools([tool])
    path = Path(llama.bin_dir) / tool
    if path.is_file():
        return path
    key_dir = Path(llama.bin_dir).parent.parent
    info_file = key_dir / "build_info.json"
    if info_file.is_file() and (key_dir / "build" / "bin").resolve() == Path(llama.bin_dir).resolve():
        try:
            backend = json.loads(info_file.read_text()).get("backend", "cpu")
        except ValueError:
            backend = "cpu"
        if progress is None:
            from lawbench.core.progress import report as progress
        try:
            with FileLock(str(key_dir) + ".lock", timeout=BUILD_LOCK_WAIT_S):
                missing = missing_targets(key_dir, [tool])
                if missing:
                    _add_targets(key_dir, missing, _find_compilers(backend), None, progress)
        except Timeout:
            raise EngineError(f"gave up after {BUILD_LOCK_WAIT_S} s waiting for another job's llama.cpp "
                              f"build in {key_dir} (lock {key_dir}.lock)") from None
        except EngineError:
            raise
        except LawbenchError as exc:  # cmake or the compiler went missing since the build
            raise EngineError(str(exc)) from None
        if path.is_file():
            return path
    raise EngineError(f"the llama.cpp build at {llama.bin_dir} has no {tool}: lawbench adds it to its own "
                      f"builds when a run needs it; a runner's own build needs the target "
                      f"(`cmake --build <build> --target {tool}`)")
