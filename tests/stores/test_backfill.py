"""Backfill, re-run and catch-up on each store over real HTTP: two handler processes, two ``scheduler-dedup
backfill`` processes and Scheduler deliveries of the same fire times at once; the executions log is the truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.local.commands.rerun import previous_attempt_id
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION
from .test_overlap import (JOB, Handlers, _handler_processes_reach_it, deliver, fire_times,  # noqa: F401
                           handlers, run_id)  # (fixtures)

SCHEDULE = "* * * * *"
pytestmark = pytest.mark.processes


def cli(server: StoreServer, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "scheduler-dedup"), *args, "--store", server.kind,
               "--project", server.project, "--collection", COLLECTION]
    return subprocess.run(command, env={**os.environ, **server.endpoint_env(), "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=300)


def ok_runs(handlers: Handlers) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in handlers.events():
        if event["event"] == "end" and event["outcome"] == "ok":
            counts[event["run_id"]] = counts.get(event["run_id"], 0) + 1
    return counts


def test_two_backfills_and_scheduler_deliveries_at_once_run_each_fire_time_once(
        handlers: Handlers, server: StoreServer, store: Any) -> None:
    times = fire_times(8)
    handlers.plan_file.write_text(json.dumps({JOB: {"sleep": 0.3}, f"{JOB}@{times[5]}": {"fail": "permanent"}}))
    a, b = handlers.start(DEDUP_SCHEDULE=SCHEDULE), handlers.start(DEDUP_SCHEDULE=SCHEDULE)
    for t in (times[0], times[3], times[6]):
        assert deliver(a.url, t).json()["status"] == "processed"
    assert deliver(a.url, times[5]).json()["status"] == "failed"
    failed = store.get(run_id(times[5], server.project))
    window = ["--job", JOB, "--since", times[0], "--until", f"{times[7][:-3]}59Z", "--reprocess", "failed"]

    listed = cli(server, "backfill", *window, "--dry-run")
    assert listed.returncode == 0, listed.stderr
    for t in (times[1], times[2], times[4], times[7], times[5]):
        assert t in listed.stdout, listed.stdout
    for t in (times[0], times[3], times[6]):
        assert t not in listed.stdout
    assert len(handlers.starts()) == 4  # the dry run delivered nothing

    handlers.plan_file.write_text(json.dumps({JOB: {"sleep": 0.3}}))  # the failure is fixed: re-run it
    results: list[subprocess.CompletedProcess[str]] = []
    threads = [threading.Thread(target=lambda url=url: results.append(
        cli(server, "backfill", *window, "--url", url, "--rate", "20"))) for url in (a.url, b.url)]
    # Scheduler's deliveries of the same fire times, newest first and staggered, so they cross the backfills.
    threads += [threading.Thread(target=lambda url=url, t=t, i=i: (time.sleep(1.0 + 0.15 * i), deliver(url, t)))
                for i, t in enumerate(reversed(times)) for url in (a.url, b.url)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {r.returncode for r in results} <= {0, 1}, [r.stderr for r in results]
    assert any(r.returncode == 0 for r in results), [r.stdout + r.stderr for r in results]
    counts = ok_runs(handlers)
    for t in times:
        record = store.get(run_id(t, server.project))
        assert record is not None and record.status == "completed", (t, record, [r.stdout for r in results])
        assert counts.get(run_id(t, server.project)) == 1, (t, counts)
    kept = store.get(previous_attempt_id(run_id(times[5], server.project), 1))
    assert kept is not None and kept.status == "failed" and kept.attempt_id == failed.attempt_id
    assert "planned permanent failure" in (kept.error or "")


def test_rerun_dry_run_says_what_would_change_and_changes_nothing(handlers: Handlers, server: StoreServer,
                                                                 store: Any) -> None:
    [t] = fire_times(1)
    handlers.plan(fail="permanent", fail_times=1)
    a = handlers.start(DEDUP_SCHEDULE=SCHEDULE)
    assert deliver(a.url, t).json()["status"] == "failed"
    rid = run_id(t, server.project)
    before = store.get(rid)
    dry = cli(server, "runs", "rerun", rid[:12], "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert before.attempt_id in dry.stdout and previous_attempt_id(rid, 1) in dry.stdout
    assert store.get(rid).update_time == before.update_time and store.get(previous_attempt_id(rid, 1)) is None
    done = cli(server, "runs", "rerun", rid[:12], "--url", a.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert store.get(rid).status == "completed" and len(handlers.starts()) == 2
    shown = cli(server, "runs", "show", rid[:12], "--json")
    assert json.loads(shown.stdout)["previous_attempts"][0]["attempt_id"] == before.attempt_id, shown.stdout
    again = cli(server, "runs", "rerun", rid[:12], "--url", a.url)
    assert again.returncode == 1 and "not failed" in again.stderr  # completed: nothing to re-run
    assert len(handlers.starts()) == 2


def test_catch_up_runs_the_gap_once_beside_a_concurrent_delivery(handlers: Handlers, server: StoreServer,
                                                                 store: Any) -> None:
    times = fire_times(5)
    handlers.plan(sleep=0.3)
    env = {"DEDUP_SCHEDULE": SCHEDULE, "DEDUP_CATCH_UP_WINDOW_SECONDS": "3600", "DEDUP_SCHEDULE_SINCE": times[0]}
    a, b = handlers.start(**env), handlers.start(**env)
    first = deliver(a.url, times[0]).json()
    assert first["status"] == "processed" and "caught_up" not in first  # nothing before DEDUP_SCHEDULE_SINCE
    other: list[dict[str, Any]] = []
    thread = threading.Thread(target=lambda: other.append(deliver(b.url, times[2]).json()))
    thread.start()
    answer = deliver(a.url, times[4]).json()
    thread.join()
    assert answer["status"] == "processed" and other[0]["status"] in ("processed", "duplicate", "in_progress"), (answer, other)
    # Both deliveries came after a gap, so both catch up; between them the gap's fire times ran, each once.
    caught = {c["schedule_time"][:19] for body in (answer, other[0]) for c in body.get("caught_up", [])
              if c["status"] == "processed"}
    assert caught <= {t[:19] for t in times[1:4]} and {times[1][:19], times[3][:19]} <= caught | {times[2][:19]}
    counts = ok_runs(handlers)
    for t in times:
        assert counts.get(run_id(t, server.project)) == 1, (t, counts)
    later = deliver(b.url, times[4]).json()
    assert later["status"] == "duplicate" and "caught_up" not in later  # no gap before it any more


def test_catch_up_runs_a_fire_time_missed_before_a_pause_but_none_of_the_pause(handlers: Handlers,
                                                                              server: StoreServer) -> None:
    """A pause is no gap to fill: after the resume, catch-up runs the fire time lost just before the pause and none
    of the paused ones (DEDUP_PAUSED_SINCE until DEDUP_RESUMED_AT), which a re-stamped DEDUP_SCHEDULE_SINCE used to
    hide from it along with the lost one."""
    times = fire_times(5)
    handlers.plan(sleep=0.1)
    a = handlers.start(DEDUP_SCHEDULE=SCHEDULE, DEDUP_CATCH_UP_WINDOW_SECONDS="3600", DEDUP_SCHEDULE_SINCE=times[0],
                       DEDUP_PAUSED_SINCE=times[2], DEDUP_RESUMED_AT=times[4])
    assert deliver(a.url, times[0]).json()["status"] == "processed"  # times[1] is lost before the pause
    answer = deliver(a.url, times[4]).json()  # the first delivery after the resume
    assert answer["status"] == "processed", answer
    assert [(c["schedule_time"][:19], c["status"]) for c in answer.get("caught_up", [])] == [
        (times[1][:19], "processed")], answer
    assert set(ok_runs(handlers)) == {run_id(t, server.project) for t in (times[0], times[1], times[4])}
