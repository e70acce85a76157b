"""The exactly-once protocol on each store with faults injected on the wire: lost answers at every step, calls
held past the store timeout, calls failed before they are sent.

The store is reached through the store's fault proxy (:meth:`StoreServer.fault_proxy`); the test reads the
truth from the server directly. Each test runs once per store.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_dedup.handler.core.errors import NonRetryableJobError, StoreError
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.stores.base import SERVER_TIME, Increment, RunStore
from scheduler_dedup.local.faults.grpc_proxy import Call, Fault
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION


@pytest.fixture()
def proxy(server: StoreServer) -> Iterator[Any]:
    p = server.fault_proxy()
    yield p
    p.stop()


def _via(server: StoreServer, proxy: Any, timeout: float = 10.0) -> RunStore:
    return server.connect(COLLECTION, timeout_seconds=timeout, host=proxy.host)


def _injected(proxy: Any, step: str, kind: str) -> int:
    return sum(1 for i in proxy.injected if i["step"] == step and i["kind"] == kind)


@pytest.mark.parametrize("kind", ["lose_answer", "unavailable"])
@pytest.mark.parametrize(("step", "work", "outcome", "status"), [
    ("claim", "ok", Outcome.PROCESSED, "completed"),
    ("completion", "ok", Outcome.PROCESSED, "completed"),
    ("failure", "permanent", Outcome.FAILED, "failed"),
    ("release", "retryable", Outcome.RELEASED, "released"),
])
def test_a_fault_at_one_step_still_decides_the_run_once(server: StoreServer, store: RunStore, proxy: Any, kind: str,
                                                        step: str, work: str, outcome: Outcome,
                                                        status: str) -> None:
    """Applied and its answer lost, or failed before it was sent: the attempt finds out by reading and decides
    by its attempt id. The job runs exactly once and the record says what happened."""
    idem = Idempotency(_via(server, proxy), lease_seconds=30)
    proxy.add(Fault(step=step, kind=kind))
    runs: list[str] = []

    def job(attempt_id: str) -> Any:
        runs.append(attempt_id)
        if work == "permanent":
            raise NonRetryableJobError("no")
        if work == "retryable":
            raise RuntimeError("again")
        return {"ok": True}

    run_id = uuid.uuid4().hex
    result = idem.execute(run_id, job, {"job_name": "faulted"})
    assert _injected(proxy, step, kind) == 1, proxy.injected
    assert result.outcome is outcome, result
    assert len(runs) == 1
    record = store.get(run_id)
    assert record is not None and record.status == status and record.attempt_id == runs[0]
    if status == "released":  # kept with its error, counted once; the next delivery runs the job at once
        assert record.error == "RuntimeError: again" and record.releases == 1, record
        again = Idempotency(store, lease_seconds=30).execute(run_id, lambda a: runs.append(a) or "ok")
        assert again.outcome is Outcome.PROCESSED and not again.took_over and len(runs) == 2, again
        return
    again = Idempotency(store, lease_seconds=30).execute(run_id, job)
    assert again.outcome is (Outcome.DUPLICATE if status == "completed" else Outcome.FAILED)
    assert len(runs) == 1


def test_a_lost_renewal_answer_keeps_the_lease(server: StoreServer, store: RunStore, proxy: Any) -> None:
    idem = Idempotency(_via(server, proxy, timeout=2.0), lease_seconds=1.5)
    proxy.add(Fault(step="renewal", kind="lose_answer"))
    run_id = uuid.uuid4().hex

    def job(attempt_id: str) -> str:
        deadline = time.monotonic() + 30
        while _injected(proxy, "renewal", "lose_answer") == 0 or \
                sum(1 for s, _ in proxy.calls if s == "renewal") < 3:  # renewed on after the lost answer
            assert time.monotonic() < deadline, proxy.calls
            time.sleep(0.05)
        record = store.get(run_id)
        assert record is not None and record.held_by(attempt_id) and record.lease_remaining_seconds > 0
        return "done"

    result = idem.execute(run_id, job, {"job_name": "renewed"})
    assert result.outcome is Outcome.PROCESSED, result
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.data["attempts"] == 1


@pytest.mark.parametrize("kind", ["lose_answer", "unavailable"])
def test_a_fault_on_a_takeover_takes_the_run_over_once(server: StoreServer, store: RunStore, proxy: Any,
                                                       kind: str) -> None:
    run_id = uuid.uuid4().hex
    # a crashed attempt's claim: never renewed, completed or released
    assert store.create(run_id, {"status": "in_progress", "attempt_id": "d" * 32, "lease_seconds": 1.0,
                                 "job_name": "crashed", "claimed_at": SERVER_TIME, "heartbeat_at": SERVER_TIME,
                                 "attempts": Increment(1)}) is not None
    deadline = time.monotonic() + 30
    while (record := store.get(run_id)) is not None and record.lease_remaining_seconds > 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    proxy.add(Fault(step="takeover", kind=kind))
    runs: list[str] = []
    result = Idempotency(_via(server, proxy), lease_seconds=30).execute(run_id, lambda a: runs.append(a) or "ok")
    assert _injected(proxy, "takeover", kind) == 1
    assert result.outcome is Outcome.PROCESSED and result.took_over, result
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.data["attempts"] == 2
    assert record.data["previous_attempt_id"] == "d" * 32 and len(runs) == 1


def test_a_claim_held_past_the_store_timeout_holds_nothing(server: StoreServer, store: RunStore, proxy: Any) -> None:
    """The claim reaches the store after its attempt answered ``store_error``: nobody runs the job under it, so
    the next attempt runs the job at once, without waiting for a lease and without counting a takeover."""
    landed = threading.Event()

    def watch(call: Call, kind: str | None, seconds: float) -> None:
        if call.step == "claim" and kind == "delay":
            landed.set()

    proxy.observe(watch)
    proxy.add(Fault(step="claim", kind="delay", delay_seconds=3.0, count=100))
    run_id = uuid.uuid4().hex
    with pytest.raises(StoreError) as caught:
        Idempotency(_via(server, proxy, timeout=1.0), lease_seconds=300).execute(run_id, lambda a: "never")
    assert caught.value.step == "claim" and caught.value.executed is False
    assert landed.wait(30)
    deadline = time.monotonic() + 30
    while (phantom := store.get(run_id)) is None:
        assert time.monotonic() < deadline, "the held claim never landed"
        time.sleep(0.1)
    assert phantom.status == "in_progress" and phantom.landed_late and phantom.lease_remaining_seconds <= 0
    runs: list[str] = []
    result = Idempotency(store, lease_seconds=300).execute(run_id, lambda a: runs.append(a) or "ok")
    assert result.outcome is Outcome.PROCESSED and not result.took_over and len(runs) == 1
    record = store.get(run_id)
    assert record is not None and record.data["attempts"] == 1 and "previous_attempt_id" not in record.data


def test_concurrent_deliveries_through_faults_run_the_job_once(server: StoreServer, store: RunStore,
                                                              proxy: Any) -> None:
    """20 concurrent executions of one run id on 4 stores, each call faulted with probability 0.3."""
    proxy.set_random(rate=0.3, seed=5, kinds=("unavailable", "lose_answer"))
    stores = [_via(server, proxy) for _ in range(4)]
    run_id = uuid.uuid4().hex
    runs: list[str] = []
    lock = threading.Lock()

    def job(attempt_id: str) -> str:
        with lock:
            runs.append(attempt_id)
        time.sleep(0.5)
        return "ok"

    barrier = threading.Barrier(20)
    outcomes: list[Any] = []

    def deliver(n: int) -> None:
        barrier.wait()
        try:
            outcomes.append(Idempotency(stores[n % 4], lease_seconds=30).execute(run_id, job).outcome)
        except StoreError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(runs) == 1, outcomes
    assert outcomes.count(Outcome.PROCESSED) == 1, outcomes
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.attempt_id == runs[0]
