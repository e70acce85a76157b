"""Retry windows as Cloud Scheduler has them (RetryConfig): one implementation shared by the component and
the policy pack. Schedule and time zone rules live in :mod:`scheduler_dedup.handler.schedule.cron`, which the
handler uses too.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds the Cloud Run request timeout exceeds the attempt deadline by default: the component's default and
#: the pack's ``scheduler-attempt-deadline-margin`` threshold, so Scheduler's cut-off and Cloud Run's do not race.
REQUEST_TIMEOUT_MARGIN_SECONDS = 15

#: Scheduler target kinds whose attempt deadline Scheduler bounds: ``http`` (``httpTarget``) and ``app_engine``
#: (``appEngineHttpTarget``).
HTTP_TARGET, APP_ENGINE_TARGET = "http", "app_engine"


@dataclass(frozen=True)
class AttemptDeadlineRange:
    """Cloud Scheduler's attempt deadline for one target kind, seconds (``Job.attemptDeadline``).

    Source: https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.attempt_deadline:
    "For HTTP targets, the default is 3 minutes. The deadline must be in the interval [15 seconds, 30 minutes]";
    for App Engine HTTP targets "between 15 seconds and 24 hours", where 0 (or unset) "indicates that the request
    has the default deadline", which "depends on the scaling type of the service: 10 minutes for standard apps
    with automatic scaling, 24 hours for standard apps with manual and basic scaling".

    Attributes:
        min_seconds, max_seconds: the allowed interval.
        default_seconds: what an unset deadline means (App Engine: an automatic-scaling standard app's).
        zero_is_default: ``0s`` means the default (App Engine targets) instead of being out of range.
    """

    min_seconds: float
    max_seconds: float
    default_seconds: float
    zero_is_default: bool = False

    def problem(self, seconds: float) -> str | None:
        """Why ``seconds`` is not an attempt deadline Scheduler takes for this kind, or None."""
        if self.zero_is_default and seconds == 0:
            return None
        if self.min_seconds <= seconds <= self.max_seconds:
            return None
        return f"{seconds:g} s is outside {self.min_seconds:g} to {self.max_seconds:g} seconds"


ATTEMPT_DEADLINES: dict[str, AttemptDeadlineRange] = {
    HTTP_TARGET: AttemptDeadlineRange(15, 1800, 180),
    APP_ENGINE_TARGET: AttemptDeadlineRange(15, 86400, 600, zero_is_default=True),
}
#: App Engine standard's request deadline with automatic scaling, seconds (the scaling the component deploys):
#: https://cloud.google.com/appengine/docs/standard/how-instances-are-managed#timeout
APP_ENGINE_AUTOMATIC_SCALING_DEADLINE_SECONDS = 600


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


def surely_sent_retries(retry: RetryPolicy, attempt_deadline_seconds: float) -> list[float]:
    """When each retry Scheduler surely sends after a failed first attempt starts: seconds after the failure.

    Scheduler retries "until both limits are reached"
    (https://cloud.google.com/scheduler/docs/configuring/retry-jobs, "Maximum retry duration"; with
    ``retryCount`` and ``maxRetryDuration`` both 0 "a job attempt won't be retried if it fails"): every retry up to ``retry_count``, and
    beyond it while the retry duration lasts (``max_retry_duration_seconds``, measured "from the time when an
    execution was first attempted"; 0 is no time limit, which with ``retry_count`` 0 means no retry). Each retry
    of a run whose claim is held answers 409 at once, so the waits alone space them (:meth:`RetryPolicy.backoff_seconds`).
    A retry past ``retry_count`` is counted only if it starts within the duration even when the failed attempt
    ran to its attempt deadline first, so the list is what comes whatever the failure.
    """
    starts: list[float] = []
    elapsed = 0.0
    index = 0
    while True:
        wait = retry.backoff_seconds(index)
        by_count = index < retry.retry_count
        by_duration = (retry.max_retry_duration_seconds > 0
                       and attempt_deadline_seconds + elapsed + wait <= retry.max_retry_duration_seconds)
        if not (by_count or by_duration) or (not by_count and wait <= 0):
            return starts
        elapsed += wait
        starts.append(elapsed)
        index += 1


def crash_recovery_seconds(retry: RetryPolicy, attempt_deadline_seconds: float) -> float:
    """Least time, in seconds, from a failed attempt until Scheduler's last retry of the run starts.

    The start of the last retry :func:`surely_sent_retries` lists: the sum of the waits before retries
    1..``retry_count``, or later when ``max_retry_duration_seconds`` keeps retries coming (Retry jobs page: "the
    job will be retried until both limits are reached"); 0 when no retry comes (``retry_count`` 0 and
    ``max_retry_duration_seconds`` 0).

    **Crash recovery condition.** An attempt that dies holding the claim (instance killed, Firestore down at
    completion) blocks its run until its lease expires, at most ``lease_seconds`` after the crash (the
    lease was renewed at most a third of it earlier). A later retry takes the run over and runs it only if
    one still comes: ``crash_recovery_seconds(retry, deadline) >= lease_seconds``, for a crash during the first
    attempt. A job that runs past its attempt deadline and crashes later may outlive every retry.
    """
    starts = surely_sent_retries(retry, attempt_deadline_seconds)
    return starts[-1] if starts else 0.0


def recovers_crash(retry: RetryPolicy, lease_seconds: float, attempt_deadline_seconds: float) -> bool:
    """True when a retry still comes after a crashed attempt's lease expires (see :func:`crash_recovery_seconds`)."""
    return crash_recovery_seconds(retry, attempt_deadline_seconds) >= lease_seconds


def crash_unrecovered(retry: RetryPolicy, attempt_deadline_seconds: float) -> str:
    """What happens to a crashed attempt's run when :func:`recovers_crash` is False, in words for a message: with no
    retry at all nothing comes back for it; otherwise every retry comes while the lease still holds (409)."""
    if not surely_sent_retries(retry, attempt_deadline_seconds):
        return "no retry would come for it, so the run would never complete"
    return "every retry would get 409 and the run would never complete"


def retries_described(retry: RetryPolicy, attempt_deadline_seconds: float) -> str:
    """What Scheduler does after a failed attempt under ``retry``, in words for a message (Retry jobs page)."""
    starts = surely_sent_retries(retry, attempt_deadline_seconds)
    count, duration = retry.retry_count, retry.max_retry_duration_seconds
    if not starts:
        if count == 0 and duration == 0:
            return ("with retry count 0 and max retry duration 0 Scheduler never retries a failed attempt (Retry jobs "
                    "page: \"If retryCount is 0 (and if maxRetryDuration is also 0), a job attempt won't be retried\")")
        return (f"Scheduler retries only while the {duration:g} s max retry duration lasts, which an attempt running to "
                f"its {attempt_deadline_seconds:g} s deadline can use up before the first retry")
    waits = ", ".join(f"{b - a:g}" for a, b in zip([0.0, *starts], starts))
    if duration > 0 and len(starts) > count:
        limits = (f"retries until both limits are reached (Retry jobs page): retry count {count} and "
                  f"{duration:g} s from the first attempt, of which an attempt running to its "
                  f"{attempt_deadline_seconds:g} s deadline leaves room for {len(starts)}")
    else:
        limits = f"sends {len(starts)} retr{'y' if len(starts) == 1 else 'ies'}"
    return f"Scheduler {limits}, {waits} s apart: the last starts {starts[-1]:g} s after a failed attempt"


def max_retry_duration_to_recover(retry: RetryPolicy, lease_seconds: float, attempt_deadline_seconds: float) -> int | None:
    """The smallest whole ``max_retry_duration_seconds`` (other settings kept) for which :func:`recovers_crash`
    holds, or None when no value does (waits that never grow past 0)."""
    elapsed = 0.0
    for index in range(10_000):
        wait = retry.backoff_seconds(index)
        if wait <= 0 and index >= retry.retry_count:
            return None
        elapsed += wait
        if elapsed >= lease_seconds:
            return int(-(-(attempt_deadline_seconds + elapsed) // 1))
    return None


def min_backoff_to_recover(retry: RetryPolicy, lease_seconds: float, attempt_deadline_seconds: float) -> int | None:
    """The smallest whole ``min_backoff_seconds`` (same count, duration, doublings and cap) for which
    :func:`recovers_crash` holds, or None when no value does (too few retries under ``max_backoff_seconds``)."""
    count = retry.retry_count
    if retry.max_retry_duration_seconds <= 0 and (count == 0 or retry.max_backoff_seconds * count < lease_seconds):
        return None
    low, high = 1, int(max(lease_seconds, 1))

    def recovers(min_backoff: int) -> bool:
        return recovers_crash(RetryPolicy(count, retry.max_retry_duration_seconds, min_backoff,
                                          retry.max_backoff_seconds, retry.max_doublings),
                              lease_seconds, attempt_deadline_seconds)

    if not recovers(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if recovers(mid):
            high = mid
        else:
            low = mid + 1
    return low
