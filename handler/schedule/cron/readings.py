"""The readings of a schedule: one when Cloud Scheduler's cron page settles every form of it, more when it is
silent on one (a backwards range, a day-of-week ``a/n``, a ``*``-prefixed step in one day field while the other is
restricted). Fire times of every reading are required; fire times of only some are accepted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from croniter import croniter

from scheduler_dedup.handler.schedule.cron.fields import DOM, DOW, FIELDS, Parsed, Unparsed, expand, field_text, parse


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


def _unsettled(parsed: Parsed) -> list[tuple[str, list[tuple[int, dict[str, Any]]]]]:
    """The forms of ``parsed`` that Cloud Scheduler's cron page does not settle, each with its alternative
    readings: ``(message, [(field, expand options) or (-1, {"day_or": bool})])``."""
    found: list[tuple[str, list[tuple[int, dict[str, Any]]]]] = []
    text = " ".join(parsed.fields)
    for field, items in enumerate(parsed.items):
        name = FIELDS[field][0]
        for item in items:
            if item.reversed:
                written = list(parsed.fields)
                written[field] = ",".join(field_text(expand(i, field)) if i is item else i.text for i in items)
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
            elif field == DOW and item.start is not None and item.end is None and item.step:
                six, seven = (expand(item, field, dow_end=end) for end in (6, 7))
                if six != seven:
                    found.append((
                        f"{text!r}: the day-of-week step {item.text!r} runs from {item.start} to the field's end, which "
                        "the cron page does not fix (\"0-6 (or SUN to SAT; or 7 for Sunday)\"): it is "
                        f"{field_text(six)!r} to 6 and also Sunday to 7; write "
                        f"'{item.start}-6/{item.step}' or '{item.start}-7/{item.step}'",
                        [(field, {"dow_end": 6}), (field, {"dow_end": 7})]))
    dom, dow = parsed.fields[DOM], parsed.fields[DOW]
    starred = [f for f in (DOM, DOW) if parsed.fields[f].startswith("*") and parsed.fields[f] != "*"]
    if starred and "*" not in (dom, dow):
        starred_name = FIELDS[starred[0]][0]
        other = FIELDS[DOW if starred[0] == DOM else DOM][0]
        spelled = parsed.fields[starred[0]]
        rewrite = ("1-31" if starred[0] == DOM else "0-6") + spelled[1:]
        found.append((
            f"{text!r}: {starred_name} {spelled!r} starts with '*' while {other} is restricted. The cron page ORs the two day "
            "fields \"unless one of these fields is marked as unrestricted by the asterisk (*)\", and does not say "
            f"whether {spelled!r} is so marked: by the OR reading (croniter's) it fires on days matching either "
            "field, by Vixie cron's (cronsim's) only on days matching both. Run history accepts either; write "
            f"{rewrite!r} for the OR reading",
            [(-1, {"day_or": True}), (-1, {"day_or": False})]))
    return found


#: At most this many readings are evaluated (each unsettled form doubles them).
_MAX_READINGS = 8


def cron_readings(schedule: str) -> tuple[CronReading, ...]:
    """Every reading of ``schedule`` the cron page allows: one when the page settles every form, more when it is
    silent on one (:func:`unsettled_cron_forms`). Fire times of every reading are required; fire times of only some
    are accepted but not required (:attr:`~scheduler_dedup.handler.schedule.cron.fire_times.FireTime.ambiguous`).

    Raises:
        ValueError: ``schedule`` is not plain five-field unix-cron (:func:`~scheduler_dedup.handler.schedule.cron.accepted.unix_cron_problem` says why).
    """
    try:
        parsed = parse(schedule)
    except Unparsed as error:
        raise ValueError(f"schedule {schedule!r}: {error}") from None
    choices = [alternatives for _, alternatives in _unsettled(parsed)]
    readings: list[CronReading] = []
    for picked in itertools.islice(itertools.product(*choices), _MAX_READINGS):
        options: dict[int, dict[str, Any]] = {}
        day_or = "*" not in (parsed.fields[DOM], parsed.fields[DOW])
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
            values = set().union(*(expand(item, number, **options.get(number, {})) for item in items))
            fields.append(field_text(values))
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
    A schedule that is not plain unix-cron has none (:func:`~scheduler_dedup.handler.schedule.cron.accepted.unix_cron_problem` refuses it).
    """
    try:
        return [message for message, _ in _unsettled(parse(schedule))]
    except Unparsed:
        return []


def reading_croniter(reading: CronReading, start: datetime, **kwargs: Any) -> croniter:
    return croniter(reading.expression, start, day_or=reading.day_or, **kwargs)
