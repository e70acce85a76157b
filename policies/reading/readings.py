"""Reading the values the rules compare, failing closed: what was written, what is a default, what cannot be read.

A mandatory rule that cannot read a field it needs must say so (a finding at the rule's level) and still
check everything it can read; no message may quote a value the user did not write unless it says it is a
default. :class:`Seconds` carries those three cases, and :func:`read_retry` reads a Scheduler job's retry
settings into the :class:`~scheduler_dedup.handler.schedule.retry_windows.RetryPolicy` the component also uses, with
unreadable durations counted at their lowest (0 s), so "at least" comparisons stay true.

Durations are what Cloud Scheduler and Cloud Run accept: a protobuf ``Duration`` in JSON, seconds with
up to nine fractional digits ending in ``s`` ("3.5s"; Scheduler REST reference, ``RetryConfig`` and
``Job.attemptDeadline``). ``"1m"`` is not one: pulumi-gcp passes the string through to the API, which
refuses it, so it is reported as unreadable with the spelling to use (``"60s"``), never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler_dedup.handler.schedule.retry_windows import (
    APP_ENGINE_TARGET,
    ATTEMPT_DEADLINES,
    HTTP_TARGET,
    RetryPolicy,
    retry_window_seconds,
)
from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.model import InvalidDuration, duration_seconds, get, is_unknown, number


@dataclass(frozen=True)
class Seconds:
    """One duration as a rule sees it.

    Attributes:
        value: seconds; None when unknown (preview) or unreadable.
        shown: how a message quotes it: ``"60s"``, or ``"180s (Scheduler's default)"`` when unset.
        problem: why it cannot be read (a message naming the field and the fix), else None.
        unknown: the engine does not know it yet (preview): no finding either way.
    """

    value: float | None
    shown: str
    problem: str | None = None
    unknown: bool = False


def _fmt(seconds: float) -> str:
    return f"{seconds:g}s"


def read_seconds(props: Any, path: str, default: float, default_source: str) -> Seconds:
    """The duration at ``path`` of ``props`` (``"180s"`` or a number of seconds).

    Args:
        props: resource properties (engine names).
        path: dotted path, also the field name quoted in messages.
        default: seconds the platform uses when the field is unset.
        default_source: whose default it is, e.g. ``"Scheduler's"``.
    """
    raw = get(props, path)
    if is_unknown(raw):
        return Seconds(None, path, unknown=True)
    if raw is None or raw == "":
        return Seconds(default, f"{_fmt(default)} ({default_source} default)")
    try:
        value = duration_seconds(raw)
    except InvalidDuration as error:
        return Seconds(None, repr(raw), f"{path} {error} (Scheduler and Cloud Run take a protobuf Duration)")
    assert isinstance(value, float)
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        return Seconds(None, repr(raw), f"{path} {raw!r} is not a non-negative duration: write e.g. \"60s\"")
    return Seconds(value, _fmt(value))


@dataclass(frozen=True)
class RetryReading:
    """A job's attempt deadline and retry config as far as they can be read.

    Attributes:
        deadline: ``attemptDeadline``.
        policy: the retry policy with Scheduler's defaults for unset fields and 0 for unreadable ones
            (the lowest they could be), or None when a value is unknown (preview).
        problems: one message per unreadable field.
    """

    deadline: Seconds
    policy: RetryPolicy | None
    problems: list[str] = field(default_factory=list)

    def window_at_least(self) -> float | None:
        """A lower bound of the retry window, seconds (exact when nothing is unreadable); None if unknown."""
        if self.policy is None or self.deadline.unknown:
            return None
        return float(retry_window_seconds(self.policy, self.deadline.value or 0.0))


def _count(retry: Any, path: str, default: int, problems: list[str]) -> int | None:
    raw = get(retry, path)
    if raw is None:
        return default
    if is_unknown(raw):
        return None
    value = number(raw)
    if not isinstance(value, float) or value != int(value) or value < 0:
        problems.append(f"retryConfig.{path} {raw!r} is not a whole number >= 0: write e.g. {default}")
        return 0
    return int(value)


def target_kind(job_props: Mapping[str, Any]) -> str | None:
    """The job's target kind as :data:`~scheduler_dedup.handler.schedule.retry_windows.ATTEMPT_DEADLINES` keys it: ``http``,
    ``app_engine``, or None (a Pub/Sub target, whose attempt deadline Scheduler ignores)."""
    if get(job_props, "httpTarget") is not None:
        return HTTP_TARGET
    if get(job_props, "appEngineHttpTarget") is not None:
        return APP_ENGINE_TARGET
    return None


def read_attempt_deadline(job_props: Mapping[str, Any]) -> Seconds:
    """The job's ``attemptDeadline``, with its target kind's default when unset (and, for an App Engine target,
    when ``0s``, which Scheduler reads as the default: 10 minutes for an automatically scaled standard app)."""
    deadlines = ATTEMPT_DEADLINES[target_kind(job_props) or HTTP_TARGET]
    reading = read_seconds(job_props, "attemptDeadline", deadlines.default_seconds, "Scheduler's")
    if deadlines.zero_is_default and reading.value == 0:
        return Seconds(deadlines.default_seconds, f"{_fmt(deadlines.default_seconds)} (0s: Scheduler's default)")
    return reading


def read_retry(job_props: Mapping[str, Any]) -> RetryReading:
    """Read ``attemptDeadline`` and ``retryConfig`` of a Scheduler job (Scheduler's defaults for unset fields:
    deadline 180 s (App Engine targets 600 s), retryCount 0, minBackoff 5 s, maxBackoff 3600 s, maxDoublings 5,
    maxRetryDuration 0)."""
    deadline = read_attempt_deadline(job_props)
    problems = [deadline.problem] if deadline.problem else []
    retry = get(job_props, "retryConfig")
    if is_unknown(retry):
        return RetryReading(deadline, None, problems)
    retry = retry or {}
    durations = {
        key: read_seconds(retry, key, default, "Scheduler's")
        for key, default in (("minBackoffDuration", limits.SCHEDULER_MIN_BACKOFF_DEFAULT_S),
                             ("maxBackoffDuration", limits.SCHEDULER_MAX_BACKOFF_DEFAULT_S),
                             ("maxRetryDuration", 0.0))
    }
    for reading in durations.values():
        if reading.problem:
            problems.append(f"retryConfig.{reading.problem}")
    count = _count(retry, "retryCount", limits.SCHEDULER_RETRY_COUNT_DEFAULT, problems)
    doublings = _count(retry, "maxDoublings", int(limits.SCHEDULER_MAX_DOUBLINGS_DEFAULT), problems)
    if count is None or doublings is None or any(r.unknown for r in durations.values()):
        return RetryReading(deadline, None, problems)
    policy = RetryPolicy(
        retry_count=count,
        max_retry_duration_seconds=durations["maxRetryDuration"].value or 0.0,
        min_backoff_seconds=durations["minBackoffDuration"].value or 0.0,
        max_backoff_seconds=durations["maxBackoffDuration"].value or 0.0,
        max_doublings=doublings,
    )
    return RetryReading(deadline, policy, problems)
