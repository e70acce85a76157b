"""Retry windows as Cloud Scheduler has them (RetryConfig): one implementation shared by the component and
the policy pack. Schedule and time zone rules live in :mod:`scheduler_dedup.handler.cron`, which the
handler uses too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """A resolved Scheduler retry policy (RetryConfig with its defaults applied); durations in seconds.

    The component builds it from its inputs (whole seconds), the policy pack from a job's engine
    properties, so both judge the retry window with one formula.
    """

    retry_count: int
    max_retry_duration_seconds: float
    min_backoff_seconds: float
    max_backoff_seconds: float
    max_doublings: int

    def backoff_seconds(self, retry_index: int) -> float:
        """Wait before retry number ``retry_index`` (0-based), in seconds.

        Scheduler's rule (RetryConfig.maxDoublings): the interval starts at ``min_backoff``, doubles
        ``max_doublings`` times, then grows linearly by ``min_backoff * 2**max_doublings``, and is
        capped at ``max_backoff``.
        """
        if retry_index <= self.max_doublings:
            wait = self.min_backoff_seconds * 2**retry_index
        else:
            wait = self.min_backoff_seconds * 2**self.max_doublings * (retry_index - self.max_doublings + 1)
        return min(wait, self.max_backoff_seconds)


def retry_window_seconds(retry: RetryPolicy, attempt_deadline_seconds: float) -> float:
    """Longest time, in seconds, from a run's first attempt until its last retry can end.

    With ``retry_count`` retries: every attempt's deadline plus each backoff wait. With
    ``max_retry_duration_seconds`` > 0 Scheduler retries until *both* limits are reached
    (RetryConfig.maxRetryDuration), so the window is the larger of the two, plus one deadline; this
    is applied even with ``retry_count`` 0, erring towards a longer window (longer retention).
    The run record must outlive this window, or a late retry would find no record and run again.
    """
    by_count = (retry.retry_count + 1) * attempt_deadline_seconds + sum(
        retry.backoff_seconds(i) for i in range(retry.retry_count)
    )
    if retry.max_retry_duration_seconds > 0:
        return max(by_count, retry.max_retry_duration_seconds + attempt_deadline_seconds)
    return by_count
