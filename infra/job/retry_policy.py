"""The Scheduler retry policy (``retry``) with the component's defaults, and why a policy whose retries end before
a crashed attempt's lease is refused (RetryConfig:
https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#RetryConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.schedule.retry_windows import (
    RetryPolicy,
    max_retry_duration_to_recover,
    min_backoff_to_recover,
    crash_unrecovered,
    retries_described,
)
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.args import RetryConfigArgs, input_keys
from scheduler_dedup.infra.job.inputs import Problems, read_int

RETRY_COUNT_MAX = 5
#: The component retries by default (Scheduler's default is 0): a crashed or failed attempt's run is retried.
DEFAULT_RETRY_COUNT = 5
DEFAULT_MIN_BACKOFF_SECONDS = 5
#: Default retries span this many times the lease, so a crashed attempt's run is taken over with room to spare.
CRASH_RECOVERY_FACTOR = 1.5
DEFAULT_MAX_BACKOFF_SECONDS = 3600
DEFAULT_MAX_DOUBLINGS = 5
#: The keys of ``retry``: those of :class:`~scheduler_dedup.infra.args.RetryConfigArgs`.
RETRY_KEYS = frozenset(input_keys(RetryConfigArgs))


def crash_recovery_field(retry: Any) -> str:
    """The input to name when the retries end before a crashed attempt's lease: the one the user wrote."""
    given = retry if isinstance(retry, Mapping) else {}
    for key in RetryConfigArgs.__annotations__:  # in the order of the args
        if key in given:
            return f"retry.{key}"
    return "lease_seconds"


def crash_recovery_fix(retry: RetryPolicy, lease: int, attempt_deadline: int) -> str:
    """Why the retries end before a crashed attempt's lease, saying what Scheduler will do, and the fixes."""
    counted = RetryPolicy(max(retry.retry_count, 1), retry.max_retry_duration_seconds, retry.min_backoff_seconds,
                          retry.max_backoff_seconds, retry.max_doublings)
    hint = min_backoff_to_recover(counted, lease, attempt_deadline)
    fixes = [f"set retry.min_backoff_seconds to at least {hint}" + (" and retry.retry_count to at least 1"
                                                                    if retry.retry_count == 0 else "")
             if hint is not None else "raise retry.retry_count and retry.max_backoff_seconds"]
    duration = max_retry_duration_to_recover(retry, lease, attempt_deadline)
    if duration is not None:
        fixes.append(f"set retry.max_retry_duration_seconds to at least {duration}")
    return (f"a crashed attempt holds its run for up to lease_seconds ({lease} s), but "
            f"{retries_described(retry, attempt_deadline)}: {crash_unrecovered(retry, attempt_deadline)}. To fix it, {'; or '.join(fixes)}; or lower lease_seconds (the retries must come until at "
            "least the lease has passed)")


def resolve_retry_policy(retry: Any, lease_seconds: int, attempt_deadline_seconds: int) -> RetryPolicy:
    """Resolve ``retry`` with the component's defaults and check RetryConfig's limits.

    https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#RetryConfig:
    retryCount "Values greater than 5 and negative values are not allowed"; maxBackoffDuration
    default 1 h; maxDoublings default 5; maxRetryDuration default 0 (unlimited). The component's own
    defaults make a crashed attempt's run recoverable: ``retry_count`` 5 (Scheduler's is 0) and
    ``min_backoff_seconds`` the smallest whole number (at least 5, Scheduler's default) for which the
    retries span 1.5 × ``lease_seconds`` (15 s for the default 300 s lease: waits 15, 30, 60, 120, 240 s).
    """
    if not isinstance(retry, Mapping):
        raise DedupConfigError("retry", f"must be a mapping, got {retry!r}")
    unknown = sorted(set(retry) - RETRY_KEYS)
    if unknown:
        raise DedupConfigError(f"retry.{unknown[0]}", f"unknown key; valid keys are {', '.join(sorted(RETRY_KEYS))}")
    problems = Problems()  # every field's problem at once

    def whole(key: str, default: int, low: int = 0, high: int | None = None, meaning: str = "") -> int:
        value = read_int(retry, key, default, field=f"retry.{key}")
        if value < low or (high is not None and value > high):
            bounds = f"use {low} to {high}" if high is not None else f"use {low} or more"
            raise DedupConfigError(f"retry.{key}", f"{value} is outside Cloud Scheduler's range; {bounds}{meaning}")
        return value

    count = problems.run(lambda: whole("retry_count", DEFAULT_RETRY_COUNT, 0, RETRY_COUNT_MAX), DEFAULT_RETRY_COUNT)
    duration = problems.run(lambda: whole("max_retry_duration_seconds", 0, meaning=" (0 means unlimited)"), 0)
    max_backoff = problems.run(lambda: whole("max_backoff_seconds", DEFAULT_MAX_BACKOFF_SECONDS),
                               DEFAULT_MAX_BACKOFF_SECONDS)
    doublings = problems.run(lambda: whole("max_doublings", DEFAULT_MAX_DOUBLINGS), DEFAULT_MAX_DOUBLINGS)
    spanning = min_backoff_to_recover(RetryPolicy(count, duration, 0, max_backoff, doublings),
                                      CRASH_RECOVERY_FACTOR * lease_seconds, attempt_deadline_seconds)
    default_min = max(DEFAULT_MIN_BACKOFF_SECONDS, spanning or 0) if spanning is not None else DEFAULT_MIN_BACKOFF_SECONDS
    default_min = min(default_min, max_backoff)
    min_backoff = problems.run(lambda: whole("min_backoff_seconds", default_min), default_min)
    bad = {error.field for error in problems.errors}
    if not bad & {"retry.min_backoff_seconds", "retry.max_backoff_seconds"} and min_backoff > max_backoff:
        problems.add(DedupConfigError(
            "retry.min_backoff_seconds", f"{min_backoff} s is longer than max_backoff_seconds ({max_backoff} s)"))
    problems.raise_any()
    return RetryPolicy(count, duration, min_backoff, max_backoff, doublings)
