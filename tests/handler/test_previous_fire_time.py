"""A run's previous fire time, the start of its data interval, on the job's wall clock in its time zone."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from scheduler_dedup.handler.schedule.cron.previous import previous_fire_time

pytestmark = pytest.mark.unit


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


@pytest.mark.parametrize(("schedule", "zone", "run", "previous"), [
    ("* * * * *", "Etc/UTC", "2026-12-07T14:00:00Z", "2026-12-07T13:59:00Z"),
    ("*/15 * * * *", "Etc/UTC", "2026-12-07T00:00:00Z", "2026-12-06T23:45:00Z"),
    # Clocks go forward in Berlin on 29 March 2026: a daily 09:00 interval is 23 hours long that day...
    ("0 9 * * *", "Europe/Berlin", "2026-03-29T07:00:00Z", "2026-03-28T08:00:00Z"),
    # ...and 25 hours long on 25 October 2026, when they go back.
    ("0 9 * * *", "Europe/Berlin", "2026-10-25T08:00:00Z", "2026-10-24T07:00:00Z"),
    # 02:30 occurs twice on 25 October: both of its instants start their interval at the day before's 02:30, and the
    # next day's run starts at its later instant.
    ("30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-24T00:30:00Z"),
    ("30 2 * * *", "Europe/Berlin", "2026-10-25T01:30:00Z", "2026-10-24T00:30:00Z"),
    ("30 2 * * *", "Europe/Berlin", "2026-10-26T01:30:00Z", "2026-10-25T01:30:00Z"),
    # Monthly and leap-day schedules look back far enough.
    ("0 0 1 * *", "Etc/UTC", "2026-03-01T00:00:00Z", "2026-02-01T00:00:00Z"),
    ("0 0 29 2 *", "Etc/UTC", "2028-02-29T00:00:00Z", "2024-02-29T00:00:00Z"),
])
def test_the_previous_fire_time_is_on_the_jobs_wall_clock(schedule: str, zone: str, run: str, previous: str) -> None:
    assert previous_fire_time(schedule, zone, utc(run)) == utc(previous)


def test_a_late_or_odd_schedule_time_gets_the_fire_time_before_it() -> None:
    """A schedule time that is not a fire time itself (a late header) gets the last fire time before it."""
    assert previous_fire_time("0 * * * *", "Etc/UTC", utc("2026-12-07T14:10:00Z")) == utc("2026-12-07T14:00:00Z")
