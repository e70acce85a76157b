"""The documented chain, end to end with real processes on the real emulator and default settings.

Cloud Scheduler -> dedup handler (``DEDUP_TARGET_TYPE=http``) -> a functions-framework service written as
docs/idempotent.md shows it (``examples/downstream_service``, ``@idempotent_endpoint()``), both on one project,
one database and one collection. Only test settings differ from a deployment: no ID token
(``DEDUP_TARGET_AUTH=none``, as in the other target tests) and a short ``DEDUP_TARGET_TIMEOUT_SECONDS``
where the test needs the downstream's answer lost to the caller's timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from scheduler_dedup.local.servers.handlers import HandlerServer

from .conftest import Harness, deliver, scheduler_headers
from tests.paths import ROOT

T = "2026-10-16T12:00:00Z"
EXAMPLE = ROOT / "examples" / "downstream_service" / "main.py"


class Downstream:
    def __init__(self, harness: Harness, seconds: float):
        self.log = harness.tmp / "exports.log"
        self.server = HandlerServer({"FIRESTORE_EMULATOR_HOST": harness.emulator.host,
                                     "GOOGLE_CLOUD_PROJECT": harness.emulator.project,
                                     "EXPORT_LOG": str(self.log), "EXPORT_SECONDS": str(seconds)},
                                    target=(str(EXAMPLE), "export"))

    def executions(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture()
def downstream(harness: Harness, request: pytest.FixtureRequest) -> Iterator[Downstream]:
    service = Downstream(harness, getattr(request, "param", 0.0))
    service.server.start()
    yield service
    service.server.stop()


def proxy_env(downstream: Downstream, timeout: float = 30) -> dict[str, str]:
    return {"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": downstream.server.url, "DEDUP_TARGET_AUTH": "none",
            "DEDUP_TARGET_TIMEOUT_SECONDS": str(timeout)}


def test_the_chain_runs_the_downstream_once(harness: Harness, downstream: Downstream) -> None:
    handler = harness.server(**proxy_env(downstream))
    first = deliver(handler.url, scheduler_headers("export", T))
    assert first.status_code == 200 and first.json()["status"] == "processed", first.text
    run_id = first.json()["run_id"]
    assert [line.split()[0] for line in downstream.executions()] == [run_id]
    again = deliver(handler.url, scheduler_headers("export", T))
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert len(downstream.executions()) == 1
    statuses = {r["scope"] if "scope" in r else "handler": r["status"] for r in harness.records().values()}
    assert statuses == {"handler": "completed", "main.export": "completed"}, statuses


@pytest.mark.parametrize("downstream", [8.0], indirect=True)
def test_an_answer_lost_to_the_callers_timeout_then_retries_run_the_downstream_once(
        harness: Harness, downstream: Downstream) -> None:
    handler = harness.server(**proxy_env(downstream, timeout=30))
    warm = deliver(handler.url, scheduler_headers("warm-up", T))  # both processes' Firestore clients are built
    assert warm.status_code == 200, warm.text
    handler.stop()
    handler = harness.server(**proxy_env(downstream, timeout=1))
    headers = scheduler_headers("slow-export", T)
    first = deliver(handler.url, headers)  # the downstream runs 8 s; the handler gives up after 1 s,
    # so the retry below reaches it while it still runs even when a loaded machine slows every step
    assert first.status_code == 500 and first.json()["status"] == "released", first.text
    assert "no answer within 1 s" in first.json()["error"]

    # Scheduler's retry while the downstream still runs: it answers 409 in_progress, which the proxy retries.
    retry = deliver(handler.url, headers)
    assert retry.status_code == 500 and retry.json()["status"] == "released", retry.text
    assert "HTTP 409" in retry.json()["error"] and "in_progress" in retry.json()["error"]

    deadline = time.monotonic() + 30
    answers = []
    while time.monotonic() < deadline:  # later retries, with backoff, until the run ends 200
        time.sleep(1.0)
        answer = deliver(handler.url, headers)
        answers.append((answer.status_code, answer.json()["status"]))
        if answer.status_code == 200:
            break
    assert answers[-1] == (200, "processed"), answers
    assert len(downstream.executions()) == 2, downstream.executions()  # the warm-up run and this one
    assert deliver(handler.url, headers).json()["status"] == "duplicate"
    assert [line.split()[0] for line in downstream.executions()].count(answer.json()["run_id"]) == 1


@pytest.mark.parametrize("downstream", [2.0], indirect=True)
def test_the_endpoint_answers_as_the_proxy_expects(harness: Harness, downstream: Downstream) -> None:
    url = downstream.server.url
    running = ThreadPoolExecutor(1).submit(
        lambda: requests.post(url, json={"run_id": "r0"}, headers={"Idempotency-Key": "k-0"}, timeout=30))
    deadline = time.monotonic() + 30
    while not downstream.executions():  # the first request is running the export
        assert time.monotonic() < deadline
        time.sleep(0.05)
    busy = requests.post(url, json={"run_id": "r0"}, headers={"Idempotency-Key": "k-0"}, timeout=30)
    assert busy.status_code == 409 and busy.json()["status"] == "in_progress", busy.text
    assert int(busy.headers["Retry-After"]) >= 1
    assert running.result().status_code == 200

    missing = requests.post(url, json={"run_id": "r"}, timeout=30)
    assert missing.status_code == 400 and missing.json()["header"] == "Idempotency-Key"
    failed = requests.post(url, json={}, headers={"Idempotency-Key": "k-1"}, timeout=30)
    assert failed.status_code == 422 and failed.json()["status"] == "failed", failed.text
    assert "run_id" in failed.json()["error"]
    again = requests.post(url, json={}, headers={"Idempotency-Key": "k-1"}, timeout=30)
    assert again.status_code == 422 and again.json()["error"] == failed.json()["error"]
    done = requests.post(url, json={"run_id": "r"}, headers={"Idempotency-Key": "k-2"}, timeout=30)
    assert done.status_code == 200 and done.json()["status"] == "processed"
    replay = requests.post(url, json={"run_id": "r"}, headers={"Idempotency-Key": "k-2"}, timeout=30)
    assert replay.status_code == 200 and replay.json()["status"] == "duplicate"
    assert replay.json()["result"] == done.json()["result"] == {"exported": "r", "schedule_time": None}
    # the same key with another body: 422 payload_mismatch, whatever the key's record says, and nothing runs
    for key, status in (("k-1", "failed"), ("k-2", "processed")):
        other = requests.post(url, json={"run_id": "other"}, headers={"Idempotency-Key": key}, timeout=30)
        assert other.status_code == 422 and other.json()["status"] == "payload_mismatch", (status, other.text)
    assert [line.split()[0] for line in downstream.executions()] == ["r0", "r"]
