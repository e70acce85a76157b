"""CPU and memory of each Cloud Run instance (``cpu``, ``memory``), within Cloud Run's limits.

* CPU: 1, 2, 4, 6 or 8; less than 1 requires concurrency 1 (https://cloud.google.com/run/docs/configuring/services/cpu),
  and the handler serves :data:`~scheduler_dedup.handler.service.server.SERVER_THREADS` requests at once.
* Memory per CPU (same page): 1 CPU up to 4 GiB, 2 up to 8 GiB, 4 from 2 to 16 GiB, 6 from 4 to 24 GiB, 8 from 4 to
  32 GiB; at least 512 MiB (second generation) and at most 32 GiB
  (https://cloud.google.com/run/docs/configuring/services/memory-limits, "Required minimum CPUs": "More than 4 GiB: 2,
  More than 8 GiB: 4, More than 16 GiB: 6, More than 24 GiB: 8"; "Maximum amount of memory": 32 Gi).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import Problems

DEFAULT_CPU = "1"
DEFAULT_MEMORY = "512Mi"
MIB = 1024 * 1024
#: CPU -> (least, most) memory in MiB.
MEMORY_RANGE_MIB = {1: (512, 4096), 2: (512, 8192), 4: (2048, 16384), 6: (4096, 24576), 8: (4096, 32768)}
MIN_MEMORY_MIB, MAX_MEMORY_MIB = 512, 32768
MEMORY_PAGE = "https://cloud.google.com/run/docs/configuring/services/memory-limits"
CPU_PAGE = "https://cloud.google.com/run/docs/configuring/services/cpu"
#: The memory-limits page's "Required minimum CPUs" table, as a message says it.
_CPU_TABLE = "more than 4Gi needs cpu 2, more than 8Gi 4, more than 16Gi 6, more than 24Gi 8"
_UNITS = {"Mi": MIB, "Gi": 1024 * MIB, "M": 10**6, "G": 10**9}
_MEMORY_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Mi|Gi|M|G)$")


@dataclass(frozen=True)
class ContainerLimits:
    """Cloud Run ``resources.limits``: ``cpu`` and ``memory`` as given (None: Cloud Run's default)."""

    cpu: str | None = None
    memory: str | None = None

    def limits(self) -> dict[str, str] | None:
        """The ``limits`` map of the container, or None when neither is set."""
        found = {k: v for k, v in (("cpu", self.cpu), ("memory", self.memory)) if v is not None}
        return found or None


def _mib(size: int) -> str:
    return f"{size // 1024}Gi" if size >= 1024 and size % 1024 == 0 else f"{size}Mi"


def memory_bytes(memory: str) -> int:
    """``memory`` (``512Mi``, ``2Gi``, ``1G``) in bytes.

    Raises:
        ValueError: not a number with a unit Mi, Gi, M or G.
    """
    match = _MEMORY_RE.match(memory)
    if not match:
        raise ValueError(memory)
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def minimum_cpu_for(size_mib: float) -> int | None:
    """The fewest CPUs Cloud Run runs an instance of ``size_mib`` MiB of memory with (the memory-limits page's
    "Required minimum CPUs": more than 4 GiB needs 2, more than 8 GiB 4, more than 16 GiB 6, more than 24 GiB 8);
    None above the 32 GiB maximum."""
    return next((c for c, (_, high) in MEMORY_RANGE_MIB.items() if size_mib <= high), None)


def resolve_limits(cpu: Any, memory: Any) -> ContainerLimits:
    """``cpu`` and ``memory`` checked against Cloud Run's limits (module docstring), every problem at once.

    Raises:
        DedupConfigError: a CPU Cloud Run does not offer with concurrency above 1, a memory size it cannot read or
            outside 512Mi to 32Gi, or a combination outside the CPU's memory range; each names the field to change
            and a value that works (the CPU a memory size needs). :class:`DedupConfigErrors` for both fields.
    """
    problems = Problems()
    size_mib: float | None = None
    if memory is not None:
        try:
            size = memory_bytes(memory) if isinstance(memory, str) else -1
        except ValueError:
            size = -1
        if size < 0:
            problems.add(DedupConfigError("memory", f"{memory!r} is not a memory size: use e.g. 512Mi, 2Gi "
                                                    f"({MEMORY_PAGE})"))
        elif size > MAX_MEMORY_MIB * MIB:
            problems.add(DedupConfigError(
                "memory", f"{memory} is more than Cloud Run gives an instance: at most {_mib(MAX_MEMORY_MIB)}, with "
                          f"{minimum_cpu_for(MAX_MEMORY_MIB)} CPU; set memory to {_mib(MAX_MEMORY_MIB)} or less, "
                          f"with the CPU its size needs ({_CPU_TABLE}; {MEMORY_PAGE})"))
        elif size < MIN_MEMORY_MIB * MIB:
            problems.add(DedupConfigError("memory", f"{memory} is less than Cloud Run's least memory, "
                                                    f"{_mib(MIN_MEMORY_MIB)} (second generation): set memory to at "
                                                    f"least {_mib(MIN_MEMORY_MIB)} ({MEMORY_PAGE})"))
        else:
            size_mib = size / MIB
    if cpu is not None:
        cpu = str(cpu) if isinstance(cpu, (int, float)) and not isinstance(cpu, bool) else cpu
        if not isinstance(cpu, str) or cpu.removesuffix(".0") not in {str(c) for c in MEMORY_RANGE_MIB}:
            needs = minimum_cpu_for(size_mib) if size_mib is not None else None
            hint = f", at least {needs} for {memory} of memory" if needs and needs > 1 else ""
            problems.add(DedupConfigError("cpu", f"{cpu!r} is not a Cloud Run CPU for this handler: use 1, 2, 4, 6 or "
                                                 f"8{hint} (less than 1 needs concurrency 1, and the handler serves "
                                                 f"several requests at once; {CPU_PAGE})"))
        else:
            cpu = cpu.removesuffix(".0")
    problems.raise_any()
    cpus = int(cpu or DEFAULT_CPU)
    low, high = MEMORY_RANGE_MIB[cpus]
    size_mib = memory_bytes(memory or DEFAULT_MEMORY) / MIB
    if not low <= size_mib <= high:
        fit = next(c for c, (lo, hi) in MEMORY_RANGE_MIB.items() if lo <= size_mib <= hi)
        raise DedupConfigError(
            "cpu" if size_mib > high else "memory",
            f"{memory or DEFAULT_MEMORY} of memory with {cpus} CPU is outside Cloud Run's limits ({cpus} CPU takes "
            f"{_mib(low)} to {_mib(high)}): "
            + (f"set cpu to {fit}" if size_mib > high else f"set memory to at least {_mib(low)}, or cpu to {fit}")
            + f" ({MEMORY_PAGE})")
    return ContainerLimits(cpu, memory)
