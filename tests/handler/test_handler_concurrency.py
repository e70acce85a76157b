"""Exactly once under concurrent duplicates, process crashes, stalls and long jobs: real processes, real HTTP.

Every check runs twice: on Cloud Run's shape (functions-framework, Scheduler's HTTP target) and on App Engine's
(the deploy archive's ``app.yaml`` entrypoint, Scheduler's App Engine target; see ``Harness.platform``).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from .conftest import Harness, deliver

T = "2026-10-16T12:00:00Z"


@pytest.fixture()
def harness(platform_harness: Harness) -> Harness:
    """The conftest harness on each platform in turn (``cloud_run``, ``app_engine``)."""
    return platform_harness


def _storm(urls: list[str], headers: dict[str, str], n: int) -> list[requests.Response]:
    barrier = threading.Barrier(n)

    def one(i: int) -> requests.Response:
        barrier.wait()
        return deliver(urls[i % len(urls)], headers)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def _wait_for(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_50_concurrent_deliveries_to_one_threaded_server_run_once(harness: Harness) -> None:
    harness.plan("storm", sleep=0.5)
    server = harness.server(threads=16)
    responses = _storm([server.url], harness.headers("storm", T), 50)
    statuses = Counter((r.status_code, r.json()["status"]) for r in responses)
    assert statuses[(200, "processed")] == 1, statuses
    assert set(statuses) <= {(200, "processed"), (200, "duplicate"), (409, "in_progress")}, statuses
    assert not any(r.status_code >= 500 for r in responses)
    assert len(harness.starts()) == 1


def test_50_concurrent_deliveries_to_two_server_processes_run_once(harness: Harness) -> None:
    harness.plan("storm2", sleep=0.5)
    a, b = harness.server(threads=16), harness.server(threads=16)
    responses = _storm([a.url, b.url], harness.headers("storm2", T), 50)
    statuses = Counter((r.status_code, r.json()["status"]) for r in responses)
    assert statuses[(200, "processed")] == 1, statuses
    assert not any(r.status_code >= 500 for r in responses)
    assert len(harness.starts()) == 1


def test_crashed_attempt_blocks_with_409_until_its_lease_expires_then_runs_once(harness: Harness) -> None:
    harness.plan("crashy", sleep=30)
    victim = harness.server(DEDUP_LEASE_SECONDS="3")
    survivor = harness.server(DEDUP_LEASE_SECONDS="3")
    headers = harness.headers("crashy", T)
    pending = ThreadPoolExecutor(1).submit(lambda: deliver(victim.url, headers))
    _wait_for(lambda: len(harness.starts()) == 1)
    victim.kill()  # SIGKILL mid-job: no release, no completion
    try:
        pending.result(timeout=10)
    except requests.RequestException:
        pass
    blocked = deliver(survivor.url, headers)
    assert blocked.status_code == 409 and blocked.json()["status"] == "in_progress"
    assert 0 < blocked.json()["retry_after_seconds"] <= 3
    assert int(blocked.headers["Retry-After"]) >= 1
    (record,) = harness.records().values()
    assert record["status"] == "in_progress"
    time.sleep(blocked.json()["retry_after_seconds"] + 0.5)
    harness.plan("crashy", sleep=0.2)
    after = deliver(survivor.url, headers)
    assert after.status_code == 200 and after.json()["status"] == "processed", after.text
    assert deliver(survivor.url, headers).json()["status"] == "duplicate"
    starts, ends = harness.starts(), harness.ends()
    assert len(starts) == 2 and len(ends) == 1, "the crashed attempt is re-run once, by design"
    assert ends[0]["pid"] != starts[0]["pid"], "the survivor, not the killed process, finished the run"
    (record,) = harness.records().values()
    assert record["status"] == "completed" and record["attempts"] == 2
    assert record["previous_attempt_id"] == starts[0]["attempt_id"]


def test_job_longer_than_the_lease_is_not_run_twice(harness: Harness) -> None:
    # The lease is renewed every third of it: a 3 s lease leaves a renewal 2 s of slack on a loaded machine
    # (a 1.5 s lease left 1 s, which a busy emulator can exceed, and b rightly took the run over).
    harness.plan("long", sleep=7)
    a = harness.server(DEDUP_LEASE_SECONDS="3")
    b = harness.server(DEDUP_LEASE_SECONDS="3")
    headers = harness.headers("long", T)
    first = ThreadPoolExecutor(1).submit(lambda: deliver(a.url, headers))
    _wait_for(lambda: len(harness.starts()) == 1)
    seen = []
    while not first.done():  # retries during the whole job, well past the 3 s lease
        seen.append(deliver(b.url, headers).json()["status"])
        time.sleep(0.3)
    assert first.result().json()["status"] == "processed"
    assert "in_progress" in seen and set(seen) <= {"in_progress", "duplicate"}, seen
    assert len(harness.starts()) == 1


def test_stalled_attempt_that_lost_its_lease_is_fenced(harness: Harness) -> None:
    harness.plan("stall", sleep=2)
    slow = harness.server(DEDUP_LEASE_SECONDS="1")
    fresh = harness.server(DEDUP_LEASE_SECONDS="1")
    headers = harness.headers("stall", T)
    pool = ThreadPoolExecutor(2)
    slow_reply = pool.submit(lambda: deliver(slow.url, headers))
    _wait_for(lambda: len(harness.starts()) == 1)
    slow.signal(signal.SIGSTOP)  # a stop-the-world pause: its lease renewals stop too
    harness.wait_for_lease_expiry(harness.starts()[0]["run_id"])
    fresh_reply = pool.submit(lambda: deliver(fresh.url, headers))
    _wait_for(lambda: len(harness.starts()) == 2)
    slow.signal(signal.SIGCONT)
    fresh_result = fresh_reply.result(timeout=30)
    # Resumed, the stalled holder knows its lease is lost and ends its worker at once, its job with it: no answer
    # (Scheduler retries, and gets `duplicate`). Had its job ended first, its completion would be `fenced`.
    try:
        slow_result = slow_reply.result(timeout=30)
    except requests.RequestException:
        assert "ending this worker process" in slow.log(), slow.log()[-2000:]
    else:
        assert slow_result.status_code == 409 and slow_result.json()["status"] == "fenced", slow_result.text
    assert fresh_result.status_code == 200 and fresh_result.json()["status"] == "processed"
    fresh_attempt = harness.starts()[1]["attempt_id"]
    (record,) = harness.records().values()
    assert record["status"] == "completed"
    assert record["attempt_id"] == fresh_attempt, "the fenced attempt must not overwrite the newer record"
    assert deliver(fresh.url, headers).json()["status"] == "duplicate"
