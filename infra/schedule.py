"""Retry windows as Cloud Scheduler has them (RetryConfig): one implementation shared by the component and
the policy pack. Schedule and time zone rules live in :mod:`scheduler_dedup.handler.cron`, which the
handler uses too.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds the Cloud Run request timeout exceeds the attempt deadline by default: the component's default and
#: the pack's ``scheduler-attempt-deadline-margin`` threshold, so Scheduler's cut-off and Cloud Run's do not race.
REQUEST_TIMEOUT_MARGIN_SECONDS = 15


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


def crash_recovery_seconds(retry: RetryPolicy) -> float:
    """Least time, in seconds, from a failed attempt until Scheduler's last retry of the run starts.

    The sum of the waits before retries 1..``retry_count`` (each retry of a run whose claim is held answers
    409 at once, so no attempt deadline adds to it). ``max_retry_duration_seconds`` may keep retries going
    longer, but Scheduler's docs do not say when the last one starts, so it is not counted; with
    ``retry_count`` 0 no retry comes at all (RetryConfig.retryCount: "a job attempt will not be retried").

    **Crash recovery condition.** An attempt that dies holding the claim (instance killed, Firestore down at
    completion) blocks its run until its lease expires, at most ``lease_seconds`` after the crash (the
    lease was renewed at most a third of it earlier). A later retry takes the run over and runs it only if
    one still comes: ``crash_recovery_seconds(retry) >= lease_seconds``, for a crash during the first attempt.
    A job that runs past its attempt deadline and crashes later may outlive every retry.
    """
    return float(sum(retry.backoff_seconds(i) for i in range(retry.retry_count)))


def recovers_crash(retry: RetryPolicy, lease_seconds: float) -> bool:
    """True when a retry still comes after a crashed attempt's lease expires (see :func:`crash_recovery_seconds`)."""
    return crash_recovery_seconds(retry) >= lease_seconds


def min_backoff_to_recover(retry: RetryPolicy, lease_seconds: float) -> int | None:
    """The smallest whole ``min_backoff_seconds`` (same count, doublings and cap) for which :func:`recovers_crash`
    holds, or None when no value does (too few retries under ``max_backoff_seconds``)."""
    if retry.retry_count == 0 or retry.max_backoff_seconds * retry.retry_count < lease_seconds:
        return None
    low, high = 1, int(max(lease_seconds, 1))
    while low < high:
        mid = (low + high) // 2
        if recovers_crash(RetryPolicy(retry.retry_count, retry.max_retry_duration_seconds, mid,
                                      retry.max_backoff_seconds, retry.max_doublings), lease_seconds):
            high = mid
        else:
            low = mid + 1
    return low
