"""The HTTP contract of the dedup handler, over real HTTP against the real Firestore emulator."""

from __future__ import annotations

import http.client
import json
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlparse

import pytest
from google.api_core.datetime_helpers import DatetimeWithNanoseconds

from scheduler_dedup.local.servers.handlers import HandlerServer

from .conftest import Harness, deliver, scheduler_headers

T = "2026-10-16T12:00:00Z"


def raw_post(url: str, headers: list[tuple[str, str]]) -> tuple[int, dict[str, Any]]:
    """POST with exactly these header lines (names as given, repeats allowed), as a proxy or HTTP/2 might."""
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    conn.putrequest("POST", "/")
    for name, value in [*headers, ("Content-Length", "0")]:
        conn.putheader(name, value)
    conn.endheaders()
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_first_delivery_runs_and_duplicate_replays_without_running(harness: Harness) -> None:
    server = harness.server()
    first = deliver(server.url, scheduler_headers("nightly", T))
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["status"] == "processed"
    assert len(body["run_id"]) == 64
    assert body["result"]["job"] == "nightly"

    second = deliver(server.url, scheduler_headers("nightly", T))
    assert second.status_code == 200
    assert second.json() == {"status": "duplicate", "run_id": body["run_id"], "result": body["result"]}
    assert len(harness.starts(body["run_id"])) == 1

    record = harness.records()[body["run_id"]]
    assert record["status"] == "completed"
    assert len(record["attempt_id"]) == 32
    assert record["job_name"] == "nightly"
    assert record["schedule_time"] == datetime(2026, 10, 16, 12, tzinfo=timezone.utc)
    assert record["project"] == harness.emulator.project and record["location"] == ""
    assert record["result"] == body["result"]
    for stamp in ("expire_at", "lease_expires", "claimed_at", "finished_at"):
        assert isinstance(record[stamp], DatetimeWithNanoseconds), stamp
    retention = record["expire_at"] - record["finished_at"]
    assert timedelta(days=7) - timedelta(seconds=30) < retention < timedelta(days=7) + timedelta(seconds=30)


def test_lower_case_headers_as_http2_sends_them(harness: Harness) -> None:
    server = harness.server()
    status, body = raw_post(server.url, [("x-cloudscheduler-jobname", "lower"), ("x-cloudscheduler-scheduletime", T)])
    assert status == 200
    run_id = body["run_id"]
    upper = deliver(server.url, scheduler_headers("lower", T))
    assert upper.json() == {"status": "duplicate", "run_id": run_id, "result": upper.json()["result"]}
    assert len(harness.starts()) == 1


def test_offset_equivalent_schedule_times_are_one_run(harness: Harness) -> None:
    server = harness.server()
    a = deliver(server.url, scheduler_headers("tz", "2026-10-16T12:00:00Z")).json()
    b = deliver(server.url, scheduler_headers("tz", "2026-10-16T05:00:00-07:00")).json()
    c = deliver(server.url, scheduler_headers("tz", "2026-10-16T12:00:00.000+00:00")).json()
    assert a["status"] == "processed" and b["status"] == "duplicate" and c["status"] == "duplicate"
    assert a["run_id"] == b["run_id"] == c["run_id"]
    assert len(harness.starts()) == 1


def test_project_and_location_are_part_of_the_run_key(harness: Harness) -> None:
    server = harness.server()
    ids = set()
    for project, location in [("proj-a", "us-central1"), ("proj-b", "us-central1"), ("proj-a", "europe-west1")]:
        r = deliver(server.url, scheduler_headers("same-id", T, **{"X-Dedup-Project": project,
                                                                   "X-Dedup-Location": location}))
        assert r.json()["status"] == "processed", r.text
        ids.add(r.json()["run_id"])
    assert len(ids) == 3
    assert len(harness.starts()) == 3
    assert {(r["project"], r["location"]) for r in harness.records().values()} == {
        ("proj-a", "us-central1"), ("proj-b", "us-central1"), ("proj-a", "europe-west1")}


@pytest.mark.parametrize(("headers", "named"), [
    ({}, "X-CloudScheduler-JobName"),
    ({"X-CloudScheduler-ScheduleTime": T}, "X-CloudScheduler-JobName"),
    ({"X-CloudScheduler-JobName": "j"}, "X-CloudScheduler-ScheduleTime"),
    ({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": "yesterday"}, "X-CloudScheduler-ScheduleTime"),
    ({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": "2026-10-16T12:00:00"},
     "X-CloudScheduler-ScheduleTime"),
    ({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": "2026-13-16T12:00:00Z"},
     "X-CloudScheduler-ScheduleTime"),
    ({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": "0001-01-01T00:00:00+01:00"},
     "X-CloudScheduler-ScheduleTime"),
    ({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": "9999-12-31T23:59:59-01:00"},
     "X-CloudScheduler-ScheduleTime"),
    ({"X-CloudScheduler-JobName": "", "X-CloudScheduler-ScheduleTime": T}, "X-CloudScheduler-JobName"),
    ({"X-CloudScheduler-JobName": "bad name/../x", "X-CloudScheduler-ScheduleTime": T}, "X-CloudScheduler-JobName"),
    ({"X-CloudScheduler-JobName": "j", "X-CloudScheduler-ScheduleTime": T, "X-Dedup-Project": "Not A Project"},
     "X-Dedup-Project"),
])
def test_missing_or_malformed_headers_are_400_and_write_nothing(harness: Harness, headers: dict[str, str],
                                                              named: str) -> None:
    server = harness.server()
    response = deliver(server.url, headers)
    assert response.status_code == 400
    assert named in response.json()["error"]
    assert response.json()["header"] == named
    assert harness.records() == {}
    assert harness.starts() == []


def test_retryable_failure_releases_the_claim_and_the_retry_runs(harness: Harness) -> None:
    harness.plan("flaky", fail="retryable", fail_times=1)
    server = harness.server()
    first = deliver(server.url, scheduler_headers("flaky", T))
    assert first.status_code == 500
    assert first.json()["status"] == "released" and "planned retryable failure" in first.json()["error"]
    [released] = harness.records().values()  # released before the 500, with its reason
    assert released["status"] == "released" and released["error"] == first.json()["error"], released
    retry = deliver(server.url, scheduler_headers("flaky", T))
    assert retry.status_code == 200 and retry.json()["status"] == "processed"
    [record] = harness.records().values()
    assert record["status"] == "completed" and record["error"] is None and record["attempts"] == 2, record
    assert record["releases"] == 1 and "previous_attempt_id" not in record, record  # a retry, not a takeover
    assert len(harness.starts()) == 2
    assert deliver(server.url, scheduler_headers("flaky", T)).json()["status"] == "duplicate"
    assert len(harness.starts()) == 2


def test_non_retryable_failure_is_recorded_and_not_retried(harness: Harness) -> None:
    harness.plan("doomed", fail="permanent")
    server = harness.server()
    first = deliver(server.url, scheduler_headers("doomed", T))
    assert first.status_code == 200
    assert first.json()["status"] == "failed" and "planned permanent failure" in first.json()["error"]
    again = deliver(server.url, scheduler_headers("doomed", T))
    assert again.status_code == 200 and again.json()["status"] == "failed"
    assert again.json()["error"] == first.json()["error"]
    assert len(harness.starts()) == 1
    (record,) = harness.records().values()
    assert record["status"] == "failed"


def test_forced_run_is_keyed_apart_from_the_scheduled_run(harness: Harness) -> None:
    server = harness.server()
    future = (datetime.now(timezone.utc) + timedelta(minutes=10)).replace(microsecond=0)
    stamp = future.strftime("%Y-%m-%dT%H:%M:%SZ")
    forced = deliver(server.url, scheduler_headers("forced", stamp)).json()
    assert forced["status"] == "processed"
    assert deliver(server.url, scheduler_headers("forced", stamp)).json()["status"] == "duplicate"
    (record,) = harness.records().values()
    assert record["manual"] is True
    # The same schedule time delivered when it is due (as the real scheduled run) is another run.
    from scheduler_dedup.handler import RunKey
    scheduled = RunKey(harness.emulator.project, "", "forced", future, manual=False)
    assert scheduled.run_id != forced["run_id"]


def test_schedule_time_within_tolerance_is_a_scheduled_run(harness: Harness) -> None:
    server = harness.server(DEDUP_MANUAL_TOLERANCE_SECONDS="30")
    soon = (datetime.now(timezone.utc) + timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert deliver(server.url, scheduler_headers("skew", soon)).json()["status"] == "processed"
    (record,) = harness.records().values()
    assert record["manual"] is False


@pytest.mark.parametrize(("variable", "value"), [
    ("DEDUP_LEASE_SECONDS", "ten"),
    ("DEDUP_LEASE_SECONDS", "0"),
    ("DEDUP_RETENTION_SECONDS", "1"),
    ("DEDUP_MANUAL_TOLERANCE_SECONDS", "-1"),
    ("DEDUP_COLLECTION", "a/b"),
    ("DEDUP_DATABASE", "Bad_Name"),
    ("DEDUP_RETENTION_SECONDS", "99999999999999"),
    ("GOOGLE_CLOUD_PROJECT", "Bad Project!"),
    ("DEDUP_JOB", "no-colon"),
    ("DEDUP_JOB", "scheduler_dedup.local.demo.recording_job:missing"),
    ("GOOGLE_CLOUD_PROJECT", ""),
])
def test_invalid_settings_stop_start_up_naming_the_variable(harness: Harness, variable: str, value: str) -> None:
    server = HandlerServer(harness.env(**{variable: value}))
    with pytest.raises(RuntimeError) as info:
        server.start()
    assert variable in str(info.value)
    assert "ConfigError" in str(info.value)


def test_logs_are_cloud_logging_json(harness: Harness) -> None:
    server = harness.server()
    run_id = deliver(server.url, scheduler_headers("logged", T)).json()["run_id"]
    entries = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    (entry,) = [e for e in entries if e.get("run_id") == run_id]
    assert entry["severity"] == "INFO"
    assert entry["outcome"] == "processed"
    assert entry["job_name"] == "logged"
    assert entry["schedule_time"] == "2026-10-16T12:00:00.000000Z"
    assert len(entry["attempt_id"]) == 32
    assert entry["duration_ms"] > 0
    assert "message" in entry


def test_a_scheduler_header_sent_twice_with_different_values_is_400(harness: Harness) -> None:
    server = harness.server()
    status, body = raw_post(server.url, [("X-CloudScheduler-JobName", "twice"), ("X-CloudScheduler-ScheduleTime", T),
                                         ("X-CloudScheduler-ScheduleTime", "2026-10-16T13:00:00Z")])
    assert status == 400 and body["header"] == "X-CloudScheduler-ScheduleTime", body
    assert harness.records() == {} and harness.starts() == []


def test_firestore_unreachable_answers_500_store_error_and_runs_nothing(harness: Harness) -> None:
    import socket

    # A port bound but never listening refuses every connection, and no other process can take it meanwhile.
    with socket.socket() as nothing_listens:
        nothing_listens.bind(("127.0.0.1", 0))
        store = f"127.0.0.1:{nothing_listens.getsockname()[1]}"
        server = harness.server(FIRESTORE_EMULATOR_HOST=store, DEDUP_STORE_TIMEOUT_SECONDS="1")
        response = deliver(server.url, scheduler_headers("no-store", T))
    assert response.status_code == 500
    assert response.json()["status"] == "store_error" and "retry later" in response.json()["error"]
    assert harness.starts() == []


FULL = "projects/my-proj/locations/europe-west1/jobs/nightly"
WHERE = {"X-Dedup-Project": "my-proj", "X-Dedup-Location": "europe-west1"}


def test_the_short_job_id_and_the_full_job_name_key_one_run(harness: Harness) -> None:
    server = harness.server()
    spellings = [scheduler_headers("nightly", T, **WHERE), scheduler_headers(FULL, T, **WHERE),
                 scheduler_headers(FULL, T)]
    answers = [deliver(server.url, headers).json() for headers in spellings]
    assert [a["status"] for a in answers] == ["processed", "duplicate", "duplicate"], answers
    assert len({a["run_id"] for a in answers}) == 1
    assert len(harness.starts()) == 1
    (record,) = harness.records().values()
    assert (record["job_name"], record["project"], record["location"]) == ("nightly", "my-proj", "europe-west1")


@pytest.mark.parametrize(("header", "value"), [("X-Dedup-Project", "other-proj"), ("X-Dedup-Location", "us-east1")])
def test_a_full_job_name_disagreeing_with_a_dedup_header_is_400_naming_both(harness: Harness, header: str,
                                                                           value: str) -> None:
    server = harness.server()
    response = deliver(server.url, scheduler_headers(FULL, T, **{**WHERE, header: value}))
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["header"] == header
    assert header in body["error"] and "X-CloudScheduler-JobName" in body["error"] and value in body["error"]
    assert harness.records() == {} and harness.starts() == []


def test_a_header_repeated_with_the_same_value_is_one_value(harness: Harness) -> None:
    """Repeated header lines reach the handler comma-joined (gunicorn/WSGI); equal values are one value."""
    server = harness.server()
    status, body = raw_post(server.url, [("X-CloudScheduler-JobName", "twice"), ("X-CloudScheduler-JobName", "twice"),
                                         ("X-CloudScheduler-ScheduleTime", T), ("X-CloudScheduler-ScheduleTime", T),
                                         ("X-Dedup-Project", "my-proj"), ("x-dedup-project", "my-proj")])
    assert status == 200 and body["status"] == "processed", body
    assert deliver(server.url, scheduler_headers("twice", T, **{"X-Dedup-Project": "my-proj"})).json() == {
        "status": "duplicate", "run_id": body["run_id"], "result": body["result"]}
    assert len(harness.starts()) == 1
