"""How many cores a process may use: the default size of the process pools that spread work."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a container's CPU set)
    where the system has one, else the machine's count (``os.cpu_count()`` counts every core,
    also those this process may not use)."""
    count = getattr(os, "process_cpu_count", None)  # Python 3.13
    if count is not None:
        return count() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this system
        return os.cpu_count() or 1
