"""Cron expansion as Cloud Scheduler's cron page says, against an independent minute-by-minute matcher.

The page (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules) settles: day-of-week is
"0-6 (or SUN to SAT; or 7 for Sunday)", ``*`` "always stands for first-last", a range is "inclusive" and
``/NUMBER`` "specifies skips of the number's value through the range", and the two day fields are ORed
"unless one of these fields is marked as unrestricted by the asterisk (*)". croniter reads ``7-7`` (and any
``a-a`` range, in every field) as every value and ``7/2`` as 0,2,4,6; cronsim reads ``a-a/n`` as ``a/n``.
Where the page is silent (a day-of-week ``a/n``, a ``*``-step in one day field while the other is restricted)
every reading it allows is accepted and none is required. A backwards range is flagged too, and read wrapped: the
other reading (unix-cron's, refusing it) leaves no job to check.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.cron.fire_times import fire_times
from scheduler_dedup.handler.schedule.cron.gaps import fire_gaps
from scheduler_dedup.handler.schedule.cron.oversized_steps import oversized_step_forms
from scheduler_dedup.handler.schedule.cron.readings import cron_readings, unsettled_cron_forms
from scheduler_dedup.handler.monitoring.comparison import compare
from scheduler_dedup.handler.monitoring.findings import MISSED, UNEXPECTED
from scheduler_dedup.handler.monitoring.run_view import HistoryRun

UTC = timezone.utc
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = {**{n: i for i, n in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))},
          **{n: i for i, n in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT",
                                         "NOV", "DEC"), start=1)}}


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def _page_values(field: str, number: int) -> set[int]:
    """The values one field stands for, by the cron page's words (written apart from handler/schedule/cron.py)."""
    low, high = _RANGES[number]
    top = 6 if number == 4 else high
    out: set[int] = set()
    for item in field.split(","):
        body, _, step = item.partition("/")
        if body == "*":
            first, last = low, top
        elif "-" in body:
            a, b = (int(_NAMES.get(v.upper(), v)) for v in body.split("-"))
            first, last = a, b
        else:
            first = last = int(_NAMES.get(body.upper(), body))
        out.update(range(first, last + 1, int(step) if step else 1))
    return {v % 7 for v in out} if number == 4 else out


def _page_fire_minutes(schedule: str, since: datetime, until: datetime) -> list[datetime]:
    fields = schedule.split()
    values = [_page_values(f, n) for n, f in enumerate(fields)]
    day_or = "*" not in (fields[2], fields[4])
    out = []
    t = since
    while t < until:
        dom, dow = t.day in values[2], t.isoweekday() % 7 in values[4]
        if (t.minute in values[0] and t.hour in values[1] and t.month in values[3]
                and ((dom or dow) if day_or else (dom and dow))):
            out.append(t)
        t += timedelta(minutes=1)
    return out


#: Forms the page settles, croniter's known misreadings among them.
SETTLED = [
    "0 0 * * 7-7", "0 0 * * 7", "0 0 * * 7/2", "0 0 * * 0,7", "0 0 * * 5-7", "0 0 * * 6-7", "0 0 * * 0-7",
    "0 0 * * 3-7/2", "0 0 * * 1-7/2", "0 0 * * 7-7/3", "0 0 * * 2-2", "0 0 * * 2-2/3", "0 0 * * SUN-SUN",
    "0 0 * * MON-FRI", "0 0 * * sun", "0 0 * * */2", "0 0 * * */3", "0 0 * * 1,7-7", "0 0 * * 1-2,7-7",
    "5-5 * * * *", "5-5/2 * * * *", "0 3-3/5 * * *", "0 0 10-10/3 * *", "0 0 1 JAN-MAR *", "0 0 1 3-3 *",
    "*/7 */5 * * *", "0 9 1,15 * 1-5", "0 0 13 * 5", "30 8 * * 7-7",
]


@pytest.mark.parametrize("schedule", SETTLED)
def test_settled_forms_fire_exactly_when_the_cron_page_says(schedule: str) -> None:
    since, until = _utc(2025, 1, 1), _utc(2025, 1, 20)
    fires = list(fire_times(schedule, "Etc/UTC", since, until))
    assert unsettled_cron_forms(schedule) == []
    assert all(f.required for f in fires)
    assert [f.first for f in fires] == _page_fire_minutes(schedule, since, until)


def test_seven_to_seven_is_sundays_only() -> None:
    """The reported input: croniter fires '0 0 * * 7-7' every day; the page says 7 is Sunday."""
    fires = list(fire_times("0 0 * * 7-7", "Etc/UTC", _utc(2025, 1, 1), _utc(2025, 2, 1)))
    assert [f.first.day for f in fires] == [5, 12, 19, 26]


def test_a_star_step_beside_a_restricted_day_field_is_flagged_and_either_reading_is_accepted() -> None:
    """'0 0 */2 * 1': 18 days of January 2025 by the OR reading, 2 (odd Mondays) by Vixie cron's."""
    schedule = "0 0 */2 * 1"
    (message,) = unsettled_cron_forms(schedule)
    assert "'*/2'" in message and "'1-31/2'" in message and "unrestricted by the asterisk" in message
    fires = list(fire_times(schedule, "Etc/UTC", _utc(2025, 1, 1), _utc(2025, 2, 1)))
    assert len(fires) == 18
    assert [f.first.day for f in fires if f.required] == [13, 27]
    assert unix_cron_problem(schedule) is None  # flagged, not refused


def test_a_day_of_week_step_whose_end_the_page_leaves_open_is_flagged_and_required_by_no_reading() -> None:
    (message,) = unsettled_cron_forms("0 0 * * 1/2")
    assert "'1/2' runs from 1 to the field's end" in message and "write" in message
    assert len(cron_readings("0 0 * * 1/2")) == 2
    fires = list(fire_times("0 0 * * 1/2", "Etc/UTC", _utc(2025, 1, 1), _utc(2025, 1, 15)))
    assert fires and any(not f.required for f in fires)


@pytest.mark.parametrize(("schedule", "needle", "hours", "weekdays"), [
    ("0 22-2 * * *", "'22-2' runs backwards", [0, 1, 2, 22, 23], None),
    ("30 9 * * FRI-MON", "'FRI-MON' runs backwards", [9], [0, 4, 5, 6]),  # Mon, Fri, Sat, Sun (Monday 0)
])
def test_a_backwards_range_is_flagged_and_read_wrapped_everywhere(schedule: str, needle: str, hours: list[int],
                                                                 weekdays: list[int] | None) -> None:
    """'0 22-2 * * *' and '30 9 * * FRI-MON' were refused at preview ("does not fire within 2929 days") while the run
    history read them wrapped: one reading now, for the history, the gap scan and the alerts alike."""
    (message,) = unsettled_cron_forms(schedule)
    assert needle in message and "write the values out" in message and unix_cron_problem(schedule) is None
    assert len(cron_readings(schedule)) == 1
    fires = list(fire_times(schedule, "Etc/UTC", _utc(2025, 1, 1), _utc(2025, 1, 8)))
    assert all(f.required for f in fires)
    assert sorted({f.first.hour for f in fires}) == hours
    if weekdays is not None:
        assert sorted({f.first.weekday() for f in fires}) == weekdays
    gaps = fire_gaps(schedule, "Etc/UTC", _utc(2025, 1, 1))
    assert gaps.largest_seconds == (20 * 3600 if weekdays is None else 4 * 86400)
    both = list(fire_times("0 22-2,5 * * *", "Etc/UTC", _utc(2025, 1, 1), _utc(2025, 1, 2)))
    assert [f.first.hour for f in both if f.required] == [0, 1, 2, 5, 22, 23]


@pytest.mark.parametrize(("schedule", "does", "spelled"), [
    ("0/120 * * * *", "runs hourly", "'0 * * * *'"),
    ("*/61 * * * *", "runs hourly", "'0 * * * *'"),
    ("0 */25 * * *", "runs daily", "'0 0 * * *'"),
    ("0 0 */45 * *", "runs monthly", "'0 0 1 * *'"),
    ("0 0 1 */12 *", "runs yearly", "'0 0 1 1 *'"),
])
def test_a_step_as_large_as_its_range_says_what_the_schedule_really_does(schedule: str, does: str, spelled: str) -> None:
    (message,) = oversized_step_forms(schedule)
    assert does in message and spelled in message and "selects" in message
    assert [f.first for f in fire_times(schedule, "Etc/UTC", _utc(2025, 1, 1), _utc(2025, 3, 1))] == \
        [f.first for f in fire_times(spelled.strip("'"), "Etc/UTC", _utc(2025, 1, 1), _utc(2025, 3, 1))]


@pytest.mark.parametrize("schedule", ["*/30 * * * *", "0 */12 * * *", "0 0 */15 * *", "0 0 * * */3", "5-10/5 * * * *"])
def test_a_step_that_selects_two_values_or_more_is_no_finding(schedule: str) -> None:
    assert oversized_step_forms(schedule) == []


@pytest.mark.parametrize("start", [_utc(2026, 12, 3), _utc(2026, 3, 15), _utc(2026, 2, 10), _utc(2027, 6, 30)])
def test_the_gap_scan_covers_a_full_cycle_whatever_the_start(start: datetime) -> None:
    """'0 * * 2 *' (February only) checked in December saw a 6,180 s largest gap: the 400 days scanned never reached
    the next February after the one they held, so the deliveries-stopped alert would open in March."""
    gaps = fire_gaps("0 * * 2 *", "Etc/UTC", start)
    assert gaps.smallest_seconds == 3600
    # 28 February 23:00 to 1 February 00:00 of the next year: 337 days and an hour
    assert gaps.largest_seconds == (datetime(2028, 2, 1) - datetime(2027, 2, 28, 23)).total_seconds()
    assert fire_gaps("0 0 1 1 *", "Etc/UTC", start).largest_seconds >= 365 * 86400


def _run(schedule: str, at: datetime) -> HistoryRun:
    return HistoryRun(run_id=f"r{at:%d%H}", job_name="j", schedule_time=at, status="completed", stuck=False,
                      attempts=1, attempt_id="a", previous_attempt_id=None, manual=False, claimed_at=at,
                      finished_at=at, duration_seconds=1.0, result_bytes=None, result_dropped=None, error=None,
                      schedule=schedule, time_zone="Etc/UTC", project="p", location="")


def test_run_history_accepts_either_reading_of_an_unsettled_schedule() -> None:
    schedule = "0 0 */2 * 1"
    since, until, now = _utc(2025, 1, 1), _utc(2025, 2, 1), _utc(2025, 2, 2)
    # Scheduler took the Vixie reading and ran the odd Mondays only: nothing missed, nothing unexpected
    vixie = [_run(schedule, _utc(2025, 1, 13)), _run(schedule, _utc(2025, 1, 27))]
    report = compare(vixie, job_name="j", schedule=schedule, time_zone="Etc/UTC", since=since, until=until, now=now)
    assert report.ok and report.of(UNEXPECTED) == [] and report.expected == 2
    # it took the OR reading: the extra days are runs of the schedule too, not unexpected ones
    union = [_run(schedule, f.first) for f in fire_times(schedule, "Etc/UTC", since, until)]
    report = compare(union, job_name="j", schedule=schedule, time_zone="Etc/UTC", since=since, until=until, now=now)
    assert report.ok and report.of(UNEXPECTED) == []
    # a day both readings fire on is still missed when it has no record
    report = compare(vixie[:1], job_name="j", schedule=schedule, time_zone="Etc/UTC", since=since, until=until,
                     now=now)
    assert [f.schedule_time for f in report.of(MISSED)] == [_utc(2025, 1, 27)]


@pytest.mark.parametrize(("schedule", "needle"), [
    ("0 24 * * *", "hour 24 is outside 0-23"),
    ("0 0 * * 8", "day-of-week 8 is outside 0-7"),
    ("0 0 * * */0", "step 0"),
    ("0 0 * * MOO", "not a valid unix-cron expression"),
    ("0 0 * FRI *", "'FRI' is not a month value"),
])
def test_values_outside_the_page_s_ranges_are_refused_naming_the_field(schedule: str, needle: str) -> None:
    problem = unix_cron_problem(schedule)
    assert problem is not None and needle in problem and "five unix-cron fields" in problem


def test_readings_are_explicit_lists_croniter_cannot_misread() -> None:
    for schedule in SETTLED:
        for reading in cron_readings(schedule):
            assert all(f == "*" or re.fullmatch(r"\d+(,\d+)*", f) for f in reading.expression.split())
