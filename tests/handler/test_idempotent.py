"""The public ``idempotent`` decorator, in-process on the real emulator, with real threads."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from google.cloud import firestore

from scheduler_dedup.handler import (
    FirestoreRunStore,
    Idempotency,
    NonRetryableJobError,
    RunFailedError,
    RunInProgressError,
    idempotent,
    run_id_for_key,
)
from scheduler_dedup.local.emulator import FirestoreEmulator


@pytest.fixture()
def machinery(emulator: FirestoreEmulator) -> Idempotency:
    return Idempotency(FirestoreRunStore(firestore.Client(project=emulator.project), "payments"), lease_seconds=30)


def test_runs_once_and_replays_the_stored_result(machinery: Idempotency) -> None:
    calls: list[str] = []

    @idempotent(key=lambda order: order["id"], idempotency=machinery)
    def charge(order: dict[str, Any]) -> dict[str, Any]:
        calls.append(order["id"])
        return {"charged": order["amount"]}

    assert charge({"id": "o-1", "amount": 5}) == {"charged": 5}
    assert charge({"id": "o-1", "amount": 999}) == {"charged": 5}
    assert charge({"id": "o-2", "amount": 7}) == {"charged": 7}
    assert calls == ["o-1", "o-2"]
    record = machinery.store.get(run_id_for_key("o-1"))
    assert record is not None and record.status == "completed" and record.data["key"] == "o-1"


def test_a_retryable_exception_releases_the_key_and_re_raises(machinery: Idempotency) -> None:
    attempts: list[int] = []

    @idempotent(key=lambda n: f"job-{n}", idempotency=machinery)
    def flaky(n: int) -> int:
        attempts.append(n)
        if len(attempts) == 1:
            raise ConnectionError("downstream reset")
        return n * 2

    with pytest.raises(ConnectionError):
        flaky(3)
    assert machinery.store.get(run_id_for_key("job-3")) is None
    assert flaky(3) == 6
    assert attempts == [3, 3]


def test_a_non_retryable_error_is_recorded_and_never_retried(machinery: Idempotency) -> None:
    calls: list[int] = []

    @idempotent(key=lambda: "refund-1", idempotency=machinery)
    def refund() -> None:
        calls.append(1)
        raise NonRetryableJobError("card closed")

    with pytest.raises(RunFailedError, match="card closed"):
        refund()
    with pytest.raises(RunFailedError, match="card closed"):
        refund()
    assert calls == [1]


def test_concurrent_calls_with_one_key_run_once(machinery: Idempotency) -> None:
    calls: list[int] = []
    barrier = threading.Barrier(20)
    release = threading.Event()

    @idempotent(key=lambda i: "shared", idempotency=machinery)
    def work(i: int) -> int:
        calls.append(i)
        release.wait(10)
        return i

    def call(i: int) -> str:
        barrier.wait()
        try:
            work(i)
            return "ok"
        except RunInProgressError as exc:
            assert exc.retry_after_seconds > 0
            return "in_progress"

    with ThreadPoolExecutor(20) as pool:
        futures = [pool.submit(call, i) for i in range(20)]
        threading.Timer(2.0, release.set).start()
        results = Counter(f.result() for f in futures)
    assert len(calls) == 1
    assert results == Counter({"ok": 1, "in_progress": 19})


def test_a_run_id_passed_downstream_is_used_as_is(machinery: Idempotency) -> None:
    token = "ab" * 32
    assert run_id_for_key(token) == token
    assert run_id_for_key("order-1") != run_id_for_key("order-2")
    assert len(run_id_for_key("order-1")) == 64


def test_an_empty_key_is_refused_before_anything_is_written(machinery: Idempotency) -> None:
    @idempotent(key=lambda: "", idempotency=machinery)
    def nothing() -> None:
        raise AssertionError("must not run")

    with pytest.raises(ValueError, match="non-empty string"):
        nothing()
