"""Overlap policies on each store over real HTTP: handler processes on the store's real server (and behind its fault
proxy), a job slower than the gap between its runs, and the executions log as the truth.

The invariant under ``skip``: no two executions of one job overlap (a start never falls between another
execution's start and end in the log, whose appends are atomic), and every fire time ends with one final record.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests

from scheduler_dedup.handler.protocol.overlap_lease import lease_id
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.local.demo.recording_job import read_events
from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION
from .toy_store import TOY

JOB = "slow-report"

pytestmark = pytest.mark.processes


class Handlers:
    """Handler processes on one store server sharing an executions log and a job plan."""

    def __init__(self, server: StoreServer, tmp: Path, host: str | None = None):
        self.server, self.tmp, self.host = server, tmp, host
        self.log = tmp / "executions.jsonl"
        self.plan_file = tmp / "plan.json"
        self.started: list[HandlerServer] = []

    def start(self, **env: str) -> HandlerServer:
        handler = HandlerServer({**self.server.endpoint_env(self.host), "DEDUP_COLLECTION": COLLECTION,
                                 "DEDUP_JOB": "scheduler_dedup.local.demo.recording_job:run",
                                 "DEMO_EXECUTIONS_LOG": str(self.log), "DEMO_JOB_PLAN": str(self.plan_file),
                                 "DEDUP_LEASE_SECONDS": "4", "DEDUP_STORE_TIMEOUT_SECONDS": "5", **env}, threads=8)
        self.started.append(handler)
        return handler.start()

    def plan(self, **behaviour: Any) -> None:
        self.plan_file.write_text(json.dumps({JOB: behaviour}))

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.log)

    def starts(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["event"] == "start"]

    def stop(self) -> None:
        for handler in self.started:
            handler.stop()


@pytest.fixture(autouse=True)
def _handler_processes_reach_it(server: StoreServer) -> None:
    """The toy store lives in this process's memory: no handler process can reach it."""
    if server.kind == TOY.id:
        pytest.skip("the in-memory toy store has no server a handler process can reach")


@pytest.fixture()
def handlers(server: StoreServer, tmp_path: Path) -> Iterator[Handlers]:
    h = Handlers(server, tmp_path)
    yield h
    h.stop()


def fire_times(n: int) -> list[str]:
    """``n`` past fire times a minute apart (RFC 3339, UTC), oldest first."""
    base = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=n + 1)
    return [(base + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(n)]


def deliver(url: str, schedule_time: str, timeout: float = 60) -> requests.Response:
    return requests.post(url, headers={"X-CloudScheduler-JobName": JOB, "X-CloudScheduler-ScheduleTime": schedule_time,
                                       "User-Agent": "Google-Cloud-Scheduler"}, timeout=timeout)


def run_id(schedule_time: str, project: str) -> str:
    when = datetime.fromisoformat(schedule_time.replace("Z", "+00:00"))
    return RunKey(project=project, location="", job_name=JOB, schedule_time=when).run_id


def wait_for(predicate: Any, timeout: float = 60.0,
             delivery: tuple[threading.Thread, list[requests.Response]] | None = None) -> None:
    """Poll ``predicate`` until true; fail after ``timeout`` seconds, or at once with its answer when the background
    ``delivery`` the predicate waits on has ended (a 5xx from a loaded machine's store call says so here)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if delivery is not None and not delivery[0].is_alive() and not predicate():
            answers = delivery[1]
            raise AssertionError("the delivery ended first: "
                                 + (f"{answers[0].status_code} {answers[0].text}" if answers else "its server died"))
        assert time.monotonic() < deadline, f"timed out after {timeout} s"
        time.sleep(0.05)


def overlapping_executions(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of attempt ids whose executions overlap in the log (a start while another had started, not ended)."""
    running: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for event in events:
        if event["event"] == "start":
            pairs.extend((other, event["attempt_id"]) for other in running)
            running.add(event["attempt_id"])
        else:
            running.discard(event["attempt_id"])
    return pairs


def in_background(url: str, schedule_time: str) -> tuple[threading.Thread, list[requests.Response]]:
    answers: list[requests.Response] = []

    def send() -> None:
        try:
            answers.append(deliver(url, schedule_time))
        except requests.ConnectionError:
            pass  # its server was killed: the test looks at the store

    thread = threading.Thread(target=send)
    thread.start()
    return thread, answers


def test_allow_runs_a_slow_job_beside_its_next_run(handlers: Handlers) -> None:
    """Today's behaviour, and what makes the ``skip`` tests able to fail: two fire times execute at once."""
    handlers.plan(sleep=2.0)
    a, b = handlers.start(), handlers.start()
    t0, t1 = fire_times(2)
    thread, first = in_background(a.url, t0)
    wait_for(lambda: len(handlers.starts()) == 1, delivery=(thread, first))
    second = deliver(b.url, t1)
    thread.join()
    assert (first[0].json()["status"], second.json()["status"]) == ("processed", "processed")
    assert overlapping_executions(handlers.events())


def test_skip_records_a_run_due_while_another_executes_on_another_instance(handlers: Handlers, server: StoreServer,
                                                                           store: Any) -> None:
    handlers.plan(sleep=2.5)
    a, b = handlers.start(DEDUP_OVERLAP="skip"), handlers.start(DEDUP_OVERLAP="skip")
    t0, t1, t2 = fire_times(3)
    thread, first = in_background(a.url, t0)
    wait_for(lambda: len(handlers.starts()) == 1, delivery=(thread, first))
    skipped = deliver(b.url, t1)
    assert skipped.status_code == 200, skipped.text
    body = skipped.json()
    assert body["status"] == "skipped_overlap"
    assert run_id(t0, server.project) in body["error"]
    again = deliver(a.url, t1)  # a retry of the skipped run: replayed, never run
    assert (again.status_code, again.json()["status"]) == (200, "skipped_overlap")
    thread.join()
    assert first[0].json()["status"] == "processed"
    after = deliver(b.url, t2)  # the lease was released: the next run executes at once
    assert after.json()["status"] == "processed", after.text
    assert [e["run_id"] for e in handlers.starts()] == [run_id(t0, server.project), run_id(t2, server.project)]
    assert not overlapping_executions(handlers.events())
    record = store.get(run_id(t1, server.project))
    assert record is not None and record.status == "skipped_overlap"
    assert store.get(lease_id(server.project, "", JOB)) is None  # released


def test_skip_under_a_storm_of_fire_times_on_two_instances_never_overlaps(handlers: Handlers,
                                                                           server: StoreServer, store: Any) -> None:
    handlers.plan(sleep=0.4)
    urls = [handlers.start(DEDUP_OVERLAP="skip").url, handlers.start(DEDUP_OVERLAP="skip").url]
    times = fire_times(12)
    with ThreadPoolExecutor(max_workers=24) as pool:
        answers = list(pool.map(lambda i: deliver(urls[i % 2], times[i // 2]), range(24)))
    statuses = [a.json()["status"] for a in answers]
    assert set(statuses) <= {"processed", "skipped_overlap", "in_progress", "duplicate"}, statuses
    assert not overlapping_executions(handlers.events())
    assert "processed" in statuses and "skipped_overlap" in statuses
    # Each fire time is decided once: its record is final, and only processed ones executed (once).
    for t in times:
        record = store.get(run_id(t, server.project))
        executions = [e for e in handlers.starts() if e["run_id"] == run_id(t, server.project)]
        if record is None or record.status == "in_progress":
            continue  # both deliveries of it answered 409: Scheduler would retry
        assert record.status in ("completed", "skipped_overlap")
        assert len(executions) == (1 if record.status == "completed" else 0)


def test_buffer_one_waits_for_the_running_run_and_skips_a_third(handlers: Handlers, server: StoreServer) -> None:
    handlers.plan(sleep=2.5)
    a, b = handlers.start(DEDUP_OVERLAP="buffer_one"), handlers.start(DEDUP_OVERLAP="buffer_one")
    t0, t1, t2 = fire_times(3)
    first_thread, first = in_background(a.url, t0)
    wait_for(lambda: len(handlers.starts()) == 1, delivery=(first_thread, first))
    second_thread, second = in_background(b.url, t1)
    time.sleep(1.0)  # the second run is waiting now (it has not started)
    assert len(handlers.starts()) == 1
    third = deliver(a.url, t2)
    assert third.json()["status"] == "skipped_overlap", third.text
    assert "already waiting" in third.json()["error"]
    first_thread.join()
    second_thread.join()
    assert first[0].json()["status"] == second[0].json()["status"] == "processed"
    assert [e["run_id"] for e in handlers.starts()] == [run_id(t0, server.project), run_id(t1, server.project)]
    assert not overlapping_executions(handlers.events())


def test_a_crashed_holder_blocks_until_its_lease_expires_then_the_next_run_takes_it_over(
        handlers: Handlers, server: StoreServer, store: Any) -> None:
    handlers.plan(sleep=30)
    a, b = handlers.start(DEDUP_OVERLAP="skip"), handlers.start(DEDUP_OVERLAP="skip")
    t0, t1, t2 = fire_times(3)
    delivery = in_background(a.url, t0)
    wait_for(lambda: len(handlers.starts()) == 1, delivery=delivery)
    a.kill()  # a crash: no release
    assert deliver(b.url, t1).json()["status"] == "skipped_overlap"
    lease = lease_id(server.project, "", JOB)
    wait_for(lambda: (r := store.get(lease)) is not None and r.lease_remaining_seconds <= 0)
    handlers.plan(sleep=0.1)
    answer = deliver(b.url, t2)
    assert answer.json()["status"] == "processed", answer.text
    assert len(handlers.starts()) == 2


def decided(url: str, schedule_time: str, tries: int = 10) -> requests.Response:
    """Deliver until answered 2xx, as Scheduler's retry config does after a non-2xx."""
    for _ in range(tries):
        answer = deliver(url, schedule_time)
        if answer.status_code == 200:
            return answer
        time.sleep(1.0)
    raise AssertionError(f"{schedule_time} not decided after {tries} deliveries: {answer.text}")


@pytest.mark.parametrize(("step", "kind"), [("claim", "lose_answer"), ("claim", "unavailable"),
                                            ("release", "lose_answer"), ("renewal", "lose_answer"),
                                            ("renewal", "unavailable")])
def test_a_store_fault_on_the_overlap_lease_never_lets_two_runs_execute_at_once(
        server: StoreServer, tmp_path: Path, store: Any, step: str, kind: str) -> None:
    """A fault on the lease record's call (applied with its answer lost, or failed before it is sent): the attempt
    decides by reading, so the run is decided once, no two executions overlap, and the lease is not left held."""
    proxy = server.fault_proxy()
    handlers = Handlers(server, tmp_path, host=proxy.host)
    lease = lease_id(server.project, "", JOB)
    try:
        handlers.plan(sleep=1.6)
        a, b = handlers.start(DEDUP_OVERLAP="skip"), handlers.start(DEDUP_OVERLAP="skip")
        t0, t1, t2 = fire_times(3)
        proxy.add(Fault(step=step, kind=kind, document=lease))
        assert decided(a.url, t0).json()["status"] == "processed"
        assert any(i["document"] == lease for i in proxy.injected), proxy.injected
        # The lease was released (or its delete landed with the answer lost): the next run executes at once,
        # and one due while it executes is skipped.
        thread, second = in_background(b.url, t1)
        wait_for(lambda: len(handlers.starts()) == 2, delivery=(thread, second))
        third = decided(a.url, t2)
        thread.join()
        assert (second[0].json()["status"], third.json()["status"]) == ("processed", "skipped_overlap")
        assert not overlapping_executions(handlers.events())
        assert [e["run_id"] for e in handlers.starts()] == [run_id(t0, server.project), run_id(t1, server.project)]
        assert store.get(lease) is None
    finally:
        handlers.stop()
        proxy.stop()


def test_run_history_never_reports_a_skipped_run_missed(handlers: Handlers, server: StoreServer, store: Any) -> None:
    from scheduler_dedup.handler.monitoring.comparison import compare
    from scheduler_dedup.handler.monitoring.findings import MISSED
    from scheduler_dedup.handler.monitoring.run_history import RunHistory

    handlers.plan(sleep=2.0)
    a = handlers.start(DEDUP_OVERLAP="skip", DEDUP_SCHEDULE="* * * * *")
    t0, t1 = fire_times(2)
    thread, answers = in_background(a.url, t0)
    wait_for(lambda: len(handlers.starts()) == 1, delivery=(thread, answers))
    assert deliver(a.url, t1).json()["status"] == "skipped_overlap"
    thread.join()
    history = RunHistory(store)
    since = datetime.fromisoformat(t0.replace("Z", "+00:00"))
    runs = list(history.runs(JOB, since=since, until=since + timedelta(minutes=2)))
    assert sorted(r.status for r in runs) == ["completed", "skipped_overlap"]
    report = compare(runs, job_name=JOB, schedule="* * * * *", time_zone="Etc/UTC", since=since,
                     until=since + timedelta(minutes=2), grace_seconds=0, active_since=since)
    assert not report.of(MISSED), report.findings


def test_a_skip_the_store_fails_to_record_is_answered_as_what_happened(server: StoreServer, tmp_path: Path,
                                                                       store: Any) -> None:
    """The answer said "this delivery holds no claim" though the claim was in place: the store failed only when the
    run was recorded skipped_overlap. Now it says the claim stays until its lease expires (409 before), which the next
    deliveries confirm, and that the one after applies the overlap policy again."""
    proxy = server.fault_proxy()
    handlers = Handlers(server, tmp_path, host=proxy.host)
    try:
        handlers.plan(sleep=2.0)
        env = {"DEDUP_OVERLAP": "skip", "DEDUP_LEASE_SECONDS": "10", "DEDUP_STORE_TIMEOUT_SECONDS": "1"}
        a, b = handlers.start(**env), handlers.start(**env)
        t0, t1 = fire_times(2)
        skipped = run_id(t1, server.project)
        thread, first = in_background(a.url, t0)
        wait_for(lambda: len(handlers.starts()) == 1)
        proxy.add(Fault(step="completion", kind="unavailable", document=skipped, count=10_000))
        answer = deliver(b.url, t1)
        assert answer.status_code == 500, answer.text
        body = answer.json()
        assert (body["status"], body["step"], body["executed"]) == ("store_error", "record_skip", False), body
        assert "holds no claim" not in body["error"]
        assert "overlap policy" in body["error"] and "stays in_progress" in body["error"], body["error"]
        record = store.get(skipped)
        assert record is not None and record.status == "in_progress", record  # the claim the answer names
        again = deliver(a.url, t1)
        assert again.status_code == 409 and again.json()["status"] == "in_progress", again.text  # as it says
        proxy.clear()
        thread.join()
        assert first[0].json()["status"] == "processed"
        wait_for(lambda: (r := store.get(skipped)) is not None and r.lease_remaining_seconds <= 0, timeout=30)
        after = decided(b.url, t1)  # the other run has finished: the overlap policy lets this one run now
        assert after.json()["status"] == "processed", after.text
        assert not overlapping_executions(handlers.events())
    finally:
        handlers.stop()
        proxy.stop()
