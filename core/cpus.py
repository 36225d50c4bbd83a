"""How many CPUs this process may run on (its affinity mask, not the machine's core count)."""
from __future__ import annotations

import os


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
