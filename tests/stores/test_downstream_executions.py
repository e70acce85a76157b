"""A run forwarded to a downstream execution ends when that execution ends, on each store over real HTTP: handler
processes on the store's real server forward runs to local fakes of the Cloud Run Admin, Workflows and Cloud Build
APIs (:mod:`tests.handler.fake_google`), whose executions run until the test ends them, fail, or are cancelled.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests

from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.store_servers import StoreServer

from tests.handler.fake_google import FakeGoogle
from tests.handler.test_targets import target_env

from .conftest import COLLECTION
from .test_backfill import cli
from .test_overlap import JOB, _handler_processes_reach_it, deliver, fire_times, run_id  # noqa: F401 (a fixture)

pytestmark = pytest.mark.processes

KINDS = ["cloud_run_job", "workflows", "cloud_build_trigger"]


@pytest.fixture()
def fake() -> Iterator[FakeGoogle]:
    server = FakeGoogle().start()
    yield server
    server.stop()


@pytest.fixture()
def start(server: StoreServer, fake: FakeGoogle, tmp_path: Path) -> Iterator[Any]:
    started: list[HandlerServer] = []

    def go(kind: str, **env: str) -> HandlerServer:
        handler = HandlerServer({**server.endpoint_env(), "DEDUP_COLLECTION": COLLECTION, "DEDUP_SCHEDULE": "* * * * *",
                                 "DEDUP_LEASE_SECONDS": "10", "DEDUP_STORE_TIMEOUT_SECONDS": "5",
                                 **target_env(fake, kind), **env}, threads=4)
        started.append(handler)
        return handler.start()

    yield go
    for handler in started:
        handler.stop()


def run_check(url: str, **body: Any) -> dict[str, Any]:
    answer = requests.post(f"{url}/dedup/run-check", json={"job_name": JOB, "grace_seconds": 0,
                                                           "window_seconds": 3600, **body}, timeout=60)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_execution_fails_its_run_alerts_and_can_be_rerun(server: StoreServer, store: Any, start: Any,
                                                                   fake: FakeGoogle, kind: str) -> None:
    handler = start(kind)
    [t] = fire_times(1)
    rid = run_id(t, server.project)
    first = deliver(handler.url, t)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["status"] == "processed" and body["running_downstream"] == fake.executions(kind)[0]["name"]
    assert store.get(rid).status == "running_downstream"
    # Still running: the run check reads it, records nothing, alerts nothing.
    running = run_check(handler.url)
    assert running["running_downstream"] == [t] and running["settled"] == [] and running["failing"] == []
    assert store.get(rid).status == "running_downstream"

    # backfill: a fire time whose execution runs has a record, so it is not delivered again
    window = ["--job", JOB, "--since", t, "--until", f"{t[:-3]}59Z", "--reprocess", "failed", "--dry-run",
              "--schedule", "* * * * *", "--time-zone", "UTC"]
    assert t not in cli(server, "backfill", *window).stdout

    fake.end(kind, "failed", message="exit code 1")
    checked = run_check(handler.url)
    assert checked["settled"] == [t], checked
    assert checked["failing"] == [t]  # the failure alert counts it (the status says "missed" first: other minutes)
    record = store.get(rid)
    assert record.status == "failed" and "exit code 1" in (record.error or "")
    assert record.result["execution_state"] in ("FAILED", "FAILURE")
    assert run_check(handler.url)["settled"] == []  # settled once
    listed = cli(server, "backfill", *window)  # and once failed, backfill --reprocess failed picks it up
    assert listed.returncode == 0 and t in listed.stdout, listed.stdout + listed.stderr

    rerun = cli(server, "runs", "rerun", rid[:12], "--url", handler.url)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert len(fake.executions(kind)) == 2  # a new execution, the failed one kept
    again = store.get(rid)
    assert again.status == "running_downstream" and again.result["status_code"] == 200
    shown = cli(server, "runs", "show", rid[:12])
    assert fake.executions(kind)[0]["name"] in shown.stdout, shown.stdout  # the failed execution, in its history


def test_a_successful_execution_completes_its_run_with_the_executions_end(server: StoreServer, store: Any,
                                                                          start: Any, fake: FakeGoogle) -> None:
    handler = start("cloud_run_job")
    [t] = fire_times(1)
    assert deliver(handler.url, t).json()["status"] == "processed"
    fake.end("cloud_run_job", "completed")
    assert run_check(handler.url)["settled"] == [t]
    record = store.get(run_id(t, server.project))
    assert record.status == "completed" and record.error is None
    assert record.result["execution_state"] == "SUCCEEDED"


def test_max_runtime_fires_on_a_long_execution(server: StoreServer, store: Any, start: Any, fake: FakeGoogle) -> None:
    handler = start("workflows")
    [t] = fire_times(1)
    assert deliver(handler.url, t).json()["status"] == "processed"
    deadline = time.monotonic() + 30
    while not (checked := run_check(handler.url, max_runtime_seconds=1))["long_run"]:
        assert time.monotonic() < deadline, checked  # the alert comes once the claim is a second old
        time.sleep(0.2)
    assert checked["long_run"] == [t], checked
    assert store.get(run_id(t, server.project)).status == "running_downstream"


def test_skip_starts_no_second_execution_while_the_first_runs(server: StoreServer, store: Any, start: Any,
                                                              fake: FakeGoogle) -> None:
    handler = start("cloud_run_job", DEDUP_OVERLAP="skip")
    t1, t2, t3 = fire_times(3)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    skipped = deliver(handler.url, t2)
    assert skipped.status_code == 200 and skipped.json()["status"] == "skipped_overlap", skipped.text
    assert "downstream execution" in skipped.json()["error"]
    assert len(fake.job_executions) == 1
    fake.end("cloud_run_job", "completed")
    third = deliver(handler.url, t3)
    assert third.json()["status"] == "processed", third.text
    assert len(fake.job_executions) == 2
    assert store.get(run_id(t1, server.project)).status == "completed"  # settled by the overlap policy's look


def test_replace_cancels_the_running_execution_then_starts_the_new_one(server: StoreServer, store: Any, start: Any,
                                                                       fake: FakeGoogle) -> None:
    handler = start("workflows", DEDUP_OVERLAP="replace")
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    second = deliver(handler.url, t2)
    assert second.json()["status"] == "processed", second.text
    first, new = fake.workflow_executions
    assert first["state"] == "CANCELLED" and new["state"] == "ACTIVE"
    cancels = [r for r in fake.posts() if r.path.endswith(":cancel")]
    assert [r.path for r in cancels] == [f"/v1/{first['name']}:cancel"]
    assert store.get(run_id(t1, server.project)).status == "cancelled"
    assert store.get(run_id(t2, server.project)).status == "running_downstream"


def test_replace_whose_cancel_fails_starts_nothing_beside_the_running_execution(
        server: StoreServer, store: Any, start: Any, fake: FakeGoogle) -> None:
    handler = start("cloud_build_trigger", DEDUP_OVERLAP="replace")
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    fake.fail_next(503)  # the cancel
    second = deliver(handler.url, t2)
    assert second.status_code == 500 and second.json()["status"] == "released", second.text
    assert len(fake.builds) == 1 and fake.builds[0]["status"] == "QUEUED"
    assert store.get(run_id(t1, server.project)).status == "running_downstream"
    retried = deliver(handler.url, t2)  # Scheduler's retry: the cancel goes through now
    assert retried.json()["status"] == "processed", retried.text
    assert fake.builds[0]["status"] == "CANCELLED" and len(fake.builds) == 2


def test_buffer_one_waits_for_the_running_execution_then_starts_the_next(server: StoreServer, store: Any, start: Any,
                                                                         fake: FakeGoogle) -> None:
    handler = start("cloud_build_trigger", DEDUP_OVERLAP="buffer_one")
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    answers: list[requests.Response] = []
    waiter = threading.Thread(target=lambda: answers.append(deliver(handler.url, t2, timeout=120)))
    waiter.start()
    deadline = time.monotonic() + 60
    while len(fake.gets("/builds/")) < 1:  # the waiter asked the API about the running build: it is waiting
        assert time.monotonic() < deadline and not answers, answers
        time.sleep(0.1)
    assert len(fake.builds) == 1 and not answers
    fake.end("cloud_build_trigger", "completed")
    waiter.join(120)
    assert answers and answers[0].json()["status"] == "processed", answers
    assert len(fake.builds) == 2
    assert store.get(run_id(t1, server.project)).status == "completed"


def test_a_record_naming_another_jobs_execution_never_reads_or_cancels_it(server: StoreServer, store: Any,
                                                                          start: Any, fake: FakeGoogle) -> None:
    """A run record is data: one rewritten to name another project's execution (which the API would let the
    handler's account read and cancel) is never read nor cancelled, by the run check or by ``replace``."""
    handler = start("cloud_run_job", DEDUP_OVERLAP="replace")
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    own = fake.job_executions[0]["name"]
    foreign = own.replace("projects/p1/", "projects/payroll/").rsplit("/executions/", 1)[0] + "/executions/pay-1"
    fake.job_executions.append({"name": foreign, "template": {"containers": []}})
    rid = run_id(t1, server.project)
    read = store.get(rid)
    assert store.update_if_unchanged(rid, {"result": {**read.result, "execution": foreign}}, read.update_time)
    checked = run_check(handler.url)
    assert checked["settled"] == [] and checked["running_downstream"] == [t1], checked
    assert deliver(handler.url, t2).json()["status"] == "processed"
    assert not [r for r in fake.requests if "payroll" in r.path]  # neither read nor cancelled
    assert "completionTime" not in fake.job_executions[1]
    assert store.get(rid).status == "running_downstream"  # nothing told how it ended


@pytest.mark.parametrize("fault", [403, 429, 500, "garbage"])
def test_an_unreadable_execution_holds_its_run_and_still_alerts_long(server: StoreServer, store: Any, start: Any,
                                                                     fake: FakeGoogle, fault: int | str) -> None:
    """executions.get refused (403), throttled (429), failing (500) or answering a body that is not JSON: the run
    stays ``running_downstream``, ``skip`` starts nothing beside it, ``max_runtime_seconds`` still fires, and the
    first readable answer settles it."""
    handler = start("cloud_run_job", DEDUP_OVERLAP="skip")
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    fake.end("cloud_run_job", "failed", message="exit code 3")
    rid = run_id(t1, server.project)
    deadline = time.monotonic() + 30
    while True:
        fake.get_faults[:] = [fault]
        checked = run_check(handler.url, max_runtime_seconds=1)
        assert checked["settled"] == [] and checked["running_downstream"] == [t1], checked
        if checked["long_run"]:
            break
        assert time.monotonic() < deadline, checked
        time.sleep(0.2)
    assert checked["long_run"] == [t1] and store.get(rid).status == "running_downstream"
    fake.get_faults[:] = [fault]
    skipped = deliver(handler.url, t2)
    assert skipped.json()["status"] == "skipped_overlap", skipped.text
    assert len(fake.job_executions) == 1
    assert run_check(handler.url)["settled"] == [t1]  # readable again: settled with the execution's outcome
    assert store.get(rid).status == "failed" and "exit code 3" in (store.get(rid).error or "")


def stamp(when: datetime) -> str:
    """``when`` in RFC 3339, UTC, whole seconds."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_failure_settled_a_check_late_alerts_once(server: StoreServer, store: Any, start: Any,
                                                   fake: FakeGoogle) -> None:
    """Minute checks (the watchdog's schedule times, ten minutes back) around a run whose execution ran from t + 5 s
    (its claim, backdated in the store) to t + 60 s and failed: the check at t + 120 s cannot read it, the one at
    t + 180 s settles it, with that end, before its window, and still logs exactly one failure_streak line (the alert
    counts the run when its outcome was recorded); the check at t + 240 s logs none. The duration keeps the end."""
    handler = start("cloud_run_job")
    base = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=10)
    t = stamp(base)
    rid = run_id(t, server.project)
    assert deliver(handler.url, t).json()["status"] == "processed"
    fake.end("cloud_run_job", "failed", message="exit code 1")
    ended = base + timedelta(seconds=60)
    with fake.lock:
        fake.job_executions[0]["completionTime"] = stamp(ended)
    claimed = store.get(rid)
    assert store.update_if_unchanged(rid, {"claimed_at": base + timedelta(seconds=5)}, claimed.update_time)

    def check_at(seconds: int) -> dict[str, Any]:
        answer = requests.post(f"{handler.url}/dedup/run-check",
                               json={"job_name": JOB, "grace_seconds": 0, "window_seconds": 60},
                               headers={"X-CloudScheduler-ScheduleTime": stamp(base + timedelta(seconds=seconds))},
                               timeout=60)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    fake.get_faults[:] = [500]
    unread = check_at(120)
    assert unread["settled"] == [] and unread["running_downstream"] == [t] and unread["failing"] == [], unread
    late = check_at(180)
    assert late["settled"] == [t] and late["failing"] == [t], late
    record = store.get(rid)
    assert record.status == "failed" and record.data["finished_at"] == ended
    assert check_at(240)["failing"] == []
    streaks = [json.loads(line) for line in handler.log().splitlines()
               if line.startswith("{") and '"failure_streak"' in line]
    assert [line["schedule_time"] for line in streaks] == [t], streaks


@pytest.mark.parametrize("overlap", ["skip", "replace"])
def test_a_deleted_execution_ends_its_run_failed_and_frees_the_job(server: StoreServer, store: Any, start: Any,
                                                                   fake: FakeGoogle, overlap: str) -> None:
    """executions.get answers 404 (the execution was deleted): it no longer runs, so it holds the job no more (the
    next run starts, under ``skip`` and under ``replace``) and its run is recorded failed, its outcome unknown,
    instead of staying ``running_downstream`` for the whole retention period."""
    handler = start("workflows", DEDUP_OVERLAP=overlap)
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    with fake.lock:
        deleted = fake.workflow_executions.pop()
    second = deliver(handler.url, t2)
    assert second.status_code == 200 and second.json()["status"] == "processed", second.text
    record = store.get(run_id(t1, server.project))
    assert record.status == "failed" and "NOT_FOUND" in (record.error or ""), (record.status, record.error)
    assert deleted["name"] in (record.error or "")
    assert len(fake.workflow_executions) == 1  # the new run's


def test_two_run_checks_on_two_instances_settle_a_run_once(server: StoreServer, store: Any, start: Any,
                                                           fake: FakeGoogle) -> None:
    """Two handler instances answer run checks at once: both read the ended execution, one outcome is written
    (fenced on the record's version), and neither check fails."""
    one, two = start("cloud_build_trigger"), start("cloud_build_trigger")
    [t] = fire_times(1)
    assert deliver(one.url, t).json()["status"] == "processed"
    fake.end("cloud_build_trigger", "failed", message="step 2 exited 4")
    rid = run_id(t, server.project)
    version = store.get(rid).update_time
    answers: list[dict[str, Any]] = []
    barrier = threading.Barrier(2)

    def check(url: str) -> None:
        barrier.wait()
        answers.append(run_check(url))

    threads = [threading.Thread(target=check, args=(h.url,)) for h in (one, two)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 2 and all(a["running_downstream"] == [] for a in answers), answers
    assert any(a["settled"] == [t] for a in answers), answers
    record = store.get(rid)
    assert record.status == "failed" and record.error.count("step 2 exited 4") == 1
    assert record.update_time != version


@pytest.mark.parametrize("outcome", ["completed", "failed"])
def test_replace_finding_the_execution_ended_records_how_it_ended(
        server: StoreServer, store: Any, start: Any, fake: FakeGoogle, outcome: str) -> None:
    """The execution ended before ``replace`` looks: the run is recorded as the execution ended, not cancelled,
    nothing is cancelled, and the new run starts."""
    handler = start("cloud_run_job", DEDUP_OVERLAP="replace")
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    fake.end("cloud_run_job", outcome, message="exit code 2")
    assert deliver(handler.url, t2).json()["status"] == "processed"
    assert store.get(run_id(t1, server.project)).status == outcome
    assert len(fake.job_executions) == 2 and "cancelledCount" not in fake.job_executions[0]


def test_replace_whose_cancel_is_refused_starts_nothing_beside_the_running_execution(
        server: StoreServer, store: Any, start: Any, fake: FakeGoogle) -> None:
    """The cancel answers 400 and the execution still runs (the 4xx did not cancel it): the run is not recorded
    cancelled and no new execution starts beside it; once the cancel goes through, the new run starts."""
    handler = start("workflows", DEDUP_OVERLAP="replace")
    t1, t2 = fire_times(2)
    assert deliver(handler.url, t1).json()["status"] == "processed"
    fake.fail_next(400)  # the cancel, refused
    second = deliver(handler.url, t2)
    assert second.status_code == 500 and second.json()["status"] == "released", second.text
    assert len(fake.workflow_executions) == 1 and fake.workflow_executions[0]["state"] == "ACTIVE"
    assert store.get(run_id(t1, server.project)).status == "running_downstream"
    assert deliver(handler.url, t2).json()["status"] == "processed"  # Scheduler's retry
    assert fake.workflow_executions[0]["state"] == "CANCELLED" and len(fake.workflow_executions) == 2
    assert store.get(run_id(t1, server.project)).status == "cancelled"
