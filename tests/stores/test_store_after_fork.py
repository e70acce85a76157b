"""The store's client is made in the process that serves, never in the one that forks it.

functions-framework imports ``main.py`` in gunicorn's arbiter and forks the worker from it. A gRPC channel used
before a fork is unusable after it (https://github.com/grpc/grpc/blob/master/doc/fork_support.md): workers that
inherited the arbiter's Firestore channel blocked for good on its lock, or on a read that never ended, in about
1 delivery in 50 under load. So the arbiter of a handler that has served must hold no connection to the store.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests

from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION
from .toy_store import TOY

pytestmark = pytest.mark.processes


def _connections_to(pid: int, port: int) -> int:
    """How many of the process's own TCP sockets are connected to ``port`` (from ``/proc``; gRPC's are IPv6 sockets
    holding IPv4-mapped addresses, so ``tcp6`` too)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote, inode = fields[2], fields[9]
            if inode in inodes and int(remote.split(":")[1], 16) == port:
                count += 1
    return count


def _children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def test_the_arbiter_holds_no_store_connection_and_its_worker_serves(server: StoreServer, tmp_path: Path) -> None:
    if server.kind == TOY.id:
        pytest.skip("the in-memory toy store has no server a handler process can reach")
    port = server.port
    with HandlerServer({**server.endpoint_env(), "DEDUP_COLLECTION": COLLECTION,
                        "DEDUP_JOB": "scheduler_dedup.local.demo.recording_job:run",
                        "DEMO_EXECUTIONS_LOG": str(tmp_path / "executions.jsonl")}) as handler:
        answer = requests.post(handler.url, headers={"X-CloudScheduler-JobName": "fork",
                                                     "X-CloudScheduler-ScheduleTime": "2026-12-04T10:00:00Z",
                                                     "User-Agent": "Google-Cloud-Scheduler"}, timeout=60)
        assert answer.status_code == 200 and answer.json()["status"] == "processed", answer.text
        assert handler.proc is not None
        [worker] = _children(handler.proc.pid)
        assert _connections_to(worker, port) >= 1  # what makes the check below able to fail: the worker's own
        assert _connections_to(handler.proc.pid, port) == 0, "the arbiter opened the store before forking its worker"
