"""Settling runs forwarded downstream, on each store's real server, against the local fake of the Cloud Run Admin API
over real HTTP: the run check reads at most its bound of executions per check, oldest first, and an outcome is
written fenced on the record's version (a record changed since it was read is left alone)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests

from scheduler_dedup.handler.core.downstream import ExecutionState
from scheduler_dedup.handler.monitoring.downstream_check import MAX_EXECUTION_READS, settle_ended
from scheduler_dedup.handler.monitoring.run_history import JobScope, RunHistory
from scheduler_dedup.handler.protocol.downstream_outcome import settle
from scheduler_dedup.handler.stores.base import SERVER_TIME, RunStore
from scheduler_dedup.handler.targets.executions import ExecutionApi
from scheduler_dedup.handler.targets.settings import TargetSettings
from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.store_servers import StoreServer

from tests.handler.fake_google import FakeGoogle

from .conftest import COLLECTION

JOB = "long-export"
CLOUD_RUN_JOB = "projects/p1/locations/us-central1/jobs/export"


@pytest.fixture()
def fake() -> Iterator[FakeGoogle]:
    server = FakeGoogle().start()
    yield server
    server.stop()


def forwarded(store: RunStore, fake: FakeGoogle, n: int) -> list[str]:
    """``n`` runs of :data:`JOB`, a minute apart ending two minutes ago, each ``running_downstream`` with an execution
    of the fake; returns their run ids, oldest first."""
    base = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=n + 2)
    ids = []
    for i in range(n):
        run_id = hashlib.sha256(f"{JOB}/{i}".encode()).hexdigest()
        name = f"{CLOUD_RUN_JOB}/executions/e-{i}"
        fake.job_executions.append({"name": name, "template": {"containers": []}})
        assert store.create(run_id, {"status": "running_downstream", "attempt_id": f"{i:032x}", "lease_seconds": 60.0,
                                     "claimed_at": SERVER_TIME, "job_name": JOB,
                                     "schedule_time": base + timedelta(minutes=i), "project": "p1", "location": "",
                                     "manual": False, "result": {"target": "cloud_run_job", "execution": name}})
        ids.append(run_id)
    return ids


def api(fake: FakeGoogle) -> ExecutionApi:
    settings = TargetSettings(type="cloud_run_job", target=CLOUD_RUN_JOB, run_api=fake.url, auth="none",
                              timeout_seconds=5)
    return ExecutionApi(settings, requests.Session())


def test_a_check_reads_at_most_its_bound_oldest_first_and_the_next_the_rest(store: Any, fake: FakeGoogle) -> None:
    ids = forwarded(store, fake, MAX_EXECUTION_READS + 2)
    for i in range(len(ids)):
        fake.end("cloud_run_job", "failed" if i % 2 else "completed", index=i)
    history, now = RunHistory(store), datetime.now(timezone.utc)
    first = settle_ended(history, JobScope(JOB), api(fake), since=now - timedelta(days=1), until=now,
                         retention_seconds=3600)
    assert len(fake.gets("/executions/")) == MAX_EXECUTION_READS
    assert len(first.settled) == MAX_EXECUTION_READS and len(first.running) == 2
    assert [store.get(r).status for r in ids[:4]] == ["completed", "failed", "completed", "failed"]
    assert [store.get(r).status for r in ids[-2:]] == ["running_downstream"] * 2  # the newest wait for the next check
    second = settle_ended(history, JobScope(JOB), api(fake), since=now - timedelta(days=1), until=now,
                          retention_seconds=3600)
    assert len(second.settled) == 2 and second.running == []
    assert len(fake.gets("/executions/")) == MAX_EXECUTION_READS + 2  # a settled run is never read again


def test_an_outcome_is_not_written_over_a_record_changed_since_it_was_read(store: Any, fake: FakeGoogle) -> None:
    [run_id] = forwarded(store, fake, 1)
    read = store.get(run_id)
    # a re-run (or another reader) changed it since: another attempt holds it now
    assert store.update_if_unchanged(run_id, {"status": "in_progress", "attempt_id": "f" * 32}, read.update_time)
    ended = ExecutionState("failed", "FAILED: exit 1", None, datetime.now(timezone.utc) - timedelta(minutes=1))
    assert settle(store, read, ended, 3600) is False
    after = store.get(run_id)
    assert (after.status, after.attempt_id) == ("in_progress", "f" * 32)


def test_an_execution_still_running_or_unreadable_leaves_the_record(store: Any, fake: FakeGoogle) -> None:
    ids = forwarded(store, fake, 2)
    fake.end("cloud_run_job", "failed", index=1)
    fake.get_faults.extend([403, 403])  # executions.get refused: nothing tells how the ended one ended
    history, now = RunHistory(store), datetime.now(timezone.utc)
    found = settle_ended(history, JobScope(JOB), api(fake), since=now - timedelta(days=1), until=now,
                         retention_seconds=3600)
    assert found.settled == [] and len(found.running) == 2
    assert [store.get(r).status for r in ids] == ["running_downstream"] * 2


def test_a_deleted_execution_is_settled_failed_its_outcome_unknown(store: Any, fake: FakeGoogle) -> None:
    [run_id] = forwarded(store, fake, 1)
    fake.job_executions.clear()  # executions.get answers 404: it runs no more
    history, now = RunHistory(store), datetime.now(timezone.utc)
    found = settle_ended(history, JobScope(JOB), api(fake), since=now - timedelta(days=1), until=now,
                         retention_seconds=3600)
    assert len(found.settled) == 1 and found.running == []
    record = store.get(run_id)
    assert record.status == "failed" and "NOT_FOUND" in (record.error or "") and "e-0" in (record.error or "")


@pytest.mark.parametrize("kind", ["lose_answer", "unavailable"])
def test_an_outcome_whose_write_lost_its_answer_or_failed_is_decided_by_reading(server: StoreServer, store: Any,
                                                                               fake: FakeGoogle, kind: str) -> None:
    """The failure write applied and its answer lost, or refused as unavailable before it was sent: settle reads the
    record back and writes (again) on its current version; the record ends failed, once."""
    [run_id] = forwarded(store, fake, 1)
    try:
        proxy = server.fault_proxy()
    except NotImplementedError as exc:  # the in-memory toy store has no wire to break
        pytest.skip(str(exc))
    try:
        via = server.connect(COLLECTION, timeout_seconds=10.0, host=proxy.host)
        proxy.add(Fault(step="failure", kind=kind))
        ended = ExecutionState("failed", "FAILED: exit 1", None, datetime.now(timezone.utc) - timedelta(minutes=1))
        assert settle(via, via.get(run_id), ended, 3600) is True
        assert sum(1 for i in proxy.injected if i["step"] == "failure" and i["kind"] == kind) == 1
        via.close()
    finally:
        proxy.stop()
    record = store.get(run_id)
    assert record.status == "failed" and "exit 1" in (record.error or "")
