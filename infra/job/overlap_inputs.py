"""The ``overlap`` and ``catch_up_window_seconds`` inputs, checked at preview with the handler's own rules
(:mod:`scheduler_dedup.handler.schedule.overlap_policy`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.schedule.overlap_policy import (DEFAULT_OVERLAP, catch_up_window_problem,
                                                          overlap_policy_problem)
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import read_int


def resolve_overlap(args: Mapping[str, Any]) -> str:
    """The overlap policy (default ``allow``).

    Raises:
        DedupConfigError: not one of allow, skip, buffer_one, replace.
    """
    value = args.get("overlap", DEFAULT_OVERLAP)
    problem = overlap_policy_problem(value if isinstance(value, str) else repr(value), "overlap")
    if problem:
        raise DedupConfigError("overlap", problem.split(": ", 1)[1])
    return str(value)


def resolve_catch_up_window(args: Mapping[str, Any]) -> int:
    """The catch-up window in whole seconds (default 0: off).

    Raises:
        DedupConfigError: not a whole number, or outside 0..604800.
    """
    window = read_int(args, "catch_up_window_seconds", 0)
    problem = catch_up_window_problem(window, "catch_up_window_seconds")
    if problem:
        raise DedupConfigError("catch_up_window_seconds", problem.split(": ", 1)[1])
    return window
