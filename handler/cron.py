"""Cloud Scheduler schedules: which unix-cron expressions and time zones it accepts, and when a job fires.

One implementation for the handler (its ``DEDUP_SCHEDULE`` / ``DEDUP_TIME_ZONE`` settings and the run
history), the Pulumi component and the policy pack.

Cloud Scheduler accepts five-field unix-cron with names for months and days of week
(https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules), and sends the
``X-CloudScheduler-ScheduleTime`` header the handler keys runs on only for unix-cron schedules.
croniter (which validates the syntax and computes fire times) also accepts extensions Scheduler
refuses: a seconds field, ``L``, ``W``, ``#``, ``?``, ``H``, and macros such as ``@daily``.

Daylight saving time. The same page says (section "Time zone"): "For some time zones, daylight
saving time can cause jobs to run or not run unexpectedly. This is because Cloud Scheduler runs on
wall clock time. In instances where a time can occur twice (such as the case when clocks go
backwards) and your job is scheduled at this time, your scheduled job may observe execution
anomalies." It recommends UTC for a strict cadence. It does not say whether a wall-clock time that
does not exist (clocks go forward) is skipped or shifted, nor whether a time that occurs twice
fires once (and at which of the two instants) or twice. :func:`fire_times` therefore evaluates the
schedule on the wall clock of the job's time zone, as documented, and where the docs are silent it
lists every candidate instant and lets a run at any of them count (see :class:`FireTime`).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from croniter import CroniterBadDateError, croniter

#: Cloud Scheduler's default time zone (``Job.time_zone``).
DEFAULT_TIME_ZONE = "Etc/UTC"

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
    if not _fires(text):
        return (f"{schedule!r} never fires: no date matches its day-of-month and month fields (such as 31 February "
                "or 31 April), so the job would never run; use a day every listed month has, e.g. '0 0 28 2 *'")
    return None


#: Years searched for a fire time: five-field cron has no year, so its fire days repeat within the 8 years
#: that always hold a leap day (29 February), bounding the search.
_FIRE_SEARCH_YEARS = 8


def _fires(schedule: str) -> bool:
    """True if a valid five-field ``schedule`` has any fire time (a bounded croniter search from a fixed date;
    the day-of-month/day-of-week "or" rule of unix-cron applies, as in croniter)."""
    try:
        croniter(schedule, datetime(2024, 1, 1), max_years_between_matches=_FIRE_SEARCH_YEARS).get_next(datetime)
    except CroniterBadDateError:
        return False
    return True


#: tz database entries that are not places: ``Factory`` (a placeholder), ``localtime`` and
#: ``posixrules`` (links to a system's local settings).
_NOT_ZONES = frozenset({"Factory", "localtime", "posixrules"})


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - _NOT_ZONES


def is_iana_time_zone(name: str) -> bool:
    """True if ``name`` is a tz database zone name (``Job.time_zone``: "a time zone name from the tz
    database", https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job).

    The zone list comes from the ``tzdata`` package (a dependency), so the answer does not depend on
    the machine's ``/usr/share/zoneinfo``.
    """
    return name in _zones()


#: :attr:`FireTime.dst` values.
REGULAR, REPEATED, SKIPPED = "", "repeated", "skipped"


@dataclass(frozen=True)
class FireTime:
    """One wall-clock fire time of a schedule in its time zone, and the instants a run of it may carry.

    Attributes:
        local_time: the wall-clock time the schedule names, naive, in the job's time zone.
        candidates: the instants (aware, UTC, earliest first) whose ``X-CloudScheduler-ScheduleTime``
            counts as a run of this fire time. One for an ordinary time. For a time that occurs twice
            when clocks go back (``dst == "repeated"``): both instants. For a time that does not exist
            when clocks go forward (``dst == "skipped"``): the time read with the offset before the
            change, with the offset after it, and the first wall-clock time after the gap. Cloud
            Scheduler's docs do not say which it uses (module docstring), so any of them counts.
        dst: ``""`` (ordinary), ``"repeated"`` or ``"skipped"``.
    """

    local_time: datetime
    candidates: tuple[datetime, ...]
    dst: str = REGULAR

    @property
    def required(self) -> bool:
        """False for a skipped wall-clock time: the docs allow that it does not run at all."""
        return self.dst != SKIPPED

    @property
    def first(self) -> datetime:
        """The earliest candidate instant (UTC)."""
        return self.candidates[0]

    @property
    def due(self) -> datetime:
        """The latest candidate instant (UTC): after it (plus a grace period) a missing run is missed."""
        return self.candidates[-1]


def _utc(local: datetime, tz: zoneinfo.ZoneInfo, fold: int) -> datetime:
    return local.replace(tzinfo=tz, fold=fold).astimezone(timezone.utc)


def fire_time_at(local: datetime, tz: zoneinfo.ZoneInfo) -> FireTime:
    """The :class:`FireTime` of the naive wall-clock time ``local`` in ``tz`` (DST cases resolved)."""
    readings = sorted({_utc(local, tz, 0), _utc(local, tz, 1)})
    if len(readings) == 1:
        return FireTime(local, (readings[0],))
    early, late = readings
    if _utc(local, tz, 0).astimezone(tz).replace(tzinfo=None) == local:
        return FireTime(local, (early, late), REPEATED)  # both readings exist: the hour occurs twice
    after_gap = local.replace(second=0, microsecond=0)
    while _utc(after_gap, tz, 0).astimezone(tz).replace(tzinfo=None) != after_gap:
        after_gap += timedelta(minutes=1)  # gaps are at most a few hours long
    return FireTime(local, tuple(sorted({early, late, _utc(after_gap, tz, 0)})), SKIPPED)


def fire_times(schedule: str, time_zone: str, since: datetime, until: datetime) -> Iterator[FireTime]:
    """The fire times of ``schedule`` in ``time_zone`` with a candidate instant in ``[since, until)``, oldest first.

    The schedule is evaluated on the zone's wall clock with croniter (as Cloud Scheduler runs on wall
    clock time), then each wall-clock time is turned into its candidate instants (:class:`FireTime`).

    Args:
        schedule: a unix-cron expression Cloud Scheduler accepts (:func:`unix_cron_problem` is None).
        time_zone: a tz database name (:func:`is_iana_time_zone`).
        since: start of the window, aware (any zone), inclusive.
        until: end of the window, aware, exclusive.

    Raises:
        ValueError: the schedule or the time zone is invalid (the message says how to fix it), or a
            bound is naive.
    """
    problem = unix_cron_problem(schedule)
    if problem:
        raise ValueError(f"schedule {problem}")
    if not is_iana_time_zone(time_zone):
        raise ValueError(f"time zone {time_zone!r} is not a tz database name: use e.g. 'Etc/UTC' or 'Europe/Berlin'")
    if since.tzinfo is None or until.tzinfo is None:
        raise ValueError("since and until must be aware datetimes (with a UTC offset)")
    tz = zoneinfo.ZoneInfo(time_zone)
    # Walk the wall clock from a day before the window (no zone is more than a day off its own
    # wall clock at a transition), so fire times whose later candidate falls in the window are found.
    start = since.astimezone(tz).replace(tzinfo=None) - timedelta(days=1)
    end = until.astimezone(tz).replace(tzinfo=None) + timedelta(days=1)
    it = croniter(" ".join(schedule.split()), start - timedelta(microseconds=1))
    while True:
        local = it.get_next(datetime)
        if local >= end:
            return
        fire = fire_time_at(local, tz)
        if any(since <= c < until for c in fire.candidates):
            yield fire


def is_fire_time(schedule: str, time_zone: str, instant: datetime) -> bool:
    """True if ``instant`` (aware) is a candidate instant of a fire time of ``schedule`` in ``time_zone``."""
    window = list(fire_times(schedule, time_zone, instant, instant + timedelta(microseconds=1)))
    return any(instant == c for f in window for c in f.candidates)
