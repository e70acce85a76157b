"""Schedules and retry windows as Cloud Scheduler has them (unix-cron, IANA time zone, RetryConfig): one
implementation shared by the component and the policy pack.

Cloud Scheduler accepts five-field unix-cron with names for months and days of week
(https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules), and sends the
``X-CloudScheduler-ScheduleTime`` header the handler keys runs on only for unix-cron schedules.
croniter (which validates the syntax) also accepts extensions Scheduler refuses: a seconds field,
``L``, ``W``, ``#``, ``?``, ``H``, and macros such as ``@daily``.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from functools import lru_cache

from croniter import croniter

_GROC_UNITS = {"minute": "minutes", "minutes": "minutes", "min": "minutes", "mins": "minutes",
               "hour": "hours", "hours": "hours", "day": "days", "days": "days"}
_DAYS = {"monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5, "saturday": 6, "sunday": 0,
         "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 0}
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


def groc_to_unix_cron(schedule: str) -> str | None:
    """The unix-cron equivalent of a simple groc (App Engine cron) schedule, or None when there is no obvious one.

    ``every 5 minutes`` -> ``*/5 * * * *``; ``every 2 hours`` -> ``0 */2 * * *``; ``every day 09:30`` ->
    ``30 9 * * *``; ``every monday 09:00`` -> ``0 9 * * 1``; ``every minute`` -> ``* * * * *``.
    """
    text = " ".join(schedule.lower().split())
    match = re.fullmatch(r"every (\d+ )?(minute|minutes|min|mins|hour|hours)", text)
    if match:
        n = int(match.group(1) or 1)
        unit = _GROC_UNITS[match.group(2)]
        if unit == "minutes":
            return "* * * * *" if n == 1 else f"*/{n} * * * *"
        return "0 * * * *" if n == 1 else f"0 */{n} * * *"
    match = re.fullmatch(r"every (day|\w+day|mon|tue|wed|thu|fri|sat|sun) (\d{1,2}):(\d{2})", text)
    if match:
        hour, minute = int(match.group(2)), int(match.group(3))
        day = match.group(1)
        if day == "day":
            return f"{minute} {hour} * * *"
        if day in _DAYS:
            return f"{minute} {hour} * * {_DAYS[day]}"
    if text in ("every day", "every 24 hours"):
        return "0 0 * * *"
    return None



_NAMES = re.compile(r"(?i)(MON|TUE|WED|THU|FRI|SAT|SUN|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)")
_PLAIN_FIELD = re.compile(r"[0-9*/,-]+")


def unix_cron_problem(schedule: str) -> str | None:
    """What is wrong with ``schedule`` for Cloud Scheduler, with the fix, or None if it is fine.

    Examples: ``every 10 minutes`` -> "... a groc (App Engine cron) schedule ...: write '*/10 * * * *'";
    ``0 0 L * *`` -> "... uses cron extensions ..."; ``0 9 * * WED`` -> None.
    """
    text = " ".join(schedule.split())
    if text.lower() in _MACROS:
        return f"{schedule!r} is a cron macro, not unix-cron: write {_MACROS[text.lower()]!r}"
    if text.lower().startswith("every ") or not croniter.is_valid(text):
        suggestion = groc_to_unix_cron(text)
        hint = (f"write {suggestion!r}" if suggestion else
                "write five unix-cron fields 'minute hour day-of-month month day-of-week', e.g. '*/15 * * * *'")
        kind = "a groc (App Engine cron) schedule" if text.lower().startswith("every ") else "not a valid unix-cron expression"
        return f"{schedule!r} is {kind}; Cloud Scheduler needs unix-cron (it sends X-CloudScheduler-ScheduleTime only then): {hint}"
    fields = text.split()
    if len(fields) != 5 or not all(_PLAIN_FIELD.fullmatch(_NAMES.sub("0", f)) for f in fields):
        return (f"{schedule!r} uses cron extensions Cloud Scheduler does not accept (a seconds or year field, L, W, "
                "#, ?, H): write five plain unix-cron fields, e.g. '*/15 * * * *'")
    return None


#: tz database entries that are not places: ``Factory`` (a placeholder), ``localtime`` and
#: ``posixrules`` (links to a system's local settings).
_NOT_ZONES = frozenset({"Factory", "localtime", "posixrules"})


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - _NOT_ZONES


def is_iana_time_zone(name: str) -> bool:
    """True if ``name`` is a tz database zone name (``Job.time_zone``: "a time zone name from the tz
    database", https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job)."""
    return name in _zones()


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
