"""Fixtures for handler tests: handler processes on the real emulator, and a job that records executions."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from scheduler_dedup.local.firestore_emulator import FirestoreEmulator
from scheduler_dedup.local.recording_job import read_events
from scheduler_dedup.local.servers import HandlerServer

from .fake_google import FakeGoogle, LocalSigner

COLLECTION = "scheduler_runs"


@dataclass
class Harness:
    """Starts handler servers sharing one executions log and one job plan."""

    emulator: FirestoreEmulator
    tmp: Path
    servers: list[HandlerServer] = field(default_factory=list)

    @property
    def executions_log(self) -> Path:
        return self.tmp / "executions.jsonl"

    @property
    def plan_file(self) -> Path:
        return self.tmp / "plan.json"

    def env(self, **overrides: str) -> dict[str, str]:
        return {
            **self.emulator.endpoint_env(),
            "DEDUP_JOB": "scheduler_dedup.local.recording_job:run",
            "DEMO_EXECUTIONS_LOG": str(self.executions_log),
            "DEMO_JOB_PLAN": str(self.plan_file),
            **overrides,
        }

    def server(self, threads: int = 8, **env: str) -> HandlerServer:
        server = HandlerServer(self.env(**env), threads=threads)
        self.servers.append(server)
        return server.start()

    def plan(self, job_name: str, **behaviour: Any) -> None:
        plan = json.loads(self.plan_file.read_text()) if self.plan_file.exists() else {}
        plan[job_name] = behaviour
        self.plan_file.write_text(json.dumps(plan))

    def starts(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return [e for e in read_events(self.executions_log)
                if e["event"] == "start" and (run_id is None or e["run_id"] == run_id)]

    def ends(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return [e for e in read_events(self.executions_log)
                if e["event"] == "end" and (run_id is None or e["run_id"] == run_id)]

    def wait_for_lease_expiry(self, run_id: str, timeout: float = 60) -> None:
        """Block until ``run_id``'s lease has expired by the store's clock, as a takeover decides it.

        The holder must be unable to renew (killed or stopped). Polls the record's
        :attr:`RunRecord.lease_remaining_seconds` (last write + lease - read time, both Firestore's) instead
        of sleeping for the lease plus a margin: a loaded machine can commit the holder's last renewal
        later than the test saw it stop, and a delivery sent before expiry would rightly answer 409.

        Raises:
            AssertionError: the run has no in_progress record, or its lease had not expired after ``timeout`` s.
        """
        store = self.emulator.connect(COLLECTION)
        deadline = time.monotonic() + timeout
        while True:
            record = store.get(run_id)
            assert record is not None, f"run {run_id} has no record"
            assert record.status == "in_progress", record
            if record.lease_remaining_seconds <= 0:
                return
            assert time.monotonic() < deadline, f"the lease of {run_id} has not expired after {timeout} s"
            time.sleep(min(0.1, record.lease_remaining_seconds))

    def records(self) -> dict[str, dict[str, Any]]:
        """Every record of the run records' collection by run id (the emulator's own listing: the test's view)."""
        from google.cloud import firestore

        client = firestore.Client(project=self.emulator.project)
        return {d.id: d.to_dict() or {} for d in client.collection(COLLECTION).stream()}


@pytest.fixture()
def harness(emulator: FirestoreEmulator, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(emulator, tmp_path)
    yield h
    for server in h.servers:
        server.stop()


@pytest.fixture(scope="module")
def signer() -> LocalSigner:
    """A local OIDC signing key (what Google's would be)."""
    return LocalSigner()


@pytest.fixture()
def google(signer: LocalSigner) -> Iterator[FakeGoogle]:
    """The fake Google server publishing ``signer``'s certificate at ``/certs``."""
    server = FakeGoogle().start()
    server.certs = {signer.kid: signer.cert_pem}
    yield server
    server.stop()


def scheduler_headers(job: str, schedule_time: str, **extra: str) -> dict[str, str]:
    """The headers Cloud Scheduler sends for one delivery."""
    return {"X-CloudScheduler-JobName": job, "X-CloudScheduler-ScheduleTime": schedule_time,
            "User-Agent": "Google-Cloud-Scheduler", **extra}


def deliver(url: str, headers: dict[str, str], timeout: float = 60) -> requests.Response:
    """POST one delivery, as Cloud Scheduler does."""
    return requests.post(url, headers=headers, data=b"", timeout=timeout)


Deliver = Callable[[str, dict[str, str]], requests.Response]
