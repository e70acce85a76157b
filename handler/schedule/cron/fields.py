"""The five fields of unix-cron as Cloud Scheduler's cron page defines them
(https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules): their ranges and names, each field's
comma-separated items parsed, and an item's values by the page's rules. What croniter would read differently
(``7-7``, ``a-a``, ``7/2`` in day-of-week) never reaches it: readings pass it explicit values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Field order, names and value ranges of five-field unix-cron, as Cloud Scheduler's cron page gives them
#: (section "Cron job format": minute 0-59, hour 0-23, day of the month 1-31, month 1-12 or JAN to DEC,
#: day of the week "0-6 (or SUN to SAT; or 7 for Sunday)").
FIELDS: tuple[tuple[str, int, int], ...] = (
    ("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12), ("day-of-week", 0, 7),
)
DOM, DOW = 2, 4
_MONTH_NAMES = {name: n for n, name in enumerate(
    ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1)}
_DOW_NAMES = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_VALUE = r"(\d+|[A-Za-z]{3})"
_ITEM = re.compile(rf"^(?:(?P<star>\*)|(?P<start>{_VALUE})(?:-(?P<end>{_VALUE}))?)(?:/(?P<step>\d+))?$")


class Unparsed(ValueError):
    """A field item outside plain unix-cron (an extension, a bad name or number, a value out of range)."""


@dataclass(frozen=True)
class Item:
    """One comma-separated item of a field, parsed: ``*``, ``a``, ``a-b``, each with an optional ``/step``."""

    text: str
    start: int | None  # None for '*'
    end: int | None  # the range's end; None for '*' and for a single value (``a`` or ``a/step``)
    step: int | None

    @property
    def reversed(self) -> bool:
        return self.start is not None and self.end is not None and self.end < self.start


def _value(text: str, field: int) -> int:
    name, low, high = FIELDS[field]
    names = _MONTH_NAMES if field == 3 else _DOW_NAMES if field == DOW else {}
    if text.isdigit():
        value = int(text)
    elif text.upper() in names:
        value = names[text.upper()]
    else:
        raise Unparsed(f"{text!r} is not a {name} value")
    if not low <= value <= high:
        raise Unparsed(f"{name} {value} is outside {low}-{high}")
    return value


def _items(text: str, field: int) -> list[Item]:
    items = []
    for part in text.split(","):
        match = _ITEM.match(part)
        if not match:
            raise Unparsed(f"{part!r} is not a unix-cron item")
        step = int(match["step"]) if match["step"] else None
        if step is not None and step < 1:
            raise Unparsed(f"step {step} in {part!r} must be at least 1")
        if match["star"]:
            items.append(Item(part, None, None, step))
        else:
            items.append(Item(part, _value(match["start"], field),
                               _value(match["end"], field) if match["end"] else None, step))
    return items


def expand(item: Item, field: int, *, dow_end: int = 6) -> set[int]:
    """The values of ``item`` by the cron page's rules: ``*`` is first-last, a range is inclusive, ``/n`` skips
    through it. A single value with a step (``a/n``) steps to the field's end (``dow_end`` for day-of-week: the
    page does not say whether it is 6 or 7). A reversed range wraps past the field's end (:mod:`.readings`)."""
    _, low, high = FIELDS[field]
    if field == DOW:
        high = 6  # '*' stands for first-last: 0-6; 7 (Sunday again) only where written
    return {v % 7 if field == DOW else v for v in item_span(item, field, dow_end=dow_end, high=high)[::item.step or 1]}


def item_span(item: Item, field: int, *, dow_end: int, high: int | None = None) -> list[int]:
    """The values ``item``'s range runs through before its step is applied, in order (a reversed range wrapped)."""
    _, low, top = FIELDS[field]
    high = top if high is None else high
    if item.start is None:
        return list(range(low, high + 1))
    if item.end is None:
        last = max(item.start, dow_end) if field == DOW else top
        return list(range(item.start, last + 1)) if item.step else [item.start]
    if item.end >= item.start:
        return list(range(item.start, item.end + 1))
    return list(range(item.start, top + 1)) + list(range(low, item.end + 1))


@dataclass(frozen=True)
class Parsed:
    fields: tuple[str, ...]
    items: tuple[tuple[Item, ...], ...]


def parse(schedule: str) -> Parsed:
    fields = tuple(" ".join(schedule.split()).split(" "))
    if len(fields) != 5:
        raise Unparsed(f"{len(fields)} fields")
    return Parsed(fields, tuple(tuple(_items(text, n)) for n, text in enumerate(fields)))


def field_text(values: set[int]) -> str:
    return ",".join(str(v) for v in sorted(values))
