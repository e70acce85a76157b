"""A holder that knows its lease is lost stops its job before another attempt can take the run over, on each store
over real HTTP: every renewal of the run's lease (or of the job's overlap lease) is refused on the wire, the job
never asks its lease, and a retry after the lease's expiry runs the run again. The job's own heartbeats (written
by the job, timestamped by it) show that no two attempts ever executed at once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from scheduler_dedup.handler.protocol.overlap_lease import lease_id
from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION
from .test_overlap import JOB, _handler_processes_reach_it, fire_times, run_id  # noqa: F401

pytestmark = pytest.mark.processes

LEASE_SECONDS = 4
#: The job runs this long, never asking its lease: past the lease, unless it is stopped.
JOB_SECONDS = 7.0

HEARTBEAT_JOB = '''
import json, os, time


def run(run):
    end = time.time() + float(os.environ["JOB_SECONDS"])
    with open(os.environ["BEATS"], "a") as beats:
        while time.time() < end:
            beats.write(json.dumps({"attempt": run.attempt_id, "t": time.time()}) + "\\n")
            beats.flush()
            time.sleep(0.05)
    return "done"
'''


def _spans(beats: Path) -> dict[str, tuple[float, float]]:
    """Each attempt's first and last heartbeat, by the job's own clock."""
    spans: dict[str, tuple[float, float]] = {}
    for line in beats.read_text().splitlines():
        beat = json.loads(line)
        first, last = spans.get(beat["attempt"], (beat["t"], beat["t"]))
        spans[beat["attempt"]] = (min(first, beat["t"]), max(last, beat["t"]))
    return spans


def _overlaps(spans: dict[str, tuple[float, float]]) -> list[tuple[str, str]]:
    ordered = sorted(spans.items(), key=lambda item: item[1][0])
    return [(a, b) for (a, (_, a_end)), (b, (b_start, _)) in zip(ordered, ordered[1:]) if b_start <= a_end]


@pytest.mark.parametrize("overlap, refused", [("allow", "run"), ("skip", "run"), ("skip", "overlap lease")])
def test_a_job_that_never_asks_is_stopped_before_its_lost_lease_expires(
        server: StoreServer, store: Any, tmp_path: Path, overlap: str, refused: str) -> None:
    try:
        proxy = server.fault_proxy()
    except NotImplementedError:
        pytest.skip(f"{server.display_name} has no fault proxy")
    (tmp_path / "heartbeat_job.py").write_text(HEARTBEAT_JOB)
    beats = tmp_path / "beats.jsonl"
    beats.touch()
    env = {**server.endpoint_env(proxy.host), "DEDUP_COLLECTION": COLLECTION, "DEDUP_JOB": "heartbeat_job:run",
           "PYTHONPATH": str(tmp_path), "BEATS": str(beats), "JOB_SECONDS": str(JOB_SECONDS),
           "DEDUP_LEASE_SECONDS": str(LEASE_SECONDS), "DEDUP_STORE_TIMEOUT_SECONDS": "2", "DEDUP_OVERLAP": overlap}
    [t] = fire_times(1)
    rid = run_id(t, server.project)
    refused_document = rid if refused == "run" else lease_id(server.project, "", JOB)
    proxy.add(Fault(kind="refuse", step="renewal", document=refused_document, count=10**6))
    headers = {"X-CloudScheduler-JobName": JOB, "X-CloudScheduler-ScheduleTime": t,
               "User-Agent": "Google-Cloud-Scheduler"}
    answers: list[Any] = []

    def first_delivery(url: str) -> None:
        try:
            answers.append(requests.post(url, headers=headers, timeout=60))
        except requests.RequestException as exc:
            answers.append(exc)

    a, b = HandlerServer(env).start(), HandlerServer(env).start()
    try:
        thread = threading.Thread(target=first_delivery, args=(a.url,))
        thread.start()
        # Scheduler's retry, after the first attempt's lease has expired (renewals refused from the start).
        time.sleep(LEASE_SECONDS + 1.5)
        proxy.clear()
        retry: requests.Response | None = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            retry = requests.post(b.url, headers=headers, timeout=60)
            if retry.status_code == 200:
                break
            time.sleep(0.5)
        thread.join()
        assert retry is not None and retry.json()["status"] in ("processed", "duplicate"), retry.text
        spans = _spans(beats)
        assert len(spans) >= 1 and _overlaps(spans) == [], spans
        first = min(spans.values())
        assert first[1] - first[0] < LEASE_SECONDS, f"the first attempt ran {first[1] - first[0]:.1f} s"
        assert "ending this worker process" in a.log(), a.log()[-2000:]
        record = store.get(rid)
        assert record is not None and record.status == "completed", record
    finally:
        a.stop()
        b.stop()
        proxy.stop()
