"""Time-zone names as Cloud Scheduler takes them (``Job.time_zone``, "a time zone name from the tz database"):
which names are zones, the closest zone to a misspelt one, and which names are aliases or fixed offsets.

The tz database keeps old and abbreviated names as links to a canonical zone (``UTC`` -> ``Etc/UTC``,
``US/Eastern`` -> ``America/New_York``): a link works, but consoles that show the canonical name report a perpetual
diff, and ``EST``, ``MST`` and ``HST`` are fixed offsets without daylight saving time. Zones and links come from the
``tzdata`` package (a dependency), whatever the machine has.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from importlib import resources

#: Cloud Scheduler's default time zone (``Job.time_zone``).
DEFAULT_TIME_ZONE = "Etc/UTC"

#: What a fixed-offset abbreviation most often stands for: the zone of that name's region, with its daylight
#: saving time (a test checks each has the abbreviation's offset in winter).
_MEANT = {"EST": "America/New_York", "MST": "America/Denver", "HST": "Pacific/Honolulu"}
#: Links that stand for UTC itself: an alias, but a fixed offset of 0 is what they mean.
_UTC_LIKE = frozenset({"Etc/UTC", "Etc/GMT"})


@lru_cache(maxsize=1)
def tz_links() -> dict[str, str]:
    """Every link of the tz database: alias -> the name it links to (``tzdata.zi`` of the ``tzdata`` package)."""
    text = resources.files("tzdata").joinpath("zoneinfo", "tzdata.zi").read_text(encoding="utf-8")
    links: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "L":
            links[parts[2]] = parts[1]
    return links


def canonical_time_zone(name: str) -> str:
    """The canonical zone ``name`` stands for: itself for a zone, the target for a link (``US/Eastern`` ->
    ``America/New_York``)."""
    links = tz_links()
    seen = set()
    while name in links and name not in seen:
        seen.add(name)
        name = links[name]
    return name


def fixed_offset(name: str) -> timedelta | None:
    """The one UTC offset of zone ``name`` from 1970 to 2037, or None when it changes (daylight saving time or a
    change of standard time)."""
    tz = zoneinfo.ZoneInfo(name)
    start = datetime(1970, 1, 1, tzinfo=timezone.utc)
    offsets = {(start + timedelta(days=15 * n)).astimezone(tz).utcoffset() for n in range(0, 68 * 365 // 15)}
    return offsets.pop() if len(offsets) == 1 else None


def _offset_text(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def fixed_offset_abbreviation_problem(name: str) -> str | None:
    """Why ``name`` is a fixed-offset abbreviation such as ``EST`` (no daylight saving time, unlike the region
    its letters suggest), with the fix; None for any other name."""
    target = canonical_time_zone(name)
    if target == name or target in _UTC_LIKE or "/" in name or not name.isupper():
        return None
    offset = fixed_offset(target)
    if offset is None or not offset:
        return None
    hours = -int(offset.total_seconds() // 3600)
    spelled = f"Etc/GMT{'+' if hours >= 0 else '-'}{abs(hours)}" if offset.total_seconds() % 3600 == 0 else target
    meant = _MEANT.get(name)
    if meant is None:
        place = "the zone of the place you mean"
    else:
        place = f"{meant} ({'with its' if fixed_offset(meant) is None else 'which has no'} daylight saving time)"
    return (f"{name!r} is a fixed {_offset_text(offset)} offset all year, without daylight saving time (the tz "
            f"database links it to {target}), whatever the region its letters suggest does: a job meant for the "
            f"local time of a place with daylight saving time would run an hour off for part of the year. Write "
            f"{place} for a place's local time, or {spelled!r} if a fixed offset is what you mean")


def time_zone_alias_advisory(name: str) -> str | None:
    """An advisory when ``name`` is a tz database link rather than the canonical zone, naming that zone
    (``UTC`` -> ``Etc/UTC``, ``US/Eastern`` -> ``America/New_York``); None for a canonical name or an unknown one.
    Fixed-offset abbreviations get :func:`fixed_offset_abbreviation_problem` instead."""
    target = canonical_time_zone(name)
    if target == name or fixed_offset_abbreviation_problem(name):
        return None
    return (f"{name!r} is an alias (a tz database link) of {target}: Cloud Scheduler accepts it, but consoles and "
            f"providers that show the canonical name report a change on every update, and some refuse links; write "
            f"{target!r}")


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
