"""A write whose answer was lost is not a write that was refused: store faults at the gRPC level, real handler processes.

Each handler process talks to the emulator through :class:`FaultProxy`, which fails store calls of one
protocol step before sending them, or applies them and loses the answer (the client library then retries,
and the retry fails its precondition against the attempt's own write).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import requests
from google.cloud import firestore

from scheduler_dedup.handler import RunKey
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
from scheduler_dedup.handler.stores.firestore.wire import FIRESTORE_WIRE
from scheduler_dedup.local.faults.grpc_proxy import Call, Fault, FaultProxy

from .conftest import COLLECTION, Harness, deliver, scheduler_headers

T = "2026-10-16T12:00:00Z"


@pytest.fixture()
def proxy(emulator: FirestoreEmulator) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=emulator.host, wire=FIRESTORE_WIRE) as p:
        yield p


def injected(proxy: FaultProxy, step: str) -> int:
    return sum(1 for i in proxy.injected if i["step"] == step)


def fenced_logs(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("{") and "fenced" in json.loads(line)["message"]]


def test_a_lost_renewal_answer_keeps_the_lease_and_the_job_runs_once(harness: Harness, proxy: FaultProxy) -> None:
    harness.plan("renewed", sleep=8)
    a = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host, DEDUP_LEASE_SECONDS="3")
    b = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host, DEDUP_LEASE_SECONDS="3")
    proxy.add(Fault(step="renewal", kind="lose_answer"))
    headers = scheduler_headers("renewed", T)
    started = time.monotonic()
    first = ThreadPoolExecutor(1).submit(lambda: deliver(a.url, headers))
    time.sleep(max(0.0, 5.5 - (time.monotonic() - started)))  # past the lease, had the renewals stopped
    second = deliver(b.url, headers)
    assert injected(proxy, "renewal") == 1
    assert second.status_code == 409 and second.json()["status"] == "in_progress", second.text
    answer = first.result(timeout=60)
    assert answer.status_code == 200 and answer.json()["status"] == "processed", answer.text
    assert len(harness.starts()) == 1
    assert fenced_logs(a.log()) == [] and fenced_logs(b.log()) == []


@pytest.mark.parametrize(("step", "plan", "status", "outcome"), [
    ("claim", {}, 200, "processed"),
    ("completion", {}, 200, "processed"),
    ("failure", {"fail": "permanent"}, 200, "failed"),
    ("release", {"fail": "retryable", "fail_times": 1}, 500, "released"),
])
def test_a_lost_answer_is_recognised_as_this_attempts_own_write(harness: Harness, proxy: FaultProxy, step: str,
                                                               plan: dict[str, object], status: int,
                                                               outcome: str) -> None:
    harness.plan("lossy", **plan)
    server = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host)
    proxy.add(Fault(step=step, kind="lose_answer"))
    answer = deliver(server.url, scheduler_headers("lossy", T))
    assert injected(proxy, step) == 1
    assert answer.status_code == status and answer.json()["status"] == outcome, answer.text
    assert fenced_logs(server.log()) == []
    records = harness.records()
    if outcome == "released":
        (record,) = records.values()
        assert record["status"] == "released" and record["releases"] == 1 and record["error"], record
        assert deliver(server.url, scheduler_headers("lossy", T)).json()["status"] == "processed"
        assert len(harness.starts()) == 2
    else:
        (record,) = records.values()
        assert record["status"] == {"processed": "completed", "failed": "failed"}[outcome]
        again = deliver(server.url, scheduler_headers("lossy", T))
        assert again.json()["status"] == {"processed": "duplicate", "failed": "failed"}[outcome]
        assert len(harness.starts()) == 1


def test_a_lost_takeover_answer_is_recognised(harness: Harness, proxy: FaultProxy) -> None:
    run_id = RunKey(harness.emulator.project, "", "crashed", datetime(2026, 10, 16, 12, tzinfo=timezone.utc)).run_id
    client = firestore.Client(project=harness.emulator.project)
    dead = {"status": "in_progress", "attempt_id": "d" * 32, "lease_seconds": 0.001, "job_name": "crashed"}
    client.collection(COLLECTION).document(run_id).set(dead)  # a crashed attempt's claim, its lease long expired
    server = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host)
    proxy.add(Fault(step="takeover", kind="lose_answer"))
    answer = deliver(server.url, scheduler_headers("crashed", T))
    assert injected(proxy, "takeover") == 1
    assert answer.status_code == 200 and answer.json()["status"] == "processed", answer.text
    assert fenced_logs(server.log()) == []
    record = harness.records()[run_id]
    assert record["status"] == "completed" and record["previous_attempt_id"] == "d" * 32


def test_completion_refused_as_invalid_completes_the_run_without_its_result(harness: Harness,
                                                                           proxy: FaultProxy) -> None:
    server = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host)
    proxy.add(Fault(step="completion", kind="refuse", code=grpc.StatusCode.INVALID_ARGUMENT))
    answer = deliver(server.url, scheduler_headers("refused", T))
    body = answer.json()
    assert answer.status_code == 200 and body["status"] == "processed", answer.text
    assert body["result"] is None and "Firestore refused the result" in body["result_dropped"]
    (record,) = harness.records().values()
    assert record["status"] == "completed" and record["result_dropped"] == body["result_dropped"]
    assert deliver(server.url, scheduler_headers("refused", T)).json()["status"] == "duplicate"
    assert len(harness.starts()) == 1


def test_a_store_error_after_the_job_ran_says_so_and_what_the_next_delivery_does(harness: Harness,
                                                                                  proxy: FaultProxy) -> None:
    server = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host, DEDUP_STORE_TIMEOUT_SECONDS="1",
                            DEDUP_LEASE_SECONDS="30")
    proxy.add(Fault(step="completion", kind="unavailable", count=1000))
    answer = deliver(server.url, scheduler_headers("unrecorded", T))
    body = answer.json()
    assert answer.status_code == 500 and body["status"] == "store_error", answer.text
    assert body["executed"] is True and body["step"] == "complete"
    assert "not recorded" not in body["error"] and "the job ran" in body["error"]
    assert "get 409 in_progress" in body["error"] and "takes the run over and runs the job again" in body["error"]
    assert len(harness.starts()) == 1
    (record,) = harness.records().values()
    assert record["status"] == "in_progress"
    proxy.clear()
    other = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host, DEDUP_LEASE_SECONDS="30")
    follow_up = deliver(other.url, scheduler_headers("unrecorded", T))  # what the answer promised
    assert follow_up.status_code == 409 and follow_up.json()["status"] == "in_progress"
    assert len(harness.starts()) == 1


def test_a_release_whose_answer_was_lost_is_released_even_if_a_new_claim_follows(
        emulator: FirestoreEmulator, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The release is applied, its answer lost, and another delivery claims the released run before the releasing
    attempt looks: the record it reads is held by another attempt, but nobody took the run over from it (the record
    counts its release), so it answers released (a retryable failure), not fenced. Found by the fault campaign
    (seed 404), when a release still deleted the record."""
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", proxy.host)
    idem = Idempotency(FirestoreRunStore.connect(emulator.project, "(default)", COLLECTION, 10.0), lease_seconds=30)
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", emulator.host)
    direct = FirestoreRunStore.connect(emulator.project, "(default)", COLLECTION, 10.0)
    run_id = "release-then-new-claim"

    def new_claim(call: Call, kind: str | None, seconds: float) -> None:
        if call.step == "release" and kind == "lose_answer":  # the release is applied; its answer not yet delivered
            released = direct.get(run_id)
            assert released is not None and released.status == "released"
            assert direct.update_if_unchanged(run_id, {"status": "in_progress", "attempt_id": "f" * 32,
                                                       "lease_seconds": 30.0}, released.update_time)

    proxy.observe(new_claim)
    proxy.add(Fault(step="release", kind="lose_answer"))

    def work(attempt_id: str) -> None:
        raise RuntimeError("retryable")

    outcome = idem.execute(run_id, work)
    assert outcome.outcome is Outcome.RELEASED, outcome
    record = direct.get(run_id)
    assert record is not None and record.attempt_id == "f" * 32 and record.status == "in_progress"  # untouched


def test_a_release_after_a_takeover_is_still_fenced(emulator: FirestoreEmulator) -> None:
    """The counterpart: the record this attempt held was taken over (same document, so the same creation time),
    so its release is refused and it answers fenced; the new holder's record is untouched."""
    idem = Idempotency(FirestoreRunStore.connect(emulator.project, "(default)", COLLECTION, 10.0), lease_seconds=30)
    direct = FirestoreRunStore.connect(emulator.project, "(default)", COLLECTION, 10.0)
    run_id = "release-after-takeover"

    def work(attempt_id: str) -> None:
        record = direct.get(run_id)
        assert record is not None
        assert direct.update_if_unchanged(run_id, {"attempt_id": "e" * 32, "previous_attempt_id": attempt_id},
                                          record.update_time)
        raise RuntimeError("retryable")

    assert idem.execute(run_id, work).outcome is Outcome.FENCED
    record = direct.get(run_id)
    assert record is not None and record.attempt_id == "e" * 32 and record.status == "in_progress"


def landed(proxy: FaultProxy, step: str) -> threading.Event:
    """An event set when a call of ``step`` held by a fault has been forwarded and answered (or lost)."""
    done = threading.Event()

    def watch(call: Call, kind: str | None, seconds: float) -> None:
        if call.step == step and kind is not None:
            done.set()

    proxy.observe(watch)
    return done


def assert_json_contract(answer: requests.Response) -> dict[str, object]:
    assert answer.headers["Content-Type"].startswith("application/json"), answer.text
    body = answer.json()
    assert isinstance(body, dict) and isinstance(body.get("status"), str), answer.text
    return body


@pytest.mark.parametrize("step", ["claim", "takeover"])
def test_a_claim_that_lands_after_its_attempt_gave_up_holds_nothing(harness: Harness, proxy: FaultProxy,
                                                                    step: str) -> None:
    """A claim (or takeover) held beyond the store timeout reaches Firestore after its delivery answered 500
    ``store_error`` or 409: nobody will run the job under it, so the next delivery runs the job at once (no
    409 until its lease expires) and the run history does not report the run as repeated."""
    run_id = RunKey(harness.emulator.project, "", "late", datetime(2026, 10, 16, 12, tzinfo=timezone.utc)).run_id
    if step == "takeover":  # a crashed attempt's claim, its lease long expired
        dead = {"status": "in_progress", "attempt_id": "d" * 32, "lease_seconds": 0.001, "job_name": "late",
                "attempts": 1}
        firestore.Client(project=harness.emulator.project).collection(COLLECTION).document(run_id).set(dead)
    env = {"FIRESTORE_EMULATOR_HOST": proxy.host, "DEDUP_STORE_TIMEOUT_SECONDS": "1", "DEDUP_LEASE_SECONDS": "300"}
    first_server, second_server = harness.server(**env), harness.server(**env)
    landing = landed(proxy, step)
    proxy.add(Fault(step=step, kind="delay", delay_seconds=5.0, count=1000))
    first = deliver(first_server.url, scheduler_headers("late", T))
    body = assert_json_contract(first)
    if step == "claim":
        assert first.status_code == 500 and body["status"] == "store_error" and body["executed"] is False, first.text
        assert "the next delivery runs the job at once" in str(body["error"])
    else:  # every takeover try was held: the run stays with the (dead) holder as far as this delivery knows
        assert first.status_code in (409, 500) and body["status"] in ("in_progress", "store_error"), first.text
    assert harness.starts() == []
    assert landing.wait(30)
    time.sleep(1.0)  # the other held calls of the first delivery land (or fail their precondition) too
    proxy.clear()
    phantom = harness.records()[run_id]
    assert phantom["status"] == "in_progress" and phantom["attempt_id"] != "d" * 32  # a claim nobody runs
    second = deliver(second_server.url, scheduler_headers("late", T))
    assert second.status_code == 200 and assert_json_contract(second)["status"] == "processed", second.text
    assert len(harness.starts()) == 1
    record = harness.records()[run_id]
    assert record["status"] == "completed"
    if step == "claim":
        assert record["attempts"] == 1 and "previous_attempt_id" not in record
    else:
        assert record["attempts"] == 2 and record["previous_attempt_id"] == "d" * 32  # the crashed one, still
    assert deliver(first_server.url, scheduler_headers("late", T)).json()["status"] == "duplicate"
    assert len(harness.starts()) == 1


def test_a_claim_applied_whose_answers_are_all_lost_runs_the_job_at_once(harness: Harness, proxy: FaultProxy) -> None:
    """The create is applied and its answer lost, and the client's retries fail until the store timeout runs out:
    the read that follows finds this attempt's own claim, so the delivery runs the job (no phantom claim)."""
    server = harness.server(FIRESTORE_EMULATOR_HOST=proxy.host, DEDUP_STORE_TIMEOUT_SECONDS="1")
    proxy.add(Fault(step="claim", kind="lose_answer"))
    proxy.add(Fault(step="claim", kind="unavailable", count=1000))
    answer = deliver(server.url, scheduler_headers("exhausted", T))
    assert injected(proxy, "claim") >= 2
    assert answer.status_code == 200 and assert_json_contract(answer)["status"] == "processed", answer.text
    assert len(harness.starts()) == 1
    (record,) = harness.records().values()
    assert record["status"] == "completed" and record["attempts"] == 1
