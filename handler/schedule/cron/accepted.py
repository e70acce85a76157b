"""Which schedules Cloud Scheduler accepts: five plain unix-cron fields with month and day names, nothing of
croniter's extensions (a seconds field, ``L``, ``W``, ``#``, ``?``, ``H``, macros such as ``@daily``), and one
that fires. Scheduler sends ``X-CloudScheduler-ScheduleTime``, which runs are keyed on, only for unix-cron.
"""

from __future__ import annotations

import re
from datetime import datetime

from croniter import CroniterBadDateError

from scheduler_dedup.handler.schedule.cron.fields import Unparsed, parse
from scheduler_dedup.handler.schedule.cron.readings import CronReading, cron_readings, reading_croniter

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
_EXTENDED_FIELD = re.compile(r"[0-9*/,\-LWH#?]+")


def unix_cron_problem(schedule: str) -> str | None:
    """What is wrong with ``schedule`` for Cloud Scheduler, with the fix, or None if it is fine.

    Examples: ``every 10 minutes`` -> "... a groc (App Engine cron) schedule ...: write '*/10 * * * *'";
    ``0 0 L * *`` -> "... uses cron extensions ..."; ``0 9 * * WED`` -> None. Forms the cron page does not
    settle (``0 22-2 * * *``) are not problems: :func:`~scheduler_dedup.handler.schedule.cron.readings.unsettled_cron_forms` flags them.
    """
    text = " ".join(schedule.split())
    if text.lower() in _MACROS:
        return f"{schedule!r} is a cron macro, not unix-cron: write {_MACROS[text.lower()]!r}"
    fields = [_NAMES.sub("0", f) for f in text.split(" ")]
    extended = len(fields) in (5, 6, 7) and all(_EXTENDED_FIELD.fullmatch(f) for f in fields)
    if text.lower().startswith("every ") or not extended:
        suggestion = groc_to_unix_cron(text)
        hint = (f"write {suggestion!r}" if suggestion else
                "write five unix-cron fields 'minute hour day-of-month month day-of-week', e.g. '*/15 * * * *'")
        kind = "a groc (App Engine cron) schedule" if text.lower().startswith("every ") else "not a valid unix-cron expression"
        return f"{schedule!r} is {kind}; Cloud Scheduler needs unix-cron (it sends X-CloudScheduler-ScheduleTime only then): {hint}"
    if len(fields) != 5 or not all(_PLAIN_FIELD.fullmatch(f) for f in fields):
        return (f"{schedule!r} uses cron extensions Cloud Scheduler does not accept (a seconds or year field, L, W, "
                "#, ?, H): write five plain unix-cron fields, e.g. '*/15 * * * *'")
    try:
        parse(text)
    except Unparsed as error:
        return (f"{schedule!r} is not a valid unix-cron expression: {error}; write five unix-cron fields 'minute hour "
                "day-of-month month day-of-week' within Cloud Scheduler's ranges (minute 0-59, hour 0-23, day-of-month "
                "1-31, month 1-12 or JAN to DEC, day-of-week 0-6 or SUN to SAT, 7 is Sunday too), e.g. '*/15 * * * *'")
    if not any(_fires(reading) for reading in cron_readings(text)):
        return (f"{schedule!r} never fires: no date matches its day-of-month and month fields (such as 31 February "
                "or 31 April), so the job would never run; use a day every listed month has, e.g. '0 0 28 2 *'")
    return None


#: Years searched for a fire time: five-field cron has no year, so its fire days repeat within the 8 years
#: that always hold a leap day (29 February), bounding the search.
FIRE_SEARCH_YEARS = 8


def _fires(reading: CronReading) -> bool:
    """True if ``reading`` has any fire time (a bounded croniter search from a fixed date)."""
    try:
        reading_croniter(reading, datetime(2024, 1, 1), max_years_between_matches=FIRE_SEARCH_YEARS).get_next(datetime)
    except CroniterBadDateError:
        return False
    return True
