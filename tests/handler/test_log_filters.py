"""Every Logging filter the component provisions, evaluated against log lines the real handler emitted.

The handler runs under functions-framework on the emulator through each outcome an alert is about
(processed, duplicate, failed and its replay, released, a fenced attempt and the takeover that fenced
it, a bad request, a missed run and the run check's heartbeat). Its stdout lines become the log
entries Cloud Run would make of them, and the filter *text* of every log-based metric and log-match
alert policy in the component's graph (under Pulumi mocks) is parsed and evaluated against them.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

from scheduler_dedup.infra import DedupScheduledJob
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program

from .conftest import Harness, deliver, scheduler_headers
from .logging_query import cloud_run_entry, extract, matches
from .test_run_check import kill_mid_job, run_check

T = "2026-10-16T12:00:00Z"
PROJECT, SERVICE, REGION = "p1", "nightly", "us-east1"


def _wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture(scope="module")
def graph() -> list[RegisteredResource]:
    args = {"schedule": "*/15 * * * *", "region": REGION, "image": "us-docker.pkg.dev/p1/r/handler:1", "job": "jobs:run",
            "alerts": {"notification_channels": ["projects/p1/notificationChannels/42"]}}
    return run_program(lambda: DedupScheduledJob(SERVICE, args), {"gcp:project": PROJECT})  # type: ignore[arg-type]


def _emit_every_kind_of_line(harness: Harness) -> list[dict[str, Any]]:
    """Drive the real handler through every outcome the alerts watch; return its stdout lines, parsed."""
    harness.plan("lf-fail", fail="permanent")
    harness.plan("lf-flaky", fail="retryable", fail_times=1)
    harness.plan("lf-stall", sleep=2)
    schedule = {"DEDUP_SCHEDULE": "*/15 * * * *", "DEDUP_TIME_ZONE": "Etc/UTC"}
    slow = harness.server(DEDUP_LEASE_SECONDS="1", **schedule)
    fresh = harness.server(DEDUP_LEASE_SECONDS="1", **schedule)
    assert deliver(fresh.url, scheduler_headers("lf-ok", T)).json()["status"] == "processed"
    assert deliver(fresh.url, scheduler_headers("lf-ok", T)).json()["status"] == "duplicate"
    assert deliver(fresh.url, scheduler_headers("lf-fail", T)).json()["status"] == "failed"
    assert deliver(fresh.url, scheduler_headers("lf-fail", T)).json()["status"] == "failed"  # the replay
    assert deliver(fresh.url, scheduler_headers("lf-flaky", T)).json()["status"] == "released"
    assert deliver(fresh.url, scheduler_headers("lf-flaky", T)).json()["status"] == "processed"
    assert deliver(fresh.url, {"X-CloudScheduler-JobName": "lf-bad"}).status_code == 400
    # A stop-the-world pause past the lease: the fresh attempt takes over; the paused one, resumed, knows its lease is
    # lost and ends its worker (a CRITICAL line, no answer) before its job can run on beside the fresh one.
    pool = ThreadPoolExecutor(2)
    stalled = pool.submit(lambda: deliver(slow.url, scheduler_headers("lf-stall", T)))
    _wait_for(lambda: len(harness.starts()) >= 1 and any(e["job_name"] == "lf-stall" for e in harness.starts()))
    slow.signal(signal.SIGSTOP)
    harness.wait_for_lease_expiry(next(e["run_id"] for e in harness.starts() if e["job_name"] == "lf-stall"))
    took_over = pool.submit(lambda: deliver(fresh.url, scheduler_headers("lf-stall", T)))
    _wait_for(lambda: sum(e["job_name"] == "lf-stall" for e in harness.starts()) == 2)
    slow.signal(signal.SIGCONT)
    with pytest.raises(requests.RequestException):
        stalled.result(timeout=30)
    assert took_over.result(timeout=30).json()["status"] == "processed"
    # The run check: lf-ok has a completed run at 12:00 and one whose attempt died at 12:15 (stuck);
    # 12:30 and 12:45 have no record (missed).
    kill_mid_job(harness, "lf-ok", "2026-10-16T12:15:00Z")
    check = run_check(fresh, "2026-10-16T13:05:00Z", body={"job_name": "lf-ok", "grace_seconds": 300,
                                                            "window_seconds": 3600}).json()
    assert (check["missed"], check["stuck"]) == (["2026-10-16T12:30:00Z", "2026-10-16T12:45:00Z"],
                                                 ["2026-10-16T12:15:00Z"]), check
    # A failed run, then a completed one: the run check (at the store's time, over the runs just finished) logs
    # failure_streak and run_recovered. A yearly schedule, so it finds nothing missed.
    # Schedule times of the last hour: the check reads runs scheduled up to a day before it.
    failed_at, back_at = (f"{datetime.now(timezone.utc) - timedelta(minutes=m):%Y-%m-%dT%H:%M:00Z}" for m in (20, 5))
    harness.plan(f"lf-back@{failed_at}", fail="permanent")
    yearly = harness.server(DEDUP_SCHEDULE="0 0 1 1 *", DEDUP_TIME_ZONE="Etc/UTC")
    assert deliver(yearly.url, scheduler_headers("lf-back", failed_at)).json()["status"] == "failed"
    assert deliver(yearly.url, scheduler_headers("lf-back", back_at)).json()["status"] == "processed"
    back = run_check(yearly, None, body={"job_name": "lf-back", "grace_seconds": 300, "window_seconds": 3600}).json()
    assert (back["failing"], back["recovered"]) == ([failed_at], [back_at]), back
    return [json.loads(line) for server in harness.servers for line in server.log().splitlines()
            if line.startswith("{")]


def by_repr(items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(items, key=repr)


def _filters(graph: list[RegisteredResource]) -> dict[str, tuple[str, dict[str, str]]]:
    """Every Logging filter in the graph with its extractors: metric name or policy name -> (filter, extractors)."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    for r in graph:
        if r.type == "gcp:logging/metric:Metric":
            extractors = dict(r.inputs.get("labelExtractors") or {})
            if r.inputs.get("valueExtractor"):
                extractors["(value)"] = r.inputs["valueExtractor"]
            found[r.name] = (r.inputs["filter"], extractors)
        if r.type == "gcp:monitoring/alertPolicy:AlertPolicy":
            for condition in r.inputs["conditions"]:
                if "conditionMatchedLog" in condition:
                    log_match = condition["conditionMatchedLog"]
                    found[r.name] = (log_match["filter"], dict(log_match.get("labelExtractors") or {}))
    return found


def test_every_filter_matches_exactly_the_real_lines_it_is_about(harness: Harness, graph: list[RegisteredResource]) -> None:
    lines = _emit_every_kind_of_line(harness)
    entries = [cloud_run_entry(line, project=PROJECT, service=SERVICE, region=REGION) for line in lines]
    filters = _filters(graph)
    assert set(filters) == {
        "nightly-deliveries-metric", "nightly-duration-metric", "nightly-run-checks-metric",
        "nightly-alert-failed", "nightly-alert-fenced", "nightly-alert-takeover", "nightly-alert-missed",
        "nightly-alert-stuck", "nightly-alert-recovered"}

    def hits(name: str) -> list[dict[str, Any]]:
        return [e["jsonPayload"] for e in entries if matches(filters[name][0], e)]

    def kinds(name: str) -> list[tuple[Any, ...]]:
        return by_repr([(p.get("job_name"), p.get("outcome"), p.get("executed")) for p in hits(name)])

    assert kinds("nightly-deliveries-metric") == by_repr([
        ("lf-ok", "processed", True), ("lf-ok", "duplicate", False), ("lf-fail", "failed", True),
        ("lf-fail", "failed", False), ("lf-flaky", "released", True), ("lf-flaky", "processed", True),
        (None, "bad_request", None), ("lf-stall", "processed", True),
        ("lf-back", "failed", True), ("lf-back", "processed", True)])
    assert kinds("nightly-duration-metric") == by_repr([
        ("lf-ok", "processed", True), ("lf-fail", "failed", True), ("lf-flaky", "released", True),
        ("lf-flaky", "processed", True), ("lf-stall", "processed", True),
        ("lf-back", "failed", True), ("lf-back", "processed", True)])
    assert kinds("nightly-alert-failed") == by_repr([("lf-fail", "failed", True), ("lf-back", "failed", True)]), \
        "a replayed failure is not a new one"
    assert [p["job_name"] for p in hits("nightly-alert-recovered")] == ["lf-back"], \
        "the recovery notice matches the run check's line, nothing else"
    # A Python job's stalled attempt no longer answers fenced (it ends its worker): the filter matches no line here.
    assert kinds("nightly-alert-fenced") == []
    assert kinds("nightly-alert-takeover") == [("lf-stall", "processed", True)]
    assert [p["schedule_time"] for p in hits("nightly-alert-missed")] == ["2026-10-16T12:30:00Z", "2026-10-16T12:45:00Z"]
    assert [p["schedule_time"] for p in hits("nightly-alert-stuck")] == ["2026-10-16T12:15:00Z"]
    assert by_repr([(p["job_name"], p["missed"], p["stuck"]) for p in hits("nightly-run-checks-metric")]) == by_repr([
        ("lf-ok", 2, 1), ("lf-back", 0, 0)])

    # every extractor finds its value on every line its filter selects
    for name, (text, extractors) in filters.items():
        for entry in (e for e in entries if matches(text, e)):
            for label, extractor in extractors.items():
                value = extract(extractor, entry)
                if label == "(value)":
                    assert isinstance(value, (int, float)) and value > 0, (name, entry)
                elif label == "job_name" and entry["jsonPayload"].get("outcome") == "bad_request":
                    assert value is None  # a request without a job name is counted under an empty label
                else:
                    assert isinstance(value, str) and value, (name, label, entry)


def test_lines_of_another_service_or_stream_match_no_filter(harness: Harness, graph: list[RegisteredResource]) -> None:
    server = harness.server()
    deliver(server.url, scheduler_headers("lf-other", T))
    (line,) = [json.loads(raw) for raw in server.log().splitlines() if raw.startswith("{") and '"lf-other"' in raw]
    other = cloud_run_entry(line, project=PROJECT, service="other-service", region=REGION)
    stderr = {**cloud_run_entry(line, project=PROJECT, service=SERVICE, region=REGION),
              "logName": f"projects/{PROJECT}/logs/run.googleapis.com%2Fstderr"}
    same = cloud_run_entry(line, project=PROJECT, service=SERVICE, region=REGION)
    filters = _filters(graph)
    assert matches(filters["nightly-deliveries-metric"][0], same)
    for text, _ in filters.values():
        assert not matches(text, other) and not matches(text, stderr)
