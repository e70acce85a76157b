"""The tz database's links, read from the tzdata package's own tzdata.zi, checked against zoneinfo offsets."""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timedelta, timezone

from scheduler_dedup.handler.schedule.time_zones import is_iana_time_zone
from scheduler_dedup.handler.schedule.time_zones import _MEANT, canonical_time_zone, fixed_offset, tz_links


def test_every_link_has_its_target_s_offsets_and_names_a_zone() -> None:
    links = tz_links()
    assert len(links) > 200 and links["US/Eastern"] == "America/New_York" and links["UTC"] == "Etc/UTC"
    # from 2020 on: the years a job can run in (a few links, such as WET, differ from their target long ago)
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    instants = [start + timedelta(days=7 * n) for n in range(0, 18 * 52)]
    for alias in links:
        target = canonical_time_zone(alias)
        assert target not in links and is_iana_time_zone(target), alias
        a, b = zoneinfo.ZoneInfo(alias), zoneinfo.ZoneInfo(target)
        assert all(t.astimezone(a).utcoffset() == t.astimezone(b).utcoffset() for t in instants), alias


def test_the_abbreviations_stand_for_fixed_offsets_and_the_suggested_zones_share_them_in_winter() -> None:
    january = datetime(2026, 1, 15, 12, tzinfo=timezone.utc)
    for abbreviation, meant in _MEANT.items():
        offset = fixed_offset(canonical_time_zone(abbreviation))
        assert offset is not None, abbreviation
        assert january.astimezone(zoneinfo.ZoneInfo(meant)).utcoffset() == offset, abbreviation
    assert fixed_offset("America/New_York") is None and fixed_offset("Etc/UTC") == timedelta(0)
