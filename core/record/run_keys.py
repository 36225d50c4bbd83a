"""What makes two runs' results comparable beyond the anchor id: the profile and the engine build.

compare-llama-bench's rule — join on the properties that make runs alike, and say when they are
not — applied to lawbench: core/history/compare.py, core/history/drift.py and the HTML report all key on these.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class RunKeys:
    """What a run's results join on beyond the anchor id, and whether the run counts as evidence."""

    profile: str
    engine: str  # engine_key(record.engine)
    profile_matches: bool  # the machine matched the profile: its measurements speak for it
    interrupted: Optional[str]
    finished: Optional[str]
    # Imported from a contribution bundle or with `history import --contribution`: someone else's
    # machine, whatever its record says; never evidence for a runner (drift, stale, `latest`).
    contribution: bool = False
    mode: str = "run"  # RunRecord.mode: an "ab" or "plant" run is no night of its runner (stale, gate)


def engine_key(engine: Optional[dict[str, Any]]) -> str:
    """A short, stable name of the engine build a run measured with: two runs' measurements are
    comparable only under the same key. "llama.cpp b11434 cpu", "+ sm90" for a CUDA build, "@ <commit>"
    when the build knows its commit; "no engine" for a run that measured nothing (predictions only).
    """
    if not engine:
        return "no engine"
    name = str(engine.get("name") or "engine")
    number = engine.get("build_number")
    build = f"b{number}" if isinstance(number, int) else str(engine.get("version") or "?")
    parts = [name, build, str(engine.get("backend") or "unknown")]
    if engine.get("cuda_arch"):
        parts.append(f"sm{engine['cuda_arch']}")
    commit = str(engine.get("commit") or "")
    if commit and commit != "unknown":
        parts.append(f"@{commit[:10]}")
    patches = engine.get("patches")  # a build of patched source (core/engines/patches.py) is another build
    if isinstance(patches, list) and patches:
        parts.append("+" + "+".join(str(p.get("name") if isinstance(p, dict) else p) for p in patches))
    return " ".join(parts)

