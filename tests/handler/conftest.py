"""Fixtures for handler tests: handler processes on the real emulator, and a job that records executions."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.local.demo.recording_job import read_events
from scheduler_dedup.local.servers.handlers import AppEngineServer, HandlerServer

from .fake_google import FakeGoogle, LocalSigner

COLLECTION = "scheduler_runs"
#: The App Engine target's relative URI the App Engine harness delivers to.
APP_ENGINE_RELATIVE_URI = "/scheduled/run?source=scheduler"


@dataclass
class Harness:
    """Starts handler servers sharing one executions log and one job plan.

    ``platform`` is ``cloud_run`` (functions-framework, Scheduler's HTTP target) or ``app_engine`` (the deploy
    archive's ``app.yaml`` entrypoint in ``app_dir``, ``DEDUP_APP_ENGINE_CALLER=true``, Scheduler's App Engine
    target): :meth:`server` and :meth:`headers` follow it, so one test checks both.
    """

    emulator: FirestoreEmulator
    tmp: Path
    servers: list[HandlerServer | AppEngineServer] = field(default_factory=list)
    platform: str = "cloud_run"
    app_dir: Path | None = None

    @property
    def executions_log(self) -> Path:
        return self.tmp / "executions.jsonl"

    @property
    def plan_file(self) -> Path:
        return self.tmp / "plan.json"

    def env(self, **overrides: str) -> dict[str, str]:
        return {
            **self.emulator.endpoint_env(),
            "DEDUP_ALLOW_TEST_ENDPOINTS": "1",  # the fake Google servers of these tests are plain-http loopback
            "DEDUP_JOB": "scheduler_dedup.local.demo.recording_job:run",
            "DEMO_EXECUTIONS_LOG": str(self.executions_log),
            "DEMO_JOB_PLAN": str(self.plan_file),
            **overrides,
        }

    def server(self, threads: int = 8, **env: str) -> HandlerServer | AppEngineServer:
        """A started server; on App Engine the entrypoint's own thread count serves (``threads`` is ignored)."""
        server: HandlerServer | AppEngineServer
        if self.platform == "app_engine":
            assert self.app_dir is not None
            server = AppEngineServer(self.env(**{"DEDUP_APP_ENGINE_CALLER": "true", **env}), self.app_dir,
                                     relative_uri=APP_ENGINE_RELATIVE_URI)
        else:
            server = HandlerServer(self.env(**env), threads=threads)
        self.servers.append(server)
        return server.start()

    def headers(self, job: str, schedule_time: str, **extra: str) -> dict[str, str]:
        """The headers of one delivery as this platform's Scheduler target sends them."""
        if self.platform == "app_engine":
            return app_engine_headers(job, schedule_time, **extra)
        return scheduler_headers(job, schedule_time, **extra)

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


@pytest.fixture(scope="session")
def app_engine_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The deploy archive (no job source: the job comes from ``DEDUP_JOB``), unpacked as App Engine unpacks it."""
    import io
    import zipfile

    from scheduler_dedup.infra.job.archive import build_deploy_archive

    app_dir = tmp_path_factory.mktemp("app-engine-app")
    with zipfile.ZipFile(io.BytesIO(build_deploy_archive(None).content)) as zf:
        zf.extractall(app_dir)
    return app_dir


@pytest.fixture(params=["cloud_run", "app_engine"])
def platform_harness(request: pytest.FixtureRequest, emulator: FirestoreEmulator, tmp_path: Path,
                     app_engine_app: Path) -> Iterator[Harness]:
    """A :class:`Harness` on each platform in turn: the same checks on Cloud Run and on App Engine."""
    h = Harness(emulator, tmp_path, platform=request.param, app_dir=app_engine_app)
    yield h
    for server in h.servers:
        server.stop()


def scheduler_headers(job: str, schedule_time: str, **extra: str) -> dict[str, str]:
    """The headers Cloud Scheduler sends for one delivery."""
    return {"X-CloudScheduler-JobName": job, "X-CloudScheduler-ScheduleTime": schedule_time,
            "User-Agent": "Google-Cloud-Scheduler", **extra}


def app_engine_headers(job: str, schedule_time: str, *, service: str = "dedup", version: str = "v1",
                       project: str = "demo-scheduler-dedup", **extra: str) -> dict[str, str]:
    """The headers one delivery of a Scheduler job's App Engine target carries when it reaches the app.

    Scheduler's own (``AppEngineHttpTarget.headers``,
    https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#AppEngineHttpTarget):
    ``User-Agent`` ending in ``AppEngine-Google; (+http://code.google.com/appengine)``, ``X-CloudScheduler: true``,
    ``X-CloudScheduler-JobName``, ``X-CloudScheduler-ScheduleTime``, and ``Content-Type:
    application/octet-stream`` for a body; the job's ``X-Dedup-*`` headers; and what App Engine adds on the way in:
    the internal cron headers (``X-Appengine-Cron``, ``X-AppEngine-QueueName: __cron``), the routed ``Host``
    (``VERSION-dot-SERVICE-dot-PROJECT.REGION_ID.r.appspot.com``), ``X-Cloud-Trace-Context`` and the forwarding
    headers (https://cloud.google.com/appengine/docs/standard/reference/request-headers).
    """
    return {
        "Host": f"{version}-dot-{service}-dot-{project}.uc.r.appspot.com",
        "User-Agent": "AppEngine-Google; (+http://code.google.com/appengine)",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": job,
        "X-CloudScheduler-ScheduleTime": schedule_time,
        "Content-Type": "application/octet-stream",
        "X-Dedup-Project": project,
        "X-Dedup-Location": "us-central1",
        "X-Appengine-Cron": "true",
        "X-AppEngine-QueueName": "__cron",
        "X-Appengine-Country": "ZZ",
        "X-Cloud-Trace-Context": "105445aa7843bc8bf206b12000100000/1;o=1",
        "X-Forwarded-For": "0.1.0.2",
        "X-Forwarded-Proto": "https",
        **extra,
    }


#: The body the Scheduler jobs of the App Engine tests carry (the handler ignores it).
APP_ENGINE_BODY = b"scheduled"


def deliver(url: str, headers: dict[str, str], timeout: float = 60) -> requests.Response:
    """POST one delivery, as Cloud Scheduler does (with the App Engine target's body when the headers are its)."""
    body = APP_ENGINE_BODY if headers.get("X-CloudScheduler") == "true" else b""
    return requests.post(url, headers=headers, data=body, timeout=timeout)
