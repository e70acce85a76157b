"""Run history and expected-versus-actual, on records the real handler wrote to the real emulator."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.schedule.cron.fire_times import REPEATED, SKIPPED, fire_times
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.monitoring.comparison import check
from scheduler_dedup.handler.monitoring.findings import (
    FAILED_RUN,
    LATE,
    MISSED,
    REPEATED as REPEATED_RUN,
    STUCK_RUN,
    UNEXPECTED,
)
from scheduler_dedup.handler.monitoring.run_history import RunHistory
from scheduler_dedup.handler.monitoring.run_view import rfc3339
from scheduler_dedup.handler.service.delivery import SchedulerHandler
from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator

from .conftest import Harness, deliver, scheduler_headers

UTC = timezone.utc
BERLIN = "Europe/Berlin"


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def _handler(emulator: FirestoreEmulator, schedule: str, time_zone: str,
             job: Callable[[ScheduledRun], Any] = lambda run: {"ok": True}) -> SchedulerHandler:
    settings = Settings(project=emulator.project, schedule=schedule, time_zone=time_zone)
    store = FirestoreRunStore.connect(settings.project, settings.store_config.database, settings.collection)
    return SchedulerHandler(settings, Idempotency(store, settings.lease_seconds, settings.retention_seconds), job)


def _deliver_all(handler: SchedulerHandler, job: str, times: Iterable[datetime]) -> None:
    for t in times:
        body, status, _ = handler.handle({"X-CloudScheduler-JobName": job, "X-CloudScheduler-ScheduleTime": rfc3339(t)})
        assert status == 200 and body["status"] == "processed", body


def _history(emulator: FirestoreEmulator, **kwargs: Any) -> RunHistory:
    return RunHistory(emulator.connect(), **kwargs)


# -- daylight saving time: Europe/Berlin, both transitions of 2026 ---------------------------------

def test_berlin_fire_times_follow_the_wall_clock_across_both_transitions() -> None:
    spring = list(fire_times("0 * * * *", BERLIN, _utc(2026, 3, 28, 23), _utc(2026, 3, 29, 22)))
    assert len(spring) == 24 and sum(f.required for f in spring) == 23  # 02:00 does not exist on 29 March
    (gap,) = [f for f in spring if f.dst == SKIPPED]
    assert gap.local_time == datetime(2026, 3, 29, 2, 0)
    # 02:00 read as CET (01:00 UTC = 03:00 CEST, the first time after the gap) or as CEST (00:00 UTC)
    assert gap.candidates == (_utc(2026, 3, 29, 0), _utc(2026, 3, 29, 1))
    autumn = list(fire_times("0 * * * *", BERLIN, _utc(2026, 10, 24, 22), _utc(2026, 10, 25, 23)))
    assert len(autumn) == 24 and all(f.required for f in autumn)  # 25 real hours, 24 wall-clock hours
    (twice,) = [f for f in autumn if f.dst == REPEATED]
    assert twice.local_time == datetime(2026, 10, 25, 2, 0)
    assert twice.candidates == (_utc(2026, 10, 25, 0), _utc(2026, 10, 25, 1))  # 02:00 CEST, then 02:00 CET


SPRING_CANDIDATES = {"none": [], "cet_reading": [_utc(2026, 3, 29, 1, 30)], "cest_reading": [_utc(2026, 3, 29, 0, 30)],
                     "after_gap": [_utc(2026, 3, 29, 1, 0)]}
AUTUMN_CANDIDATES = {"first": [_utc(2026, 10, 25, 0, 30)], "second": [_utc(2026, 10, 25, 1, 30)],
                     "both": [_utc(2026, 10, 25, 0, 30), _utc(2026, 10, 25, 1, 30)], "none": []}


@pytest.mark.parametrize("spring", sorted(SPRING_CANDIDATES))
@pytest.mark.parametrize("autumn", sorted(AUTUMN_CANDIDATES))
def test_berlin_daily_0230_either_candidate_counts_and_only_a_lost_repeated_time_is_missed(
        emulator: FirestoreEmulator, spring: str, autumn: str) -> None:
    """02:30 does not exist on 29 March and occurs twice on 25 October 2026; the docs are silent on both."""
    handler = _handler(emulator, "30 2 * * *", BERLIN)
    history = _history(emulator)
    windows = [(_utc(2026, 3, 27), _utc(2026, 3, 31)), (_utc(2026, 10, 23), _utc(2026, 10, 27))]
    ordinary = [f.first for since, until in windows for f in fire_times("30 2 * * *", BERLIN, since, until)
                if f.dst == ""]
    assert len(ordinary) == 6
    _deliver_all(handler, "berlin", ordinary + SPRING_CANDIDATES[spring] + AUTUMN_CANDIDATES[autumn])
    for since, until in windows:
        report = check(history, "berlin", schedule="30 2 * * *", time_zone=BERLIN, since=since, until=until,
                       now=_utc(2026, 11, 1))
        assert not report.of(UNEXPECTED), report.findings
        if since.month == 3:
            assert report.ok and report.expected == 3 == report.recorded  # the skipped time is not required
        elif autumn == "none":
            (missed,) = report.problems
            assert missed.kind == MISSED and missed.fire_time is not None and missed.fire_time.dst == REPEATED
            assert missed.schedule_time == _utc(2026, 10, 25, 1, 30) and report.expected == 4
        else:
            assert report.ok and report.expected == 4 == report.recorded


def test_every_15_minutes_with_a_paused_hour_reports_those_four_runs_missed(emulator: FirestoreEmulator) -> None:
    handler = _handler(emulator, "*/15 * * * *", BERLIN)
    since, until = _utc(2026, 6, 1, 0), _utc(2026, 6, 1, 6)
    paused = (_utc(2026, 6, 1, 3), _utc(2026, 6, 1, 4))  # 05:00-06:00 in Berlin (CEST)
    delivered = [f.first for f in fire_times("*/15 * * * *", BERLIN, since, until)
                 if not paused[0] <= f.first < paused[1]]
    _deliver_all(handler, "quarterly", delivered)
    report = check(_history(emulator, page_size=7), "quarterly", schedule="*/15 * * * *", time_zone=BERLIN,
                   since=since, until=until, now=_utc(2026, 6, 2))
    assert report.expected == 24 and report.recorded == 20 and report.runs == 20
    assert [f.schedule_time for f in report.problems] == [paused[0] + timedelta(minutes=m) for m in (45, 30, 15, 0)]
    assert {f.kind for f in report.findings} == {MISSED} and not report.ok
    assert report.to_json()["counts"]["missed"] == 4
    # Within the grace period the newest gap is late, not missed; no fire time after `now` is expected.
    report = check(_history(emulator), "quarterly", schedule="*/15 * * * *", time_zone=BERLIN, since=since,
                   until=until, now=_utc(2026, 6, 1, 3, 50), grace_seconds=600)
    assert [f.kind for f in report.findings] == [LATE, MISSED, MISSED, MISSED]
    assert report.expected == 16


# -- failed, stuck, repeated, unexpected: real handler processes, a real crash ------------------

def test_failed_stuck_repeated_and_unexpected_runs_from_real_deliveries(harness: Harness) -> None:
    schedule = "*/15 * * * *"
    t = [_utc(2026, 11, 2, 9, 0) + timedelta(minutes=15 * i) for i in range(5)]
    env = {"DEDUP_SCHEDULE": schedule, "DEDUP_TIME_ZONE": BERLIN, "DEDUP_LEASE_SECONDS": "2"}
    for i, when in enumerate(t):
        harness.plan(f"mixed@{when:%Y-%m-%dT%H:%M:%SZ}", **[{}, {"fail": "permanent"}, {"sleep": 30},
                                                            {"sleep": 30},
                                                            {}][i])
    victim, survivor = harness.server(**env), harness.server(**env)
    for when in (t[0], t[1], t[4]):
        assert deliver(survivor.url, scheduler_headers("mixed", rfc3339(when) or "")).status_code == 200
    # t[2] and t[3] start on the victim, which is SIGKILLed mid-job.
    threads = [threading.Thread(target=lambda w=w: _swallow(victim.url, w)) for w in (t[2], t[3])]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 30
    while len(harness.starts()) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    victim.kill()
    for th in threads:
        th.join()
    for start in harness.starts()[3:]:  # t[2] and t[3], started on the victim after the survivor's three
        harness.wait_for_lease_expiry(start["run_id"])  # t[2] stays stuck, t[3] is taken over by a retry
    harness.plan(f"mixed@{t[3]:%Y-%m-%dT%H:%M:%SZ}", sleep=0.05)
    assert deliver(survivor.url, scheduler_headers("mixed", rfc3339(t[3]) or "")).json()["status"] == "processed"
    odd = _utc(2026, 11, 2, 9, 7)  # not a fire time of */15
    assert deliver(survivor.url, scheduler_headers("mixed", rfc3339(odd) or "")).status_code == 200
    forced = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)  # future: a forced run
    body = deliver(survivor.url, scheduler_headers("mixed", rfc3339(forced) or "")).json()
    assert body["status"] == "processed"

    history = RunHistory(harness.emulator.connect())
    runs = list(history.runs("mixed"))
    assert [r.schedule_time for r in runs] == sorted([*t, odd, forced], reverse=True)
    assert all(r.schedule == schedule and r.time_zone == BERLIN for r in runs)
    by_time = {r.schedule_time: r for r in runs}
    assert by_time[t[1]].state == "failed" and "planned permanent failure" in (by_time[t[1]].error or "")
    assert by_time[t[2]].state == "stuck" and by_time[t[2]].status == "in_progress"
    assert by_time[t[3]].took_over and by_time[t[3]].attempts == 2 and by_time[t[3]].state == "completed"
    assert by_time[t[0]].result_bytes and by_time[t[0]].duration_seconds is not None
    assert by_time[forced].manual
    assert [r.schedule_time for r in history.runs("mixed", states=["stuck", "failed"])] == [t[2], t[1]]

    report = check(history, "mixed", schedule=schedule, time_zone=BERLIN, since=t[0],
                   until=forced + timedelta(minutes=1), now=t[4] + timedelta(minutes=1))
    kinds = {(f.kind, f.schedule_time) for f in report.findings}
    assert kinds == {(FAILED_RUN, t[1]), (STUCK_RUN, t[2]), (REPEATED_RUN, t[3]), (UNEXPECTED, odd),
                     (UNEXPECTED, forced)}, report.findings
    assert not report.ok and {f.kind for f in report.problems} == {FAILED_RUN, STUCK_RUN}


def _swallow(url: str, when: datetime) -> None:
    try:
        deliver(url, scheduler_headers("mixed", rfc3339(when) or ""), timeout=60)
    except requests.RequestException:
        pass  # the instance died mid-request, as it should


# -- reading: pages, filters, one run ---------------------------------------------------------------

def test_runs_stream_newest_first_in_pages_with_filters(emulator: FirestoreEmulator) -> None:
    handler = _handler(emulator, "0 * * * *", "Etc/UTC")
    times = [_utc(2026, 5, 1, h) for h in range(10)]
    _deliver_all(handler, "hourly", times)
    _deliver_all(handler, "other-job", times[:3])
    history = _history(emulator, page_size=3)
    pages: list[int] = []
    runs = list(history.runs("hourly", on_page=pages.append))
    assert [r.schedule_time for r in runs] == times[::-1]
    assert pages == [3, 6, 9, 10]
    window = list(history.runs("hourly", since=times[2], until=times[5]))
    assert [r.schedule_time for r in window] == [times[4], times[3], times[2]]
    assert list(history.runs("hourly", states=["failed"])) == []
    with pytest.raises(ValueError, match="unknown state"):
        list(history.runs("hourly", states=["done"]))
    latest = history.latest("hourly")
    assert latest is not None and latest.schedule_time == times[-1] and latest.schedule == "0 * * * *"
    (one,) = history.at("hourly", times[4])
    assert history.get(one.run_id) == one
    assert history.get("0" * 64) is None
    record = one.to_json()
    assert record["schedule_time"] == "2026-05-01T04:00:00Z" and record["state"] == "completed"
    assert record["time_zone"] == "Etc/UTC" and record["attempts"] == 1 and record["took_over"] is False


# -- the handler's settings --------------------------------------------------------------------------

@pytest.mark.parametrize(("env", "message"), [
    ({"DEDUP_SCHEDULE": "every 5 minutes"}, "DEDUP_SCHEDULE is 'every 5 minutes' is a groc"),
    ({"DEDUP_SCHEDULE": "0 0 L * *"}, "DEDUP_SCHEDULE is '0 0 L \\* \\*' uses cron extensions"),
    ({"DEDUP_TIME_ZONE": "CEST"}, "DEDUP_TIME_ZONE='CEST' is not a tz database time zone"),
    ({"DEDUP_TIME_ZONE": "localtime"}, "DEDUP_TIME_ZONE='localtime'"),
])
def test_invalid_schedule_or_time_zone_is_refused_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p-1", **env})


def test_schedule_and_time_zone_settings_default_and_normalise() -> None:
    settings = Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p-1", "DEDUP_SCHEDULE": " */5  * * * * "})
    assert settings.schedule == "*/5 * * * *" and settings.time_zone == "Etc/UTC"
    assert Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p-1"}).schedule is None
