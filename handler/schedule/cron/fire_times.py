"""When a schedule fires: its fire times on the wall clock of the job's time zone, each with the instants a run of it
may carry.

Cloud Scheduler "runs on wall clock time" and warns that daylight saving time "can cause jobs to run or not run
unexpectedly" (the cron page, section "Time zone"), without saying whether a time the clocks skip is shifted or
dropped, or whether a time that occurs twice fires once or twice. Where the docs are silent, every candidate
instant counts (:class:`FireTime`).
"""

from __future__ import annotations

import heapq
import itertools
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.cron.readings import CronReading, cron_readings, reading_croniter
from scheduler_dedup.handler.schedule.time_zones import is_iana_time_zone, time_zone_suggestion

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
        ambiguous: True when only some readings of the schedule fire then (:func:`cron_readings`: a form
            Cloud Scheduler's cron page does not settle, such as ``0 0 */2 * 1``): a run then is accepted,
            its absence is not missed.
    """

    local_time: datetime
    candidates: tuple[datetime, ...]
    dst: str = REGULAR
    ambiguous: bool = False

    @property
    def required(self) -> bool:
        """False for a skipped wall-clock time (the docs allow that it does not run at all) and for a time only
        some readings of the schedule fire at (:attr:`ambiguous`)."""
        return self.dst != SKIPPED and not self.ambiguous

    @property
    def first(self) -> datetime:
        """The earliest candidate instant (UTC)."""
        return self.candidates[0]

    @property
    def due(self) -> datetime:
        """The latest candidate instant (UTC): after it (plus a grace period) a missing run is missed."""
        return self.candidates[-1]


def wall_clock_instant(local: datetime, tz: zoneinfo.ZoneInfo, fold: int) -> datetime:
    return local.replace(tzinfo=tz, fold=fold).astimezone(timezone.utc)


def fire_time_at(local: datetime, tz: zoneinfo.ZoneInfo) -> FireTime:
    """The :class:`FireTime` of the naive wall-clock time ``local`` in ``tz`` (DST cases resolved)."""
    readings = sorted({wall_clock_instant(local, tz, 0), wall_clock_instant(local, tz, 1)})
    if len(readings) == 1:
        return FireTime(local, (readings[0],))
    early, late = readings
    if wall_clock_instant(local, tz, 0).astimezone(tz).replace(tzinfo=None) == local:
        return FireTime(local, (early, late), REPEATED)  # both readings exist: the hour occurs twice
    after_gap = local.replace(second=0, microsecond=0)
    while wall_clock_instant(after_gap, tz, 0).astimezone(tz).replace(tzinfo=None) != after_gap:
        after_gap += timedelta(minutes=1)  # gaps are at most a few hours long
    return FireTime(local, tuple(sorted({early, late, wall_clock_instant(after_gap, tz, 0)})), SKIPPED)


def _wall_clock(readings: tuple[CronReading, ...], start: datetime) -> Iterator[tuple[datetime, bool]]:
    """The naive wall-clock fire times of every reading after ``start``, oldest first, each once, with True when
    every reading has it."""
    def stream(reading: CronReading) -> Iterator[datetime]:
        it = reading_croniter(reading, start)
        while True:
            yield it.get_next(datetime)

    merged = heapq.merge(*(stream(reading) for reading in readings))
    for local, group in itertools.groupby(merged):
        yield local, sum(1 for _ in group) == len(readings)


def fire_times(schedule: str, time_zone: str, since: datetime, until: datetime) -> Iterator[FireTime]:
    """The fire times of ``schedule`` in ``time_zone`` with a candidate instant in ``[since, until)``, oldest first.

    The schedule is read as Cloud Scheduler's cron page says (:class:`CronReading`; where the page is silent,
    every reading it allows, :func:`cron_readings`) and evaluated on the zone's wall clock with croniter (as
    Cloud Scheduler runs on wall clock time), then each wall-clock time is turned into its candidate instants
    (:class:`FireTime`).

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
        raise ValueError(f"time zone {time_zone!r} is not a tz database name: {time_zone_suggestion(time_zone)}")
    if since.tzinfo is None or until.tzinfo is None:
        raise ValueError("since and until must be aware datetimes (with a UTC offset)")
    tz = zoneinfo.ZoneInfo(time_zone)
    readings = cron_readings(schedule)
    # Walk the wall clock from a day before the window (no zone is more than a day off its own
    # wall clock at a transition), so fire times whose later candidate falls in the window are found.
    start = since.astimezone(tz).replace(tzinfo=None) - timedelta(days=1)
    end = until.astimezone(tz).replace(tzinfo=None) + timedelta(days=1)
    for local, settled in _wall_clock(readings, start - timedelta(microseconds=1)):
        if local >= end:
            return
        fire = fire_time_at(local, tz)
        if not settled:
            fire = replace(fire, ambiguous=True)
        if any(since <= c < until for c in fire.candidates):
            yield fire


def is_fire_time(schedule: str, time_zone: str, instant: datetime) -> bool:
    """True if ``instant`` (aware) is a candidate instant of a fire time of ``schedule`` in ``time_zone`` (run history
    asks it of the old schedule after a schedule change)."""
    window = list(fire_times(schedule, time_zone, instant, instant + timedelta(microseconds=1)))
    return any(instant == c for f in window for c in f.candidates)
