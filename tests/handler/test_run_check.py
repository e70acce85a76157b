"""The watchdog's run check over real HTTP against the real emulator: what it reports, logs and never writes."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

from scheduler_dedup.handler.core.paths import CHECK_LOCATION_GUARD, CHECK_PATH
from scheduler_dedup.local.servers.handlers import HandlerServer

from .conftest import Harness, deliver, scheduler_headers
from .fake_google import FakeGoogle

SCHEDULE = {"DEDUP_SCHEDULE": "*/15 * * * *", "DEDUP_TIME_ZONE": "Etc/UTC"}
BODY = {"job_name": "quarter", "grace_seconds": 300, "window_seconds": 3600}


def watchdog_headers(at: str | None) -> dict[str, str]:
    """The headers the component's watchdog job sends (Scheduler adds its own)."""
    sent = {"Content-Type": "application/json", "X-Dedup-Location": CHECK_LOCATION_GUARD}
    if at is not None:
        sent.update(scheduler_headers("quarter-watchdog", at))
    return sent


def run_check(server: HandlerServer, at: str | None, body: Any = BODY, path: str = CHECK_PATH) -> requests.Response:
    """POST the run check as the watchdog job does: its own Scheduler headers, a JSON body."""
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(server.url.rstrip("/") + path, headers=watchdog_headers(at), data=data, timeout=60)


def log_lines(server: HandlerServer) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


def test_a_skipped_fire_time_is_reported_missed_once_and_nothing_is_written(harness: Harness) -> None:
    server = harness.server(**SCHEDULE)
    for stamp in ("12:00", "12:15", "12:45", "13:00"):  # 12:30 never delivered, as if the job was paused
        assert deliver(server.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z")).status_code == 200
    records, starts = harness.records(), len(harness.starts())

    first = run_check(server, "2026-10-16T13:05:00Z")
    assert first.status_code == 200, first.text
    report = first.json()
    assert report["status"] == "missed" and report["missed"] == ["2026-10-16T12:30:00Z"]
    # fire times t with 12:00 <= t < 13:00 (t + grace in the hour before the check) were due
    assert (report["since"], report["until"]) == ("2026-10-16T12:00:00Z", "2026-10-16T13:00:00Z")
    assert (report["expected"], report["recorded"]) == (4, 3)

    second = run_check(server, "2026-10-16T14:05:00Z").json()  # the next hourly check: 13:00 <= t < 14:00
    assert second["missed"] == ["2026-10-16T13:15:00Z", "2026-10-16T13:30:00Z", "2026-10-16T13:45:00Z"]
    assert "2026-10-16T12:30:00Z" not in second["missed"], "each missed run is reported by one check only"

    assert harness.records() == records, "the check never creates, changes or deletes a run record"
    assert len(harness.starts()) == starts, "the check never runs the job"
    lines = log_lines(server)
    missed = [line for line in lines if line.get("event") == "missed_run"]
    assert [(m["severity"], m["job_name"], m["schedule_time"]) for m in missed] == [
        ("ERROR", "quarter", "2026-10-16T12:30:00Z"), ("ERROR", "quarter", "2026-10-16T13:15:00Z"),
        ("ERROR", "quarter", "2026-10-16T13:30:00Z"), ("ERROR", "quarter", "2026-10-16T13:45:00Z")]
    beats = [line for line in lines if line.get("event") == "run_check"]
    assert [(b["severity"], b["expected"], b["missed"]) for b in beats] == [("INFO", 4, 1), ("INFO", 4, 3)]
    assert not [line for line in lines if line.get("event") == "delivery" and line.get("job_name") == "quarter-watchdog"]


def test_a_complete_window_is_ok_and_a_run_still_in_its_grace_period_is_not_missed(harness: Harness) -> None:
    server = harness.server(**SCHEDULE)
    for stamp in ("12:00", "12:15", "12:30", "12:45"):
        deliver(server.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z"))
    ok = run_check(server, "2026-10-16T13:05:00Z").json()
    assert ok["status"] == "ok" and ok["missed"] == [] and ok["expected"] == 4
    # 13:00 has no record but its grace runs to 13:05; a check at 13:04 leaves it to the next window
    early = run_check(server, "2026-10-16T13:04:00Z", body={**BODY, "window_seconds": 60}).json()
    assert early["missed"] == [] and early["until"] == "2026-10-16T12:59:00Z"


def test_failed_runs_are_in_the_findings_but_not_missed(harness: Harness) -> None:
    harness.plan("quarter@2026-10-16T12:15:00Z", fail="permanent")
    server = harness.server(**SCHEDULE)
    for stamp in ("12:00", "12:15", "12:30", "12:45"):
        deliver(server.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z"))
    report = run_check(server, "2026-10-16T13:05:00Z").json()
    assert report["status"] == "ok" and report["missed"] == []
    assert [(f["kind"], f["schedule_time"]) for f in report["findings"]] == [("failed", "2026-10-16T12:15:00Z")]


def kill_mid_job(harness: Harness, job: str, schedule_time: str, lease_seconds: float = 2) -> None:
    """Leave a run in progress whose attempt died: SIGKILL its handler mid-job, then outwait the lease."""
    harness.plan(f"{job}@{schedule_time}", sleep=120)
    victim = harness.server(DEDUP_LEASE_SECONDS=f"{lease_seconds:g}", **SCHEDULE)
    before = sum(e["job_name"] == job for e in harness.starts())
    ThreadPoolExecutor(1).submit(lambda: deliver(victim.url, scheduler_headers(job, schedule_time), timeout=10))
    deadline = time.monotonic() + 30
    while sum(e["job_name"] == job for e in harness.starts()) == before:
        assert time.monotonic() < deadline, "the victim never started the job"
        time.sleep(0.05)
    victim.kill()
    # no renewal after the kill: wait until the lease has expired by Firestore's clock
    harness.wait_for_lease_expiry([e for e in harness.starts() if e["job_name"] == job][-1]["run_id"])


def test_a_run_whose_attempt_died_and_was_never_retried_is_reported_stuck(harness: Harness) -> None:
    server = harness.server(**SCHEDULE)
    for stamp in ("12:00", "12:30", "12:45"):
        deliver(server.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z"))
    kill_mid_job(harness, "quarter", "2026-10-16T12:15:00Z")
    report = run_check(server, "2026-10-16T13:05:00Z").json()
    assert (report["status"], report["missed"], report["stuck"]) == ("stuck", [], ["2026-10-16T12:15:00Z"]), report
    (line,) = [entry for entry in log_lines(server) if entry.get("event") == "stuck_run"]
    assert line["severity"] == "ERROR" and line["schedule_time"] == "2026-10-16T12:15:00Z" and len(line["run_id"]) == 64
    (beat,) = [entry for entry in log_lines(server) if entry.get("event") == "run_check"]
    assert (beat["missed"], beat["stuck"]) == (0, 1)


def test_a_bad_body_is_400_naming_the_field(harness: Harness) -> None:
    server = harness.server(**SCHEDULE)
    for body, field in ((b"not json", "body"), ({"grace_seconds": 300, "window_seconds": 3600}, "job_name"),
                        ({**BODY, "window_seconds": 0}, "window_seconds"), ({**BODY, "grace_seconds": "5m"}, "grace_seconds")):
        response = run_check(server, "2026-10-16T13:05:00Z", body=body)
        assert response.status_code == 400 and response.json()["field"] == field, response.text
    assert not [line for line in log_lines(server) if line.get("event") == "run_check"], "no heartbeat for a bad request"


def test_without_a_schedule_the_check_fails_loudly_and_sends_no_heartbeat(harness: Harness) -> None:
    server = harness.server()
    response = run_check(server, "2026-10-16T13:05:00Z")
    assert response.status_code == 500 and "DEDUP_SCHEDULE" in response.json()["error"]
    assert not [line for line in log_lines(server) if line.get("event") == "run_check"]


def test_a_forced_watchdog_run_checks_up_to_now_not_the_future(harness: Harness) -> None:
    server = harness.server(**SCHEDULE)
    report = run_check(server, "2999-01-01T00:00:00Z", body={**BODY, "window_seconds": 900}).json()
    assert report["now"] < "2999", report
    assert report["status"] == "missed"  # no records at all around now


def test_a_watchdog_request_on_the_delivery_path_is_refused_and_runs_nothing(harness: Harness) -> None:
    """An image older than the run check (or a proxy that drops the path) takes the watchdog's POST for a
    Scheduler delivery; its location header guard makes that a 400, never a run of the job."""
    server = harness.server(**SCHEDULE)
    response = run_check(server, "2026-10-16T13:05:00Z", path="/")
    assert response.status_code == 400 and response.json()["header"] == "X-Dedup-Location", response.text
    assert harness.records() == {} and harness.starts() == []


def test_the_check_under_the_function_name_is_the_check(harness: Harness) -> None:
    """The watchdog calls ``https://REGION-PROJECT.cloudfunctions.net/NAME/dedup/run-check``. Google strips NAME before
    a 1st gen function sees the path (GoogleCloudPlatform/functions-framework-python#54); nothing documents it for
    2nd gen, so the handler takes a path that ends in the check path, with NAME or without, as the check."""
    server = harness.server(**SCHEDULE)
    response = run_check(server, "2026-10-16T13:05:00Z", path="/nightly-report" + CHECK_PATH)
    assert response.status_code == 200 and response.json()["status"] == "missed", response.text
    assert harness.records() == {} and harness.starts() == []


def test_caller_verification_applies_to_the_check(harness: Harness) -> None:
    server = harness.server(**SCHEDULE, DEDUP_OIDC_AUDIENCE="https://aud.example", DEDUP_ALLOWED_CALLERS="w@p.iam.gserviceaccount.com")
    response = run_check(server, "2026-10-16T13:05:00Z")
    assert response.status_code == 401, response.text
    assert not [line for line in log_lines(server) if line.get("event") in ("run_check", "missed_run")]


def test_hourly_checks_tile_time_across_both_dst_changes_in_berlin(harness: Harness) -> None:
    """A paused hourly Europe/Berlin job: consecutive hourly checks report every fire time missed exactly once,
    the hour that occurs twice (autumn) once, and the hour that does not exist (spring) never."""
    server = harness.server(DEDUP_SCHEDULE="0 * * * *", DEDUP_TIME_ZONE="Europe/Berlin")
    body = {"job_name": "berlin", "grace_seconds": 300, "window_seconds": 3600}
    for day, hours in (("2026-03-28", range(22, 24)), ("2026-03-29", range(0, 4)),
                       ("2026-10-24", range(22, 24)), ("2026-10-25", range(0, 4))):
        reported: list[str] = []
        for hour in hours:
            answer = run_check(server, f"{day}T{hour:02d}:07:00Z", body=body).json()
            reported += answer["missed"]
        assert len(reported) == len(set(reported)), f"a fire time was reported twice: {reported}"
        assert all(stamp.endswith(":00:00Z") for stamp in reported), reported
        if day == "2026-03-29":  # 01:00 CET, then 03:00, 04:00, 05:00 CEST: 02:00 local does not exist, never missed
            assert reported == ["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z",
                                "2026-03-29T03:00:00Z"], reported
        if day == "2026-10-25":  # 02:00 occurs twice (00:00Z CEST, 01:00Z CET): one fire time, missed once, at its
            # later instant (a run at either would have counted); then 03:00 and 04:00 CET
            assert reported == ["2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"], reported


def test_a_schedule_change_settles_like_a_fresh_deploy(harness: Harness) -> None:
    """Hourly -> every minute, deployed at 12:58: Scheduler still delivered the old 13:00 run and applied the change
    at 13:04 (it applies changes late). The old delivery at 13:00, a fire time of both, ended the settle window, so
    13:01 to 13:03 were three false missed-run pages; now only a delivery the old schedule cannot explain ends it."""
    old = harness.server(DEDUP_SCHEDULE="0 * * * *", DEDUP_TIME_ZONE="Etc/UTC",
                         DEDUP_SCHEDULE_SINCE="2026-11-29T08:00:00Z")
    for hour in (10, 11, 12):
        assert deliver(old.url, scheduler_headers("changed", f"2026-11-30T{hour}:00:00Z")).status_code == 200
    new = harness.server(DEDUP_SCHEDULE="* * * * *", DEDUP_TIME_ZONE="Etc/UTC",
                         DEDUP_SCHEDULE_SINCE="2026-11-30T12:58:00Z")
    delivered = ["13:00", *(f"13:{m:02d}" for m in range(4, 60)), "14:00"]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda hm: deliver(new.url, scheduler_headers("changed", f"2026-11-30T{hm}:00Z")),
                                delivered))
    assert {a.status_code for a in answers} == {200}
    body = {"job_name": "changed", "grace_seconds": 60, "window_seconds": 3600}
    report = run_check(new, "2026-11-30T14:01:00Z", body).json()
    assert report["status"] == "ok" and report["missed"] == [], report
    assert (report["expected"], report["recorded"]) == (57, 57)  # 13:00 and 13:04..13:59; 13:01..13:03 settling
    assert not [f for f in report["findings"] if f["kind"] in ("unexpected", "missed")]
    # after the change took effect, a lost delivery is missed again
    lost = run_check(new, "2026-11-30T15:01:00Z", body).json()
    assert lost["missed"][:2] == ["2026-11-30T14:01:00Z", "2026-11-30T14:02:00Z"] and len(lost["missed"]) == 59


def test_a_paused_job_is_reported_paused_not_missed_and_the_heartbeat_goes_on(harness: Harness) -> None:
    """A planned pause paged a CRITICAL missed run for every fire time. The component sets DEDUP_PAUSED_SINCE at the
    pause; the check reports the span as one paused finding."""
    before = harness.server(**SCHEDULE, DEDUP_SCHEDULE_SINCE="2026-10-16T08:00:00Z")
    for stamp in ("11:00", "11:15", "11:30", "11:45", "12:00", "12:15"):
        assert deliver(before.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z")).status_code == 200
    paused = harness.server(**SCHEDULE, DEDUP_SCHEDULE_SINCE="2026-10-16T12:20:00Z",
                            DEDUP_PAUSED_SINCE="2026-10-16T12:20:00Z")
    first = run_check(paused, "2026-10-16T13:05:00Z")
    assert first.status_code == 200, first.text
    report = first.json()
    assert report["status"] == "paused" and report["missed"] == [], report
    assert report["paused_since"] == "2026-10-16T12:20:00Z"
    (span,) = [f for f in report["findings"] if f["kind"] == "paused"]
    assert "2026-10-16T12:45:00Z" in span["detail"]
    later = run_check(paused, "2026-10-17T13:05:00Z").json()  # a day later: still paused, still no page
    assert later["status"] == "paused" and later["missed"] == [] and later["expected"] == 0
    lines = log_lines(paused)
    assert not [line for line in lines if line.get("event") == "missed_run"]
    assert len([line for line in lines if line.get("event") == "run_check"]) == 2
    # the same records without the pause: the fire times after the settle window are missed runs
    unpaused = harness.server(**SCHEDULE, DEDUP_SCHEDULE_SINCE="2026-10-16T12:20:00Z")
    assert run_check(unpaused, "2026-10-16T13:05:00Z").json()["missed"] == ["2026-10-16T12:45:00Z"]


def test_a_pause_never_hides_a_run_missed_before_it_nor_after_the_resume(harness: Harness) -> None:
    """A pause re-stamped DEDUP_SCHEDULE_SINCE, so a run missed just before it was never expected. The component now
    records the pause beside the schedule's start (DEDUP_PAUSED_SINCE, then DEDUP_RESUMED_AT): the run missed before
    the pause is missed, the paused span is paused, and after the resume a missed run is missed again."""
    env = {**SCHEDULE, "DEDUP_SCHEDULE_SINCE": "2026-10-16T08:00:00Z"}
    before = harness.server(**env)
    for stamp in ("11:00", "11:15", "11:30", "11:45", "12:00"):  # 12:15 lost, just before the pause at 12:20
        assert deliver(before.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z")).status_code == 200
    paused = harness.server(**env, DEDUP_PAUSED_SINCE="2026-10-16T12:20:00Z")
    report = run_check(paused, "2026-10-16T13:05:00Z").json()
    assert report["missed"] == ["2026-10-16T12:15:00Z"] and report["paused_since"] == "2026-10-16T12:20:00Z", report
    (span,) = [f for f in report["findings"] if f["kind"] == "paused"]
    assert "is paused since 2026-10-16T12:20:00Z: 2 fire time(s)" in span["detail"], span
    resumed = harness.server(**env, DEDUP_PAUSED_SINCE="2026-10-16T12:20:00Z", DEDUP_RESUMED_AT="2026-10-16T13:20:00Z")
    for stamp in ("13:30", "14:00"):  # 13:45 lost after the resume
        assert deliver(resumed.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z")).status_code == 200
    assert run_check(resumed, "2026-10-16T13:05:00Z").json()["missed"] == ["2026-10-16T12:15:00Z"]
    after = run_check(resumed, "2026-10-16T14:05:00Z").json()  # 13:00 <= t < 14:00
    assert after["missed"] == ["2026-10-16T13:45:00Z"] and after["paused_since"] is None, after
    (span,) = [f for f in after["findings"] if f["kind"] == "paused"]
    assert "was paused from 2026-10-16T12:20:00Z until 2026-10-16T13:20:00Z: 2 fire time(s)" in span["detail"], span
    assert "2026-10-16T13:00:00Z to 2026-10-16T13:15:00Z" in span["detail"]
    with pytest.raises(RuntimeError, match="DEDUP_RESUMED_AT=.* ends a pause that has no start"):
        HandlerServer(harness.env(**env, DEDUP_RESUMED_AT="2026-10-16T13:20:00Z")).start()


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_failure_streak_alerts_once_at_the_threshold_and_a_recovery_follows(harness: Harness) -> None:
    """Every failure paged. With failure_threshold 3 the check logs one failure_streak line, at the third failed run
    in a row, and one run_recovered line at the next completed run; two failures in a row page nothing."""
    base = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=30)
    times = [base + timedelta(minutes=m) for m in range(8)]
    outcomes = ["ok", "fail", "fail", "ok", "fail", "fail", "fail", "ok"]
    for t, outcome in zip(times, outcomes):
        if outcome == "fail":
            harness.plan(f"streaky@{_stamp(t)}", fail="permanent")
    server = harness.server(DEDUP_SCHEDULE="0 0 1 1 *", DEDUP_TIME_ZONE="Etc/UTC")
    for t in times:
        assert deliver(server.url, scheduler_headers("streaky", _stamp(t))).status_code == 200
    body = {"job_name": "streaky", "grace_seconds": 60, "window_seconds": 3600, "failure_threshold": 3}
    report = run_check(server, None, body).json()
    assert report["status"] == "failing", report
    assert report["failing"] == [_stamp(times[6])] and report["recovered"] == [_stamp(times[7])]
    lines = log_lines(server)
    streaks = [line for line in lines if line.get("event") == "failure_streak"]
    assert [(s["severity"], s["schedule_time"]) for s in streaks] == [("ERROR", _stamp(times[6]))]
    assert "3 consecutive run(s) failed" in streaks[0]["error"]
    recovered = [line for line in lines if line.get("event") == "run_recovered"]
    assert [r["schedule_time"] for r in recovered] == [_stamp(times[7])]
    # the default threshold of 1: the first failure of each streak, and a recovery after each
    one = run_check(server, None, {**body, "failure_threshold": 1}).json()
    assert one["failing"] == [_stamp(times[1]), _stamp(times[4])]
    assert one["recovered"] == [_stamp(times[3]), _stamp(times[7])]
    refused = run_check(server, None, {**body, "failure_threshold": 0})
    assert refused.status_code == 400 and refused.json()["field"] == "failure_threshold"


def test_a_run_still_in_progress_past_the_maximum_runtime_is_reported_though_it_renews(harness: Harness) -> None:
    """A hung job that keeps renewing its lease was never flagged (stuck needs an expired lease)."""
    at = _stamp(datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=30))
    harness.plan("slow", sleep=9)
    server = harness.server(DEDUP_SCHEDULE="0 0 1 1 *", DEDUP_TIME_ZONE="Etc/UTC", DEDUP_LEASE_SECONDS="3")
    body = {"job_name": "slow", "grace_seconds": 60, "window_seconds": 60, "max_runtime_seconds": 2}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(deliver, server.url, scheduler_headers("slow", at))
        deadline = time.monotonic() + 30
        while not harness.starts() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(4.5)  # past the 2 s limit, and past the 3 s lease: only renewals keep it alive
        report = run_check(server, None, body).json()
        assert running.result().status_code == 200
    assert report["status"] == "long_run" and report["long_run"] == [at] and report["stuck"] == [], report
    (line,) = [line for line in log_lines(server) if line.get("event") == "long_run"]
    assert line["severity"] == "ERROR" and "max_runtime_seconds" in line["error"]
    assert run_check(server, None, body).json()["long_run"] == []  # finished now: nothing more


def test_a_pause_made_outside_the_stack_is_recognised_where_the_job_state_can_be_read(
        harness: Harness, google: FakeGoogle) -> None:
    """``gcloud scheduler jobs pause`` sets no DEDUP_PAUSED_SINCE; with DEDUP_SCHEDULER_API the check reads the job's
    state and reports paused from its last user update (never before its newest run). Without the permission it
    warns and reports missed runs, as it must when it cannot tell."""
    job = "projects/demo-project/locations/us-central1/jobs/quarter"
    env = {**SCHEDULE, "DEDUP_SCHEDULER_JOB": job, "DEDUP_SCHEDULE_SINCE": "2026-10-16T08:00:00Z",
           "DEDUP_SCHEDULER_API": google.url, "DEDUP_TARGET_AUTH": "none"}
    server = harness.server(**env)
    for stamp in ("11:45", "12:00", "12:15"):
        assert deliver(server.url, scheduler_headers("quarter", f"2026-10-16T{stamp}:00Z")).status_code == 200
    unreadable = run_check(server, "2026-10-16T13:05:00Z").json()
    assert unreadable["missed"] == ["2026-10-16T12:30:00Z", "2026-10-16T12:45:00Z"], unreadable
    assert [line for line in log_lines(server) if line.get("outcome") == "job_state_unreadable"]
    google.scheduler_jobs[job] = {"state": "PAUSED", "userUpdateTime": "2026-10-16T12:40:00Z"}
    report = run_check(server, "2026-10-16T13:05:00Z").json()
    assert report["paused_since"] == "2026-10-16T12:40:00Z" and report["missed"] == ["2026-10-16T12:30:00Z"], report
    (span,) = [f for f in report["findings"] if f["kind"] == "paused"]
    assert "1 fire time(s)" in span["detail"]
    google.scheduler_jobs[job] = {"state": "ENABLED", "userUpdateTime": "2026-10-16T12:40:00Z"}
    assert run_check(server, "2026-10-16T13:05:00Z").json()["status"] == "missed"
    assert google.gets("/jobs/quarter")
