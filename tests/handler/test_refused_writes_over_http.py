"""A store that refuses writes never runs a run twice, over real HTTP on a real redis-server: the two inputs a
security review found (a full instance, ``noeviction``), each counted in executions of the job.

- The instance fills while the job runs: before, the completion was refused and a retry after the lease lapsed ran
  the job again; now the holder's writes still commit and the retry is a ``duplicate``.
- Every renewal refused (the RESP fault proxy answering ``-OOM`` to renewals only): the lease lapses under the live
  attempt, which its job sees (``ScheduledRun.lease_holds()``) and stops before its side effect, so the retry on
  another instance that takes the run over runs it once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests

from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.redis_server import RedisServer

from .conftest import deliver, scheduler_headers

pytestmark = pytest.mark.processes  # tests/costs.py

T = "2026-11-01T00:00:00Z"
COLLECTION = "scheduler_runs"
#: A long job in steps that checks its lease before each one (the pattern docs/failures.md shows).
STEPWISE_JOB = '''
import json, os, time

def _note(run, event):
    with open(os.environ["STEP_LOG"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": event, "attempt_id": run.attempt_id}) + "\\n")

def run(run):
    _note(run, "start")
    for step in range(int(os.environ["STEPS"])):
        if not run.lease_holds():
            _note(run, "stopped")
            raise RuntimeError(f"lease lapsed before step {step} ({run.lease_remaining_seconds():.1f} s): stopping")
        time.sleep(float(os.environ["STEP_SECONDS"]))
    _note(run, "done")  # the side effect, once every step ran under a live lease
    return {"steps": int(os.environ["STEPS"])}
'''


@pytest.fixture()
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own (its ``maxmemory`` changes mid-test)."""
    with RedisServer() as server:
        yield server


def _events(log: Path, event: str) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == event]


def _env(redis: RedisServer, tmp_path: Path, host: str | None = None, **extra: str) -> dict[str, str]:
    (tmp_path / "stepwise_job.py").write_text(STEPWISE_JOB)
    return {**redis.endpoint_env(host), "DEDUP_JOB": "stepwise_job:run", "PYTHONPATH": str(tmp_path),
            "STEP_LOG": str(tmp_path / "steps.jsonl"), "DEDUP_LEASE_SECONDS": "2", "DEDUP_STORE_TIMEOUT_SECONDS": "1",
            "DEDUP_REDIS_WAIT_TIMEOUT_MS": "100", **extra}


def _run_id(redis: RedisServer, job: str) -> str:
    """The run id of ``job`` at ``T`` as the handler keys it (the first record of the fresh server's collection)."""
    from datetime import datetime, timezone

    from scheduler_dedup.handler.schedule.run_key import run_key_from_headers

    return run_key_from_headers(scheduler_headers(job, T), default_project=redis.project,
                                server_now=datetime.now(timezone.utc), manual_tolerance_seconds=60).run_id


def _wait_lapsed(redis: RedisServer, run_id: str, timeout: float = 30) -> None:
    store = redis.connect(COLLECTION, timeout_seconds=2.0)
    deadline = time.monotonic() + timeout
    while (record := store.get(run_id)) is not None and record.status == "in_progress" \
            and record.lease_remaining_seconds > 0:
        assert time.monotonic() < deadline, record
        time.sleep(0.05)
    store.close()


def test_an_instance_that_fills_while_the_job_runs_runs_it_once(own_redis: RedisServer, tmp_path: Path) -> None:
    log = tmp_path / "steps.jsonl"
    with HandlerServer(_env(own_redis, tmp_path, STEPS="6", STEP_SECONDS="0.5")) as server:
        answer: dict[str, requests.Response] = {}
        first = threading.Thread(target=lambda: answer.update(r=deliver(server.url, scheduler_headers("full", T))))
        first.start()
        deadline = time.monotonic() + 30
        while not _events(log, "start"):
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.02)
        own_redis.command("CONFIG", "SET", "maxmemory", "1")  # full: Redis answers OOM to guarded writes
        first.join(60)
        first_answer = answer["r"]
        assert first_answer.status_code == 200 and first_answer.json()["status"] == "processed", first_answer.text
        own_redis.command("CONFIG", "SET", "maxmemory", "512mb")  # room again (scaled up, records expired)
        run_id = first_answer.json()["run_id"]
        _wait_lapsed(own_redis, run_id)
        retry = deliver(server.url, scheduler_headers("full", T))
    assert retry.json()["status"] == "duplicate", retry.text
    assert len(_events(log, "done")) == 1 and len(_events(log, "start")) == 1


def test_every_renewal_refused_does_not_run_the_job_beside_the_live_attempt(own_redis: RedisServer,
                                                                            tmp_path: Path) -> None:
    log = tmp_path / "steps.jsonl"
    with own_redis.fault_proxy() as proxy:
        proxy.add(Fault(step="renewal", kind="refuse", code=grpc.StatusCode.RESOURCE_EXHAUSTED, count=100_000))
        env = dict(STEPS="12", STEP_SECONDS="0.4")
        with HandlerServer(_env(own_redis, tmp_path, host=proxy.host, **env)) as refused, \
                HandlerServer(_env(own_redis, tmp_path, **env)) as other:
            answer: dict[str, requests.Response] = {}
            first = threading.Thread(target=lambda: answer.update(r=deliver(refused.url, scheduler_headers("rn", T))))
            first.start()
            deadline = time.monotonic() + 30
            while not _events(log, "start"):
                assert time.monotonic() < deadline, refused.log()
                time.sleep(0.02)
            run_id = _run_id(own_redis, "rn")
            _wait_lapsed(own_redis, run_id)
            takeover = deliver(other.url, scheduler_headers("rn", T))  # Scheduler's retry, on another instance
            first.join(60)
            assert sum(1 for s, _ in proxy.calls if s == "renewal") >= 3
    assert takeover.status_code == 200 and takeover.json()["status"] == "processed", takeover.text
    # The first attempt stopped and released the run (or found the retry holding it): either way not done.
    assert answer["r"].json()["status"] in ("released", "fenced"), answer["r"].text
    assert len(_events(log, "stopped")) == 1
    assert len(_events(log, "done")) == 1  # executions == 1
