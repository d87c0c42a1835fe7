"""The bounds of one KCL run and one worker process (see :mod:`konfig.build.workers`)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CPU_SECONDS = 60.0
DEFAULT_MEMORY_MIB = 2048
# the wall-clock limit is this many times the CPU limit, plus a constant: a loaded
# machine gives a process a fraction of a core, and only a task that waits (reads a
# pipe, sleeps) needs the wall limit at all
WALL_FACTOR = 4.0
WALL_EXTRA = 30.0


@dataclass(frozen=True)
class Limits:
    """Bounds for one KCL run (CPU seconds, wall seconds follow) and one worker (memory)."""

    cpu_seconds: float = DEFAULT_CPU_SECONDS
    memory_mib: int = DEFAULT_MEMORY_MIB
    wall_extra: float = WALL_EXTRA

    def wall_seconds(self, cpu_budget: float) -> float:
        return cpu_budget * WALL_FACTOR + self.wall_extra
