"""The shortest and longest time between consecutive fire times of a schedule, walked on the job's wall clock (for
the overlap advisory and the run check's alert windows).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from croniter import croniter

from scheduler_dedup.handler.schedule.cron.accepted import FIRE_SEARCH_YEARS, unix_cron_problem
from scheduler_dedup.handler.schedule.cron.fire_times import SKIPPED, fire_time_at, wall_clock_instant
from scheduler_dedup.handler.schedule.cron.readings import CronReading, cron_readings
from scheduler_dedup.handler.schedule.time_zones import is_iana_time_zone, time_zone_suggestion


@dataclass(frozen=True)
class FireGaps:
    """The shortest and longest time between consecutive fire times of a schedule, seconds.

    Attributes:
        smallest_seconds: over every fire time any reading of the schedule has (:func:`cron_readings`).
        largest_seconds: over the fire times every reading has (a gap no reading can make longer).
    """

    smallest_seconds: float
    largest_seconds: float


#: Days of gap starts :func:`fire_gaps` covers: past a year, so yearly patterns and both clock changes are in it.
GAP_HORIZON_DAYS = 400


#: Days :func:`fire_gaps` walks at most: the years :func:`unix_cron_problem` searches for a first fire time,
#: so a schedule Scheduler accepts has gaps within them (a leap-day schedule, ``0 0 29 2 *``, too).
_RARE_HORIZON_DAYS = FIRE_SEARCH_YEARS * 366 + 1


def _times_of_day(reading: CronReading) -> tuple[int, ...]:
    minutes, hours = reading.expression.split()[:2]
    minute_set = range(60) if minutes == "*" else [int(m) for m in minutes.split(",")]
    hour_set = range(24) if hours == "*" else [int(h) for h in hours.split(",")]
    return tuple(sorted(h * 60 + m for h in hour_set for m in minute_set))


def _fire_days(reading: CronReading, first: datetime) -> Iterator[datetime]:
    """The days (naive midnights, oldest first, from ``first`` on) on which ``reading`` fires."""
    fields = reading.expression.split()
    it = croniter(" ".join(["0", "0", *fields[2:]]), first - timedelta(microseconds=1), day_or=reading.day_or)
    while True:
        yield it.get_next(datetime)


@lru_cache(maxsize=64)
def _within_day_gaps(minutes: tuple[int, ...]) -> tuple[float, float] | None:
    """(smallest, largest) gap in seconds between consecutive times of day (minutes after midnight), or None."""
    steps = [(b - a) * 60.0 for a, b in zip(minutes, minutes[1:])]
    return (min(steps), max(steps)) if steps else None


def _day_instants(day: datetime, minutes: tuple[int, ...], tz: zoneinfo.ZoneInfo,
                  keep_skipped: bool) -> tuple[datetime, datetime, tuple[float, float] | None] | None:
    """(first instant, last instant, (smallest, largest) gap within the day) of the times of day ``minutes`` on
    ``day``, or None when none of them runs. A time the clocks skip counts only if ``keep_skipped``; a time that
    occurs twice counts once, at its first instant."""
    following = day + timedelta(days=1)
    plain = wall_clock_instant(day, tz, 0).utcoffset() == wall_clock_instant(following, tz, 0).utcoffset() and \
        day.replace(tzinfo=tz).utcoffset() == following.replace(tzinfo=tz).utcoffset()
    if plain:
        first, last = (wall_clock_instant(day + timedelta(minutes=m), tz, 0) for m in (minutes[0], minutes[-1]))
        return first, last, _within_day_gaps(minutes)
    instants: list[datetime] = []
    for minute in minutes:
        fire = fire_time_at(day + timedelta(minutes=minute), tz)
        if not keep_skipped and fire.dst == SKIPPED:
            continue  # a time the clocks skip may not run at all: the longer gap
        if not instants or fire.first > instants[-1]:
            instants.append(fire.first)  # a repeated wall-clock time: its first instant only
    if not instants:
        return None
    steps = [(b - a).total_seconds() for a, b in zip(instants, instants[1:])]
    return instants[0], instants[-1], (min(steps), max(steps)) if steps else None


def fire_gaps(schedule: str, time_zone: str, start: datetime | None = None,
              horizon_days: int = GAP_HORIZON_DAYS) -> FireGaps:
    """The shortest and longest gap between consecutive fire times of ``schedule`` in ``time_zone`` (seconds).

    Every gap that starts within ``horizon_days`` from ``start`` (default: today, UTC midnight) is measured to its
    end, however far past the horizon that is, so a full cycle of the schedule is covered whatever the start:
    ``0 * * 2 *`` (February only) started in December still sees the eleven months to the next February. Walked
    on the job's wall clock, so daylight-saving days count with their real length. A wall-clock time that occurs
    twice (clocks go back) counts once, at its first instant: Cloud Scheduler's docs do not say whether it fires
    once or twice, and once gives the longer, safer largest gap. A wall-clock time that does not exist (clocks go
    forward) counts for the smallest gap but not for the largest: the docs allow that it does not run ("can cause
    jobs to run or not run unexpectedly"), so ``30 2,14 * * *`` in Europe/Berlin has a 23 h largest gap on 29
    March, not 13 h. Work is per fire day, not per fire time: the times of day are the same on every day a
    reading fires, except on daylight-saving days, which are walked fire by fire.

    Raises:
        ValueError: ``schedule`` or ``time_zone`` is invalid, or every reading of the schedule together does not
            fire twice within :data:`FIRE_SEARCH_YEARS` years (e.g. ``0 0 30 2 *``; the message says "does not
            fire"). A leap-day schedule (``0 0 29 2 *``) is searched over those years.
    """
    problem = unix_cron_problem(schedule)
    if problem:
        raise ValueError(f"schedule {problem}")
    if not is_iana_time_zone(time_zone):
        raise ValueError(f"time zone {time_zone!r} is not a tz database name: {time_zone_suggestion(time_zone)}")
    tz = zoneinfo.ZoneInfo(time_zone)
    today = (start or datetime.now(timezone.utc)).astimezone(tz).replace(tzinfo=None)
    first_day = datetime.combine(today.date(), datetime.min.time())
    last_day = first_day + timedelta(days=horizon_days)
    give_up = first_day + timedelta(days=max(horizon_days, _RARE_HORIZON_DAYS))
    readings = cron_readings(schedule)
    streams = [_fire_days(r, first_day) for r in readings]
    heads = [next(stream) for stream in streams]
    times = [_times_of_day(r) for r in readings]
    smallest, largest = float("inf"), 0.0
    previous: dict[str, datetime | None] = {"any": None, "all": None}
    while (day := min(heads)) < give_up:
        firing = [i for i, head in enumerate(heads) if head == day]
        union = tuple(sorted(set().union(*(times[i] for i in firing))))
        shared = tuple(sorted(set(times[firing[0]]).intersection(*(times[i] for i in firing))
                              if len(firing) == len(readings) else ()))
        ended = False
        for kind, minutes in (("any", union), ("all", shared)):
            found = _day_instants(day, minutes, tz, keep_skipped=kind == "any") if minutes else None
            if found is None:
                continue
            first, last, within = found
            before = previous[kind]
            gaps = [*(within or ()), *([(first - before).total_seconds()] if before is not None else [])]
            if gaps and kind == "any":
                smallest = min(smallest, *gaps)
            if gaps and kind == "all":
                largest = max(largest, *gaps)
                ended = day >= last_day  # the gap that began inside the horizon has ended
            previous[kind] = last
        if ended and smallest < float("inf"):
            break
        for i in firing:
            heads[i] = next(streams[i])
    if largest == 0.0 or smallest == float("inf"):
        raise ValueError(f"schedule {schedule!r} does not fire within {(give_up - first_day).days} days")
    return FireGaps(smallest, largest)
