"""Cloud Run instance bounds: ``max_instance_count`` and ``min_instance_count``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import read_int

DEFAULT_MAX_INSTANCE_COUNT = 3


def resolve_max_instances(args: Mapping[str, Any]) -> int:
    max_instances = read_int(args, "max_instance_count", DEFAULT_MAX_INSTANCE_COUNT)
    if max_instances < 1:
        raise DedupConfigError("max_instance_count", "must be at least 1")
    return max_instances


def resolve_min_instances(args: Mapping[str, Any], max_instances: int) -> int:
    min_instances = read_int(args, "min_instance_count", 0)
    if not 0 <= min_instances <= max_instances:
        raise DedupConfigError("min_instance_count", f"{min_instances} is outside 0 to max_instance_count "
                                                     f"({max_instances}): use 0, or 1 to keep an instance for long jobs")
    return min_instances
