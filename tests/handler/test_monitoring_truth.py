"""Monitoring that never cries wolf: no fire time from before the job existed counts as missed, fire times
Scheduler skipped on purpose are not outages, and a repeated wall-clock hour run twice is reported.

Real handler processes over real HTTP on the real emulator, and the pure comparison where the inputs are
record values that a handler cannot produce on demand (a run's claim and finish times).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.schedule.cron.fire_times import fire_times
from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.monitoring.comparison import check, compare
from scheduler_dedup.handler.monitoring.findings import (
    DST_REPEATED,
    MISSED,
    SINCE_EARLIEST_RECORD,
    SINCE_SCHEDULE_CHANGE,
    SKIPPED_BUSY,
)
from scheduler_dedup.handler.monitoring.run_history import RunHistory
from scheduler_dedup.handler.monitoring.run_view import HistoryRun, rfc3339
from scheduler_dedup.handler.service.delivery import SchedulerHandler
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator

from .conftest import Harness, deliver, scheduler_headers
from .test_run_check import log_lines, run_check

UTC = timezone.utc
EVERY_MINUTE = {"DEDUP_SCHEDULE": "* * * * *", "DEDUP_TIME_ZONE": "Etc/UTC"}


def _check(server: Any, at: str, job: str) -> dict[str, Any]:
    answer = run_check(server, at, {"job_name": job, "grace_seconds": 60, "window_seconds": 3600})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_a_fresh_deploy_is_checked_from_the_time_the_job_got_its_schedule(harness: Harness) -> None:
    """A ``* * * * *`` job deployed at 17:58 and checked at 18:01 over the hour before: the fire times from
    17:02 to 17:57 are not missed runs but times before the job existed: 2 expected, 2 recorded, none missed."""
    server = harness.server(**EVERY_MINUTE, DEDUP_SCHEDULE_SINCE="2026-11-30T17:58:00Z")
    for minute in (58, 59):
        assert deliver(server.url, scheduler_headers("fresh", f"2026-11-30T17:{minute}:00Z")).status_code == 200
    report = _check(server, "2026-11-30T18:01:00Z", "fresh")
    assert report["status"] == "ok" and report["missed"] == [], report
    assert (report["expected"], report["recorded"]) == (2, 2)
    assert (report["active_since"], report["active_since_source"]) == ("2026-11-30T17:58:00Z", SINCE_SCHEDULE_CHANGE)
    assert not [line for line in log_lines(server) if line.get("event") == "missed_run"]


def test_without_the_schedule_change_time_the_earliest_record_bounds_the_check(harness: Harness) -> None:
    server = harness.server(**EVERY_MINUTE)  # a hand-written deployment: no DEDUP_SCHEDULE_SINCE
    for minute in (58, 59):
        assert deliver(server.url, scheduler_headers("handmade", f"2026-11-30T17:{minute}:00Z")).status_code == 200
    report = _check(server, "2026-11-30T18:01:00Z", "handmade")
    assert report["status"] == "ok" and report["expected"] == 2, report
    assert (report["active_since"], report["active_since_source"]) == ("2026-11-30T17:58:00Z", SINCE_EARLIEST_RECORD)


def test_the_bound_does_not_hide_a_run_missed_after_the_job_existed(harness: Harness) -> None:
    server = harness.server(**EVERY_MINUTE, DEDUP_SCHEDULE_SINCE="2026-11-30T17:56:00Z")
    for minute in (56, 58, 59):  # 17:57 never delivered
        assert deliver(server.url, scheduler_headers("gappy", f"2026-11-30T17:{minute}:00Z")).status_code == 200
    report = _check(server, "2026-11-30T18:01:00Z", "gappy")
    assert report["status"] == "missed" and report["missed"] == ["2026-11-30T17:57:00Z"], report
    assert (report["expected"], report["recorded"]) == (4, 3)
    missed = [line["schedule_time"] for line in log_lines(server) if line.get("event") == "missed_run"]
    assert missed == ["2026-11-30T17:57:00Z"]


def test_runs_since_a_day_passes_on_the_first_day_of_a_job(harness: Harness) -> None:
    """The docs' CI check, ``runs --job J --since 1d``, passes right after a deploy: the day before the job existed
    holds no missed run."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    since = now - timedelta(minutes=20)
    server = harness.server(DEDUP_SCHEDULE="*/5 * * * *", DEDUP_TIME_ZONE="Etc/UTC",
                            DEDUP_SCHEDULE_SINCE=rfc3339(since) or "")
    fires = [f.first for f in fire_times("*/5 * * * *", "Etc/UTC", since, now)]
    for when in fires:
        assert deliver(server.url, scheduler_headers("first-day", rfc3339(when) or "")).status_code == 200
    env = {**os.environ, **harness.emulator.endpoint_env(), "COLUMNS": "200"}
    out = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "runs", "--job", "first-day",
                          "--since", "1d"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    # a fire time that came due while the test ran is expected but still within its grace period (late, not missed)
    recorded = re.search(r"OK first-day: (\d+)/(\d+) expected runs recorded", out.stdout)
    assert recorded and int(recorded.group(1)) == len(fires) <= int(recorded.group(2)) <= len(fires) + 1, out.stdout
    assert not re.search(r"\d+ missed", out.stdout) and "not expected (the job got its schedule then)" in out.stdout


def _run(schedule_time: datetime, claimed: datetime, finished: datetime | None, status: str = "completed") -> HistoryRun:
    return HistoryRun(run_id=f"{schedule_time:%H%M}" * 8, job_name="busy", schedule_time=schedule_time,
                      status=status, stuck=False, attempts=1, attempt_id="a" * 32, previous_attempt_id=None,
                      manual=False, claimed_at=claimed, finished_at=finished, duration_seconds=None,
                      result_bytes=None, result_dropped=None, error=None, schedule="*/5 * * * *",
                      time_zone="Etc/UTC", project="p", location="")


def test_a_fire_time_scheduler_skipped_while_the_previous_run_was_running_is_not_missed() -> None:
    """``*/5``: the 10:00 run ran (and was retried) until 10:07:30, so Scheduler skipped 10:05 (Retry jobs page:
    "the next scheduled execution time might be skipped if the retries continue through that time")."""
    t = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    runs = [_run(t, t + timedelta(seconds=2), t + timedelta(minutes=7, seconds=30)),
            _run(t + timedelta(minutes=10), t + timedelta(minutes=10, seconds=1), t + timedelta(minutes=11))]
    report = compare(runs, job_name="busy", schedule="*/5 * * * *", time_zone="Etc/UTC", since=t,
                     until=t + timedelta(minutes=15), now=t + timedelta(hours=1), grace_seconds=60)
    assert report.ok, report.findings
    (skipped,) = report.of(SKIPPED_BUSY)
    assert skipped.schedule_time == t + timedelta(minutes=5) and "10:00:00Z" in skipped.detail
    # The same gap after a run that had finished in time is an outage.
    runs[0] = _run(t, t + timedelta(seconds=2), t + timedelta(minutes=3))
    report = compare(runs, job_name="busy", schedule="*/5 * * * *", time_zone="Etc/UTC", since=t,
                     until=t + timedelta(minutes=15), now=t + timedelta(hours=1), grace_seconds=60)
    assert [(f.kind, f.schedule_time) for f in report.problems] == [(MISSED, t + timedelta(minutes=5))]


def _ny_handler(emulator: FirestoreEmulator, **settings: Any) -> SchedulerHandler:
    config = Settings(project=emulator.project, schedule="30 1 * * *", time_zone="America/New_York", **settings)
    idempotency = Idempotency(emulator.connect(), config.lease_seconds, config.retention_seconds)
    return SchedulerHandler(config, idempotency, lambda run: {"ran": rfc3339(run.schedule_time)})


def _fall_back_deliveries(handler: SchedulerHandler) -> list[str]:
    # 01:30 in New York on 1 November 2026 happens twice: 05:30Z (EDT) and 06:30Z (EST).
    answers = []
    for stamp in ("2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"):
        body, status, _ = handler.handle({"X-CloudScheduler-JobName": "ny", "X-CloudScheduler-ScheduleTime": stamp})
        assert status == 200, body
        answers.append(str(body["status"]))
    return answers


def _ny_report(emulator: FirestoreEmulator) -> Any:
    return check(RunHistory(emulator.connect()), "ny", schedule="30 1 * * *", time_zone="America/New_York",
                 since=datetime(2026, 10, 31, tzinfo=UTC), until=datetime(2026, 11, 3, tzinfo=UTC),
                 now=datetime(2026, 11, 5, tzinfo=UTC), active_since=datetime(2026, 10, 1, tzinfo=UTC))


def test_a_repeated_wall_clock_time_run_at_both_instants_is_reported(emulator: FirestoreEmulator) -> None:
    assert _fall_back_deliveries(_ny_handler(emulator)) == ["processed"] * 4  # two executions of 01:30
    report = _ny_report(emulator)
    (twice,) = report.of(DST_REPEATED)
    assert twice.schedule_time == datetime(2026, 11, 1, 6, 30, tzinfo=UTC) and "DEDUP_KEY_LOCAL_TIME" in twice.detail
    assert report.ok and report.expected == 3 == report.recorded


def test_keyed_on_the_wall_clock_the_second_instant_is_a_duplicate(emulator: FirestoreEmulator) -> None:
    assert _fall_back_deliveries(_ny_handler(emulator, key_local_time=True)) == [
        "processed", "processed", "duplicate", "processed"]
    report = _ny_report(emulator)
    assert not report.of(DST_REPEATED) and report.ok and report.expected == 3 == report.recorded


def test_the_settings_refuse_a_schedule_change_time_that_is_not_rfc3339() -> None:
    import pytest

    from scheduler_dedup.handler.core.errors import ConfigError

    with pytest.raises(ConfigError, match="DEDUP_SCHEDULE_SINCE='yesterday' is not an RFC 3339"):
        Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_SCHEDULE_SINCE": "yesterday"})
    with pytest.raises(ConfigError, match="DEDUP_KEY_LOCAL_TIME='yes' is not true or false"):
        Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_KEY_LOCAL_TIME": "yes"})
    parsed = Settings.from_env({"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_SCHEDULE_SINCE": "2026-11-30T18:58:00+01:00"})
    assert parsed.schedule_since == datetime(2026, 11, 30, 17, 58, tzinfo=UTC)
    assert json.dumps(rfc3339(parsed.schedule_since)) == '"2026-11-30T17:58:00Z"'


def test_a_fire_time_skipped_while_the_previous_run_was_still_being_retried_before_its_claim_is_not_missed() -> None:
    """``*/5``: the 10:00 run's first deliveries failed before they could claim it (released, so no record), a
    retry claimed it at 10:07:45 and finished at 10:08. Scheduler was busy with that run from 10:00 (its first
    attempt) and skipped 10:05; the record keeps only the last claim, so counting from the claim paged a miss.
    A claim within the grace period (the retry window) counts from the schedule time; a delivery replayed later
    than that (a claim an hour late) from its claim."""
    t = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    runs = [_run(t, t + timedelta(minutes=7, seconds=45), t + timedelta(minutes=8)),
            _run(t + timedelta(minutes=10), t + timedelta(minutes=10, seconds=1), t + timedelta(minutes=11))]
    report = compare(runs, job_name="busy", schedule="*/5 * * * *", time_zone="Etc/UTC", since=t,
                     until=t + timedelta(minutes=15), now=t + timedelta(hours=1), grace_seconds=600)
    assert report.ok, report.findings
    assert [f.schedule_time for f in report.of(SKIPPED_BUSY)] == [t + timedelta(minutes=5)]
    runs[0] = _run(t, t + timedelta(hours=1), t + timedelta(hours=1, minutes=1))
    report = compare(runs, job_name="busy", schedule="*/5 * * * *", time_zone="Etc/UTC", since=t,
                     until=t + timedelta(minutes=15), now=t + timedelta(hours=2), grace_seconds=600)
    assert [(f.kind, f.schedule_time) for f in report.problems] == [(MISSED, t + timedelta(minutes=5))]


def test_fire_times_before_the_job_was_created_after_its_schedule_time_was_recorded_are_not_missed() -> None:
    """The component records DEDUP_SCHEDULE_SINCE before the Cloud Run service that carries it, and creates (or
    updates) the Scheduler job only after that service and its invoker grant: on a fresh deploy of ``* * * * *`` at
    17:50 the job existed from 17:53, so 17:50 to 17:52 were never due and page nobody. A fire time
    past the settling time that has no record is missed; one recorded within it counts, and the first record ends
    it (test_the_bound_does_not_hide_a_run_missed_after_the_job_existed)."""
    since = datetime(2026, 11, 30, 17, 50, tzinfo=UTC)
    runs = [_run(since + timedelta(minutes=m), since + timedelta(minutes=m, seconds=1),
                 since + timedelta(minutes=m, seconds=2)) for m in range(3, 20) if m != 17]
    runs = [replace(r, schedule="* * * * *", schedule_since=since) for r in runs]
    report = compare(runs, job_name="busy", schedule="* * * * *", time_zone="Etc/UTC", since=since - timedelta(hours=1),
                     until=since + timedelta(minutes=20), now=since + timedelta(hours=1), grace_seconds=60)
    assert [(f.kind, f.schedule_time) for f in report.problems] == [(MISSED, since + timedelta(minutes=17))]
    assert report.active_since == since and report.expected == 17 and report.recorded == 16
