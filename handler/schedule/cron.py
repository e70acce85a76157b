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

import heapq
import itertools
import re
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

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


#: Field order, names and value ranges of five-field unix-cron, as Cloud Scheduler's cron page gives them
#: (section "Cron job format": minute 0-59, hour 0-23, day of the month 1-31, month 1-12 or JAN to DEC,
#: day of the week "0-6 (or SUN to SAT; or 7 for Sunday)").
_FIELDS: tuple[tuple[str, int, int], ...] = (
    ("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12), ("day-of-week", 0, 7),
)
_DOM, _DOW = 2, 4
_MONTH_NAMES = {name: n for n, name in enumerate(
    ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1)}
_DOW_NAMES = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_VALUE = r"(\d+|[A-Za-z]{3})"
_ITEM = re.compile(rf"^(?:(?P<star>\*)|(?P<start>{_VALUE})(?:-(?P<end>{_VALUE}))?)(?:/(?P<step>\d+))?$")


class _Unparsed(ValueError):
    """A field item outside plain unix-cron (an extension, a bad name or number, a value out of range)."""


@dataclass(frozen=True)
class _Item:
    """One comma-separated item of a field, parsed: ``*``, ``a``, ``a-b``, each with an optional ``/step``."""

    text: str
    start: int | None  # None for '*'
    end: int | None  # the range's end; None for '*' and for a single value (``a`` or ``a/step``)
    step: int | None

    @property
    def reversed(self) -> bool:
        return self.start is not None and self.end is not None and self.end < self.start


def _value(text: str, field: int) -> int:
    name, low, high = _FIELDS[field]
    names = _MONTH_NAMES if field == 3 else _DOW_NAMES if field == _DOW else {}
    if text.isdigit():
        value = int(text)
    elif text.upper() in names:
        value = names[text.upper()]
    else:
        raise _Unparsed(f"{text!r} is not a {name} value")
    if not low <= value <= high:
        raise _Unparsed(f"{name} {value} is outside {low}-{high}")
    return value


def _items(text: str, field: int) -> list[_Item]:
    items = []
    for part in text.split(","):
        match = _ITEM.match(part)
        if not match:
            raise _Unparsed(f"{part!r} is not a unix-cron item")
        step = int(match["step"]) if match["step"] else None
        if step is not None and step < 1:
            raise _Unparsed(f"step {step} in {part!r} must be at least 1")
        if match["star"]:
            items.append(_Item(part, None, None, step))
        else:
            items.append(_Item(part, _value(match["start"], field),
                               _value(match["end"], field) if match["end"] else None, step))
    return items


def _expand(item: _Item, field: int, *, dow_end: int = 6) -> set[int]:
    """The values of ``item`` by the cron page's rules: ``*`` is first-last, a range is inclusive, ``/n`` skips
    through it. A single value with a step (``a/n``) steps to the field's end (``dow_end`` for day-of-week: the
    page does not say whether it is 6 or 7). A reversed range wraps past the field's end (:func:`_unsettled`)."""
    _, low, high = _FIELDS[field]
    if field == _DOW:
        high = 6  # '*' stands for first-last: 0-6; 7 (Sunday again) only where written
    return {v % 7 if field == _DOW else v for v in _span(item, field, dow_end=dow_end, high=high)[::item.step or 1]}


def _span(item: _Item, field: int, *, dow_end: int, high: int | None = None) -> list[int]:
    """The values ``item``'s range runs through before its step is applied, in order (a reversed range wrapped)."""
    _, low, top = _FIELDS[field]
    high = top if high is None else high
    if item.start is None:
        return list(range(low, high + 1))
    if item.end is None:
        last = max(item.start, dow_end) if field == _DOW else top
        return list(range(item.start, last + 1)) if item.step else [item.start]
    if item.end >= item.start:
        return list(range(item.start, item.end + 1))
    return list(range(item.start, top + 1)) + list(range(low, item.end + 1))


@dataclass(frozen=True)
class CronReading:
    """One unambiguous reading of a schedule, in the form croniter evaluates as the cron page says.

    Attributes:
        expression: five fields, each ``*`` or an explicit list of values (day-of-week 0-6, Sunday 0), so none
            of croniter's own parsing of ranges, steps, names or 7 is used (it reads ``7-7`` and any ``a-a`` in
            any field as every value, and ``7/2`` in day-of-week as 0,2,4,6).
        day_or: True when the two day fields are ORed (both restricted), False when both must match.
    """

    expression: str
    day_or: bool


@dataclass(frozen=True)
class _Parsed:
    fields: tuple[str, ...]
    items: tuple[tuple[_Item, ...], ...]


def _parse(schedule: str) -> _Parsed:
    fields = tuple(" ".join(schedule.split()).split(" "))
    if len(fields) != 5:
        raise _Unparsed(f"{len(fields)} fields")
    return _Parsed(fields, tuple(tuple(_items(text, n)) for n, text in enumerate(fields)))


def _field_text(values: set[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


def _unsettled(parsed: _Parsed) -> list[tuple[str, list[tuple[int, dict[str, Any]]]]]:
    """The forms of ``parsed`` that Cloud Scheduler's cron page does not settle, each with its alternative
    readings: ``(message, [(field, expand options) or (-1, {"day_or": bool})])``."""
    found: list[tuple[str, list[tuple[int, dict[str, Any]]]]] = []
    text = " ".join(parsed.fields)
    for field, items in enumerate(parsed.items):
        name = _FIELDS[field][0]
        for item in items:
            if item.reversed:
                written = list(parsed.fields)
                written[field] = ",".join(_field_text(_expand(i, field)) if i is item else i.text for i in items)
                wrapped = " ".join(written)
                found.append((
                    f"{text!r}: the {name} range {item.text!r} runs backwards. Cloud Scheduler's cron page says only "
                    "that \"ranges are two numbers separated with a hyphen (-) and the specified range is inclusive\", "
                    "not whether a range wraps past the field's end; the unix-cron it names refuses it (cronie: \"the "
                    "first number must always be lower or equal to the second\"), croniter wraps it. So Scheduler "
                    "either refuses the job at pulumi up (\"Schedule or time zone is invalid\") or wraps the range, "
                    "and a job that exists is read wrapped (run history, alerts, fire gaps): write the values out, "
                    f"e.g. {wrapped!r}",
                    [(field, {})]))
            elif field == _DOW and item.start is not None and item.end is None and item.step:
                six, seven = (_expand(item, field, dow_end=end) for end in (6, 7))
                if six != seven:
                    found.append((
                        f"{text!r}: the day-of-week step {item.text!r} runs from {item.start} to the field's end, which "
                        "the cron page does not fix (\"0-6 (or SUN to SAT; or 7 for Sunday)\"): it is "
                        f"{_field_text(six)!r} to 6 and also Sunday to 7; write "
                        f"'{item.start}-6/{item.step}' or '{item.start}-7/{item.step}'",
                        [(field, {"dow_end": 6}), (field, {"dow_end": 7})]))
    dom, dow = parsed.fields[_DOM], parsed.fields[_DOW]
    starred = [f for f in (_DOM, _DOW) if parsed.fields[f].startswith("*") and parsed.fields[f] != "*"]
    if starred and "*" not in (dom, dow):
        starred_name = _FIELDS[starred[0]][0]
        other = _FIELDS[_DOW if starred[0] == _DOM else _DOM][0]
        spelled = parsed.fields[starred[0]]
        rewrite = ("1-31" if starred[0] == _DOM else "0-6") + spelled[1:]
        found.append((
            f"{text!r}: {starred_name} {spelled!r} starts with '*' while {other} is restricted. The cron page ORs the two day "
            "fields \"unless one of these fields is marked as unrestricted by the asterisk (*)\", and does not say "
            f"whether {spelled!r} is so marked: by the OR reading (croniter's) it fires on days matching either "
            "field, by Vixie cron's (cronsim's) only on days matching both. Run history accepts either; write "
            f"{rewrite!r} for the OR reading",
            [(-1, {"day_or": True}), (-1, {"day_or": False})]))
    return found


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
        parsed = _parse(schedule)
    except _Unparsed:
        return []
    found = []
    text = " ".join(parsed.fields)
    for field, items in enumerate(parsed.items):
        name, low, high = _FIELDS[field]
        for item in items:
            span = _span(item, field, dow_end=7, high=6 if field == _DOW else None)
            if item.step is None or len(span) < 2 or item.step < len(span):
                continue
            kept = str(span[0] % 7 if field == _DOW else span[0])
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


#: At most this many readings are evaluated (each unsettled form doubles them).
_MAX_READINGS = 8


def cron_readings(schedule: str) -> tuple[CronReading, ...]:
    """Every reading of ``schedule`` the cron page allows: one when the page settles every form, more when it is
    silent on one (:func:`unsettled_cron_forms`). Fire times of every reading are required; fire times of only some
    are accepted but not required (:attr:`FireTime.ambiguous`).

    Raises:
        ValueError: ``schedule`` is not plain five-field unix-cron (:func:`unix_cron_problem` says why).
    """
    try:
        parsed = _parse(schedule)
    except _Unparsed as error:
        raise ValueError(f"schedule {schedule!r}: {error}") from None
    choices = [alternatives for _, alternatives in _unsettled(parsed)]
    readings: list[CronReading] = []
    for picked in itertools.islice(itertools.product(*choices), _MAX_READINGS):
        options: dict[int, dict[str, Any]] = {}
        day_or = "*" not in (parsed.fields[_DOM], parsed.fields[_DOW])
        for field, option in picked:
            if field < 0:
                day_or = bool(option["day_or"])
            else:
                options.setdefault(field, {}).update(option)
        fields = []
        for number, (text, items) in enumerate(zip(parsed.fields, parsed.items)):
            if text == "*":
                fields.append("*")
                continue
            values = set().union(*(_expand(item, number, **options.get(number, {})) for item in items))
            fields.append(_field_text(values))
        reading = CronReading(" ".join(fields), day_or)
        if reading not in readings:
            readings.append(reading)
    return tuple(readings)


def unsettled_cron_forms(schedule: str) -> list[str]:
    """What in ``schedule`` Cloud Scheduler's cron page does not settle, one message each (with the rewrite that
    settles it), or [] when it settles everything. Preview flags these instead of guessing.

    The forms: a range that runs backwards (``22-2``, read wrapped: a job Scheduler accepted fires, and
    wrapping is the one reading that does); a day-of-week ``a/n`` whose end (6, or 7 for Sunday) changes its days;
    a ``*``-prefixed step in one day field while the other is restricted (``0 0 */2 * 1``).
    A schedule that is not plain unix-cron has none (:func:`unix_cron_problem` refuses it).
    """
    try:
        return [message for message, _ in _unsettled(_parse(schedule))]
    except _Unparsed:
        return []


def _croniter(reading: CronReading, start: datetime, **kwargs: Any) -> croniter:
    return croniter(reading.expression, start, day_or=reading.day_or, **kwargs)


_NAMES = re.compile(r"(?i)(MON|TUE|WED|THU|FRI|SAT|SUN|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)")
_PLAIN_FIELD = re.compile(r"[0-9*/,-]+")
_EXTENDED_FIELD = re.compile(r"[0-9*/,\-LWH#?]+")


def unix_cron_problem(schedule: str) -> str | None:
    """What is wrong with ``schedule`` for Cloud Scheduler, with the fix, or None if it is fine.

    Examples: ``every 10 minutes`` -> "... a groc (App Engine cron) schedule ...: write '*/10 * * * *'";
    ``0 0 L * *`` -> "... uses cron extensions ..."; ``0 9 * * WED`` -> None. Forms the cron page does not
    settle (``0 22-2 * * *``) are not problems: :func:`unsettled_cron_forms` flags them.
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
        _parse(text)
    except _Unparsed as error:
        return (f"{schedule!r} is not a valid unix-cron expression: {error}; write five unix-cron fields 'minute hour "
                "day-of-month month day-of-week' within Cloud Scheduler's ranges (minute 0-59, hour 0-23, day-of-month "
                "1-31, month 1-12 or JAN to DEC, day-of-week 0-6 or SUN to SAT, 7 is Sunday too), e.g. '*/15 * * * *'")
    if not any(_fires(reading) for reading in cron_readings(text)):
        return (f"{schedule!r} never fires: no date matches its day-of-month and month fields (such as 31 February "
                "or 31 April), so the job would never run; use a day every listed month has, e.g. '0 0 28 2 *'")
    return None


#: Years searched for a fire time: five-field cron has no year, so its fire days repeat within the 8 years
#: that always hold a leap day (29 February), bounding the search.
_FIRE_SEARCH_YEARS = 8


def _fires(reading: CronReading) -> bool:
    """True if ``reading`` has any fire time (a bounded croniter search from a fixed date)."""
    try:
        _croniter(reading, datetime(2024, 1, 1), max_years_between_matches=_FIRE_SEARCH_YEARS).get_next(datetime)
    except CroniterBadDateError:
        return False
    return True


#: tz database entries that are not places: ``Factory`` (a placeholder), ``localtime`` and
#: ``posixrules`` (links to a system's local settings).
_NOT_ZONES = frozenset({"Factory", "localtime", "posixrules"})


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - _NOT_ZONES


def time_zone_suggestion(name: str) -> str:
    """How to fix a ``name`` that is not a tz database zone, for a message: the closest zone name (difflib, any case)
    as ``did you mean 'America/Chicago'?``, else ``use e.g. 'Etc/UTC' or 'Europe/Berlin'`` (an offset such as ``UTC+2``
    gets that too: the closest name would be a different time)."""
    import difflib

    if any(c.isdigit() or c in "+-" for c in str(name)):  # an offset ("UTC+2") is not a misspelt name
        return "use a zone name, e.g. 'Etc/UTC' or 'Europe/Berlin', not an offset"
    by_lower = {zone.lower(): zone for zone in _zones()}
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1, cutoff=0.75)
    if close:
        return f"did you mean {by_lower[close[0]]!r}?"
    return "use e.g. 'Etc/UTC' or 'Europe/Berlin'"


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


def _wall_clock(readings: tuple[CronReading, ...], start: datetime) -> Iterator[tuple[datetime, bool]]:
    """The naive wall-clock fire times of every reading after ``start``, oldest first, each once, with True when
    every reading has it."""
    def stream(reading: CronReading) -> Iterator[datetime]:
        it = _croniter(reading, start)
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
_RARE_HORIZON_DAYS = _FIRE_SEARCH_YEARS * 366 + 1


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
    plain = _utc(day, tz, 0).utcoffset() == _utc(following, tz, 0).utcoffset() and \
        day.replace(tzinfo=tz).utcoffset() == following.replace(tzinfo=tz).utcoffset()
    if plain:
        first, last = (_utc(day + timedelta(minutes=m), tz, 0) for m in (minutes[0], minutes[-1]))
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
            fire twice within :data:`_FIRE_SEARCH_YEARS` years (e.g. ``0 0 30 2 *``; the message says "does not
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
