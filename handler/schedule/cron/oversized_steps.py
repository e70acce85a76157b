"""Steps at least as large as the range they skip through (``*/61 * * * *`` runs hourly): Scheduler accepts them,
and a preview says what they really do.
"""

from __future__ import annotations

from datetime import datetime, timezone

from scheduler_dedup.handler.schedule.cron.fields import DOW, FIELDS, Unparsed, item_span, parse
from scheduler_dedup.handler.schedule.cron.gaps import fire_gaps
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE


def _cadence(schedule: str) -> str:
    """What ``schedule`` does, in words (``hourly``, ``daily``, ``monthly``...), from its fire gaps in UTC."""
    gaps = fire_gaps(schedule, DEFAULT_TIME_ZONE, datetime(2025, 1, 1, tzinfo=timezone.utc))
    low, high = gaps.smallest_seconds, gaps.largest_seconds
    named = {60: "every minute", 3600: "hourly", 86400: "daily", 7 * 86400: "weekly"}
    if low == high and low in named:
        return named[int(low)]
    if 28 * 86400 <= low and high <= 31 * 86400:
        return "monthly"
    if 365 * 86400 <= low and high <= 366 * 86400:
        return "yearly"
    return f"with gaps of {low:g} s to {high:g} s"


_UNITS = ("minutes", "hours", "days", "months", "days")
_NEXT = ("hour", "day", "month", "year", "week")


def oversized_step_forms(schedule: str) -> list[str]:
    """Steps at least as large as the range they skip through, one message each saying what the schedule really
    does and the spelling that says so; [] when there is none or ``schedule`` is not plain unix-cron.

    The cron page: "Following a range with /NUMBER specifies skips of the number's value through the range", so
    a step never carries over into the next hour, day or month: ``*/61 * * * *`` and ``0/120 * * * *`` select
    minute 0 only and run hourly, ``0 */25 * * *`` daily, ``0 0 */45 * *`` monthly. Scheduler accepts them.
    """
    try:
        parsed = parse(schedule)
    except Unparsed:
        return []
    found = []
    text = " ".join(parsed.fields)
    for field, items in enumerate(parsed.items):
        name, low, high = FIELDS[field]
        for item in items:
            span = item_span(item, field, dow_end=7, high=6 if field == DOW else None)
            if item.step is None or len(span) < 2 or item.step < len(span):
                continue
            kept = str(span[0] % 7 if field == DOW else span[0])
            fields = list(parsed.fields)
            fields[field] = ",".join(kept if part is item else part.text for part in items)
            settled = " ".join(fields)
            through = f"{span[0]}-{span[-1]}" if item.start is None or item.end is not None else f"{span[0]} to the field's end {span[-1]}"
            found.append(f"{text!r}: the {name} step {item.text!r} is at least as large as the range it skips "
                         f"through ({through}, {len(span)} values), so it selects {kept} only and the job runs "
                         f"{_cadence(settled)}, not every {item.step} {_UNITS[field]}: a step skips through its range "
                         f"only (the cron page) and never carries over into the next {_NEXT[field]}; write "
                         f"{settled!r} to say so, or list the times it should run")
    return found
