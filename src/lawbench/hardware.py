"""The machine a law measures on: its fingerprint, the state a sample was taken in, the page
cache of a model file, and the GPU memory an engine process holds (per PID)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from lawbench._surface import lazy

_EXPORTS = {
    "fingerprint_machine": "lawbench.core.hardware.detect",
    "match_profile": "lawbench.core.hardware.detect",
    "environment_snapshot": "lawbench.core.hardware.detect",
    "pagecache": "lawbench.core.hardware.pagecache:",  # residency(path), evict(path)
    "PerPidMemory": "lawbench.core.hardware.gpu_memory",
    "PeakSampler": "lawbench.core.hardware.gpu_memory",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

if TYPE_CHECKING:
    from lawbench.core.hardware import pagecache  # noqa: F401
    from lawbench.core.hardware.detect import environment_snapshot, fingerprint_machine, match_profile  # noqa: F401
    from lawbench.core.hardware.gpu_memory import PeakSampler, PerPidMemory  # noqa: F401
