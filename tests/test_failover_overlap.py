"""Where the overlap lease cannot hold: a Redis failover to a replica that had not yet received the lease.

Measured on real servers: a primary ``redis-server`` and a replica behind a replication relay 1.5 s late (the
failover campaign's :class:`_Lagging`), handlers with ``DEDUP_OVERLAP=skip`` and no ``WAIT``. A run takes the
job's overlap lease and starts; the failover happens before the lease reached the replica; the next fire time,
delivered to the promoted replica, finds no lease and executes beside the first. Without the failover the same
delivery is skipped (the control), so this is the failover's cost, not the test's.
"""

from __future__ import annotations

import secrets
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests

from scheduler_dedup.local.demo.recording_job import read_events
from scheduler_dedup.local.campaigns.failover import _replicated
from scheduler_dedup.local.faults.resp_proxy import RespFaultProxy
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.redis_server import RedisServer

JOB = "nightly-export"

pytestmark = pytest.mark.processes


def _times(n: int) -> list[str]:
    base = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=n + 1)
    return [(base + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(n)]


def _post(url: str, t: str) -> dict[str, str]:
    headers = {"X-CloudScheduler-JobName": JOB, "X-CloudScheduler-ScheduleTime": t}
    return dict(requests.post(url, headers=headers, timeout=60).json())


@pytest.mark.parametrize("failover", [False, True])
def test_a_failover_that_loses_the_lease_lets_two_runs_execute_at_once(tmp_path: Path, failover: bool) -> None:
    password = secrets.token_urlsafe(16)
    auth = tmp_path / "auth"
    auth.write_text(password + "\n")
    servers: list[RedisServer] = []
    primary = RedisServer(password=password).start()
    servers.append(primary)
    link, replica = _replicated(primary, lambda host: servers.append(RedisServer(password=password, replica_of=host))
                                or servers[-1].start(), lag_ms=1500)
    front = RespFaultProxy(upstream=primary.host).start()
    log = tmp_path / "executions.jsonl"
    (tmp_path / "plan.json").write_text('{"%s": {"sleep": 4}}' % JOB)
    handler = HandlerServer({"DEDUP_STORE": "redis", "DEDUP_REDIS_URL": f"redis://{front.host}/0",
                             "DEDUP_REDIS_AUTH_FILE": str(auth), "GOOGLE_CLOUD_PROJECT": primary.project,
                             "DEDUP_JOB": "scheduler_dedup.local.demo.recording_job:run", "DEDUP_OVERLAP": "skip",
                             "DEMO_EXECUTIONS_LOG": str(log), "DEMO_JOB_PLAN": str(tmp_path / "plan.json"),
                             "DEDUP_LEASE_SECONDS": "30", "DEDUP_REDIS_WAIT_TIMEOUT_MS": "0"}).start()
    try:
        t0, t1 = _times(2)
        first = threading.Thread(target=_post, args=(handler.url, t0))
        first.start()
        deadline = time.monotonic() + 30
        while not any(e["event"] == "start" for e in read_events(log)):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        if failover:  # within the replication lag of the lease's write: the replica never gets it
            link.cut()
            replica.promote()
            front.redirect(replica.host)
            primary.kill()
        second = _post(handler.url, t1)
        first.join()
        starts = [e for e in read_events(log) if e["event"] == "start"]
        if failover:
            # executed beside the first run: the lease was lost with the failover
            assert second["status"] == "processed" and len(starts) == 2, second
        else:
            assert second["status"] == "skipped_overlap" and len(starts) == 1
    finally:
        handler.stop()
        front.stop()
        for server in servers:
            server.close()
