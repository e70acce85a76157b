"""A write the store refused is never taken as done: renewals and completions refused on the wire, on every store.

The proxy answers the store's own refusal without forwarding (nothing is written): Redis' ``OOM`` of a full instance
with ``noeviction``, Google's ``PERMISSION_DENIED`` (a grant revoked mid-run) on Firestore and Spanner. The truth is
read from the server directly.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from scheduler_dedup.handler.core.errors import StoreError
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.protocol.lease import current_lease
from scheduler_dedup.handler.stores.base import RunStore
from scheduler_dedup.local.faults.grpc_proxy import Fault
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION


@pytest.fixture()
def proxy(server: StoreServer) -> Iterator[Any]:
    p = server.fault_proxy()
    yield p
    p.stop()


def _refusal(server: StoreServer, step: str, count: int = 100_000) -> Fault:
    """The store's refusal of every call of ``step`` (from the first), sent nowhere."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED if server.kind == "redis" else grpc.StatusCode.PERMISSION_DENIED
    return Fault(step=step, kind="refuse", code=code, count=count)


def _tries(proxy: Any, step: str) -> int:
    return sum(1 for s, _ in proxy.calls if s == step)


def test_a_refused_renewal_is_no_renewal(server: StoreServer, store: RunStore, proxy: Any) -> None:
    """Every renewal refused: the lease lapses under the live attempt, the job is told so (and stops before its side
    effect), renewals are tried again promptly, and a retry elsewhere takes the run over and runs it once."""
    lease = 2.0
    idem = Idempotency(server.connect(COLLECTION, timeout_seconds=1.0, host=proxy.host), lease_seconds=lease)
    proxy.add(_refusal(server, "renewal"))
    run_id = uuid.uuid4().hex
    effects: list[str] = []
    seen: dict[str, Any] = {}

    def careful_job(attempt_id: str) -> str:
        keeper = current_lease.get()
        assert keeper is not None
        started = time.monotonic()
        while keeper.holds():  # a long job's steps, each checking its lease first
            assert time.monotonic() - started < 30, proxy.calls
            time.sleep(0.05)
        seen["lapsed_after"] = time.monotonic() - started
        seen["renewal_tries"] = _tries(proxy, "renewal")
        record = store.get(run_id)
        assert record is not None and record.held_by(attempt_id) and record.lease_remaining_seconds <= 0.5
        # Another instance's retry now takes the run over and runs it; this attempt does no side effect.
        other = Idempotency(store, lease_seconds=30).execute(run_id, lambda a: effects.append(a) or "ran")
        seen["other"] = other
        raise RuntimeError("lease lapsed: stopping before the side effect")

    result = idem.execute(run_id, careful_job, {"job_name": "refused-renewals"})
    assert seen["other"].outcome is Outcome.PROCESSED and seen["other"].took_over, seen
    assert len(effects) == 1
    assert result.outcome is Outcome.FENCED, result  # its release is fenced: the retry holds the run
    # The lease lasts `lease` from the claim; renewals were tried every lease/12 once the first was refused.
    assert seen["lapsed_after"] < lease + 1.0, seen
    assert seen["renewal_tries"] >= 5, seen
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.attempt_id == seen["other"].attempt_id


def test_a_renewal_whose_answer_is_lost_still_counts(server: StoreServer, store: RunStore, proxy: Any) -> None:
    """The other side of the rule: a renewal that committed is read back with a later expiry and counts."""
    idem = Idempotency(server.connect(COLLECTION, timeout_seconds=1.0, host=proxy.host), lease_seconds=3.6)
    proxy.add(Fault(step="renewal", kind="lose_answer", count=2))
    run_id = uuid.uuid4().hex
    held: list[bool] = []

    def job(attempt_id: str) -> str:
        keeper = current_lease.get()
        assert keeper is not None
        deadline = time.monotonic() + 30
        while _tries(proxy, "renewal") < 5:
            assert time.monotonic() < deadline, proxy.calls
            held.append(keeper.holds())
            time.sleep(0.05)
        return "done"

    result = idem.execute(run_id, job, {"job_name": "lost-renewal-answers"})
    assert result.outcome is Outcome.PROCESSED, result
    assert sum(1 for i in proxy.injected if i["step"] == "renewal") == 2
    assert held and all(held)


@pytest.mark.parametrize("refusals", [1, 4])
def test_a_refused_completion_is_tried_again_within_the_lease(server: StoreServer, store: RunStore, proxy: Any,
                                                              refusals: int) -> None:
    """A completion refused (nothing written) is never done and never given up while the lease holds: it is tried
    again until it commits, so the run is not left to lapse into a second execution."""
    idem = Idempotency(server.connect(COLLECTION, timeout_seconds=2.0, host=proxy.host), lease_seconds=20)
    proxy.add(_refusal(server, "completion", count=refusals))
    runs: list[str] = []
    run_id = uuid.uuid4().hex
    result = idem.execute(run_id, lambda a: runs.append(a) or {"ok": True}, {"job_name": "refused-completion"})
    assert result.outcome is Outcome.PROCESSED, result
    assert sum(1 for i in proxy.injected if i["step"] == "completion") == refusals
    record = store.get(run_id)
    assert record is not None and record.status == "completed" and record.attempt_id == runs[0]
    again = Idempotency(store, lease_seconds=20).execute(run_id, lambda a: runs.append(a) or "twice")
    assert again.outcome is Outcome.DUPLICATE and len(runs) == 1


def test_a_completion_refused_for_good_is_a_store_error_not_a_completion(server: StoreServer, store: RunStore,
                                                                        proxy: Any) -> None:
    """Refused past the lease: ``store_error`` with ``executed``, the record still this attempt's claim."""
    idem = Idempotency(server.connect(COLLECTION, timeout_seconds=1.0, host=proxy.host), lease_seconds=1.5)
    proxy.add(_refusal(server, "completion"))
    proxy.add(_refusal(server, "renewal"))
    run_id = uuid.uuid4().hex
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        idem.execute(run_id, lambda a: "ran", {"job_name": "refused-for-good"})
    assert caught.value.step == "complete" and caught.value.executed
    assert time.monotonic() - started < 10
    assert sum(1 for i in proxy.injected if i["step"] == "completion") >= 3
    record = store.get(run_id)
    assert record is not None and record.status == "in_progress" and record.attempt_id == caught.value.attempt_id
