"""Cloud Scheduler runs one execution of a job at a time: a run still running or being retried delays or skips
the job's next fire time, on purpose.

One implementation for the component and the policy pack (the advisory at preview,
:func:`overlap_advisory`) and for run history (:func:`may_be_delayed_or_skipped`: a fire time without a run
that falls within the previous run's retry window is one Scheduler may have skipped, not necessarily missed).

Sources:

* REST reference, ``Job.schedule``
  (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.schedule):
  "As a general rule, execution n + 1 of a job will not begin until execution n has finished. Cloud Scheduler
  will never allow two simultaneously outstanding executions. [...] A scheduled start time will be delayed if
  the previous execution has not ended when its scheduled time occurs."
* Retry jobs (https://cloud.google.com/scheduler/docs/configuring/retry-jobs), "Maximum retry attempts":
  "Note that the next scheduled execution time might be skipped if the retries continue through that time."
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_dedup.handler.schedule.cron.gaps import fire_gaps


@dataclass(frozen=True)
class Overlap:
    """A job's settings against its schedule's smallest gap between fire times; durations in seconds.

    Attributes:
        schedule: the unix-cron schedule.
        smallest_gap_seconds: the shortest time between two fire times
            (:func:`~scheduler_dedup.handler.schedule.cron.gaps.fire_gaps`, in the job's time zone).
        attempt_deadline_seconds: how long one attempt may take before Scheduler gives up on it.
        retry_window_seconds: the longest time from a run's first attempt until its last retry can end
            (``scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds``).
    """

    schedule: str
    smallest_gap_seconds: float
    attempt_deadline_seconds: float
    retry_window_seconds: float

    @property
    def slow_attempt_overlaps(self) -> bool:
        """One attempt that runs to its deadline already reaches the next fire time (a healthy slow run delays it)."""
        return self.attempt_deadline_seconds >= self.smallest_gap_seconds

    @property
    def retries_overlap(self) -> bool:
        """A run's retries can continue through the next fire time (a failing run skips it)."""
        return self.retry_window_seconds > self.smallest_gap_seconds


def schedule_overlap(schedule: str, time_zone: str, attempt_deadline_seconds: float,
                     retry_window_seconds: float) -> Overlap:
    """The :class:`Overlap` of a job's attempt deadline and retry window with its schedule.

    Raises:
        ValueError: the schedule or time zone is invalid, or the schedule does not fire twice within
            :data:`~scheduler_dedup.handler.schedule.cron.gaps.GAP_HORIZON_DAYS`.
    """
    gap = fire_gaps(schedule, time_zone).smallest_seconds
    return Overlap(schedule, gap, attempt_deadline_seconds, retry_window_seconds)


def overlap_advisory(schedule: str, time_zone: str, attempt_deadline_seconds: float,
                     retry_window_seconds: float) -> str | None:
    """The advisory finding when a job's runs can reach its next fire time, naming both numbers, or None.

    Raised when the retry window is longer than the schedule's smallest gap between fire times (Scheduler then
    skips fire times while a failing run is retried), and says so when a single attempt running to its deadline
    already reaches the next fire time (a healthy but slow run then delays it). A schedule that cannot be read
    is the schedule rules' concern: None.
    """
    try:
        overlap = schedule_overlap(schedule, time_zone, attempt_deadline_seconds, retry_window_seconds)
    except ValueError:
        return None
    if not overlap.retries_overlap:
        return None
    gap, deadline, window = overlap.smallest_gap_seconds, attempt_deadline_seconds, retry_window_seconds
    slow = (f"one attempt may take up to the {deadline:g} s attempt deadline, already past the next fire time, and "
            if overlap.slow_attempt_overlaps else "")
    return (f"schedule {schedule!r} fires as little as {gap:g} s apart, but {slow}a run's retries may span {window:g} s "
            f"(its retry window, from the attempt deadline and the retry config). Cloud Scheduler never runs two "
            "executions of a job at once (Job.schedule: \"a scheduled start time will be delayed if the previous "
            "execution has not ended\"; Retry jobs: \"the next scheduled execution time might be skipped if the "
            "retries continue through that time\"), so a slow run delays the next fire time and a failing one skips "
            f"those its retries span: expect no run at them. To avoid it, fire at least {window:g} s apart, or "
            "shorten the attempt deadline and the retry config")


def may_be_delayed_or_skipped(fire_time: datetime, previous_fire_time: datetime,
                              retry_window_seconds: float) -> bool:
    """True when Scheduler may have delayed or skipped ``fire_time`` on purpose: it falls after the previous fire
    time but within that run's retry window, so the previous execution may still have been running or retried.

    Args:
        fire_time: the fire time without a run (aware).
        previous_fire_time: the fire time before it (aware).
        retry_window_seconds: the job's retry window (``scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds``).
    """
    return previous_fire_time < fire_time < previous_fire_time + timedelta(seconds=retry_window_seconds)
