"""The store contract's writes, on each store's real server: put-if-absent, fencing, clocks, server-side values.

Every test here runs once per store (``tests/stores/conftest.py``); a store passes only by passing all of them.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import pytest

from scheduler_dedup.handler.core.errors import StoreCallError, StoreUnavailableError
from scheduler_dedup.handler.stores.base import SERVER_TIME, Increment, RunStore
from scheduler_dedup.local.servers.store_servers import StoreServer, reserve_port

from .conftest import COLLECTION


def _claim_fields(attempt_id: str, **extra: Any) -> dict[str, Any]:
    return {"status": "in_progress", "attempt_id": attempt_id, "lease_seconds": 30.0, "job_name": "contract",
            "claimed_at": SERVER_TIME, "attempts": Increment(1), **extra}


def test_put_if_absent_has_exactly_one_winner_among_20_concurrent_creators(store: RunStore) -> None:
    run_id = uuid.uuid4().hex
    barrier = threading.Barrier(20)

    def create(n: int) -> datetime | None:
        barrier.wait()
        return store.create(run_id, _claim_fields(f"{n:032x}"))

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(create, range(20)))
    winners = [n for n, r in enumerate(results) if r is not None]
    assert len(winners) == 1, results
    record = store.get(run_id)
    assert record is not None and record.attempt_id == f"{winners[0]:032x}"
    assert record.update_time == results[winners[0]]


def test_a_fenced_write_has_exactly_one_winner_among_20_concurrent_takers(store: RunStore) -> None:
    run_id = uuid.uuid4().hex
    version = store.create(run_id, _claim_fields("a" * 32))
    assert version is not None
    barrier = threading.Barrier(20)

    def take(n: int) -> datetime | None:
        barrier.wait()
        return store.update_if_unchanged(run_id, {"attempt_id": f"{n:032x}", "previous_attempt_id": "a" * 32},
                                         version)

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(take, range(20)))
    winners = [n for n, r in enumerate(results) if r is not None]
    assert len(winners) == 1, results
    record = store.get(run_id)
    assert record is not None and record.attempt_id == f"{winners[0]:032x}"


def test_writes_are_fenced_on_the_version_and_a_refused_write_changes_nothing(store: RunStore) -> None:
    run_id = uuid.uuid4().hex
    v1 = store.create(run_id, _claim_fields("a" * 32))
    assert v1 is not None
    v2 = store.update_if_unchanged(run_id, {"heartbeat_at": SERVER_TIME}, v1)
    assert v2 is not None and v2 > v1
    # a stale version: refused, nothing written
    assert store.update_if_unchanged(run_id, {"attempt_id": "b" * 32}, v1) is None
    assert store.delete_if_unchanged(run_id, v1) is False
    record = store.get(run_id)
    assert record is not None and record.attempt_id == "a" * 32 and record.update_time == v2
    # the current version: accepted
    assert store.delete_if_unchanged(run_id, v2) is True
    assert store.get(run_id) is None
    # gone: both refused, nothing created
    assert store.update_if_unchanged(run_id, {"attempt_id": "c" * 32}, v2) is None
    assert store.delete_if_unchanged(run_id, v2) is False
    assert store.get(run_id) is None


def test_create_refuses_an_existing_record_and_keeps_it(store: RunStore) -> None:
    run_id = uuid.uuid4().hex
    v1 = store.create(run_id, _claim_fields("a" * 32))
    assert v1 is not None
    assert store.create(run_id, _claim_fields("b" * 32)) is None
    record = store.get(run_id)
    assert record is not None and record.attempt_id == "a" * 32 and record.update_time == v1


def test_every_time_is_the_stores_and_versions_only_grow(store: RunStore) -> None:
    run_id = uuid.uuid4().hex
    v1 = store.create(run_id, _claim_fields("a" * 32))
    assert v1 is not None and v1.tzinfo is not None
    first = store.get(run_id)
    assert first is not None
    assert first.read_time >= first.update_time == v1
    assert first.create_time == v1
    assert abs((first.data["claimed_at"] - v1).total_seconds()) < 1  # SERVER_TIME: the store's time of the write
    versions = [v1]
    for n in range(5):
        v = store.update_if_unchanged(run_id, {"heartbeat_at": SERVER_TIME, "attempts": n}, versions[-1])
        assert v is not None
        versions.append(v)
    assert versions == sorted(set(versions)), "each write's commit time is later than the one before"
    last = store.get(run_id)
    assert last is not None
    assert last.create_time == v1, "updates keep the record's creation time"
    assert last.data["claimed_at"] < last.data["heartbeat_at"]
    assert abs((last.data["heartbeat_at"] - versions[-1]).total_seconds()) < 1
    # deleted and created again: a new, later creation time
    assert store.delete_if_unchanged(run_id, versions[-1])
    v_new = store.create(run_id, _claim_fields("b" * 32))
    again = store.get(run_id)
    assert v_new is not None and again is not None and again.create_time == v_new > versions[-1]
    # server_now follows the store's clock, within a call's latency of the last answer
    assert abs((store.server_now() - again.read_time).total_seconds()) < 5


def test_a_lease_is_judged_by_the_stores_clock(store: RunStore) -> None:
    run_id = uuid.uuid4().hex
    assert store.create(run_id, {**_claim_fields("a" * 32), "lease_seconds": 1.0}) is not None
    record = store.get(run_id)
    assert record is not None and 0 < record.lease_remaining_seconds <= 1.0
    deadline = time.monotonic() + 30
    while record.lease_remaining_seconds > 0:
        assert time.monotonic() < deadline, "the lease never expired by the store's clock"
        time.sleep(0.2)
        record = store.get(run_id)
        assert record is not None
    assert (record.read_time - record.update_time).total_seconds() >= 1.0


def test_increment_adds_to_a_number_and_counts_an_absent_field_as_zero(store: RunStore) -> None:
    """On the record's own fields (a store with a schema holds only those: Spanner's columns)."""
    counted, fresh = uuid.uuid4().hex, uuid.uuid4().hex
    v = store.create(counted, {"status": "in_progress", "attempt_id": "a" * 32, "attempts": Increment(1)})
    assert v is not None
    v = store.update_if_unchanged(counted, {"attempts": Increment(1)}, v)
    assert v is not None
    w = store.create(fresh, {"status": "in_progress", "attempt_id": "b" * 32})
    assert w is not None
    w = store.update_if_unchanged(fresh, {"attempts": Increment(3)}, w)
    assert w is not None
    first, second = store.get(counted), store.get(fresh)
    assert first is not None and first.data["attempts"] == 2
    assert second is not None and second.data["attempts"] == 3


def test_record_fields_come_back_as_written(store: RunStore) -> None:
    """The fields the protocol and run history store: strings, numbers, booleans, None, aware UTC datetimes
    (the TTL field among them) and a JSON result."""
    run_id = uuid.uuid4().hex
    expire = datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=timezone.utc)
    fields = {"status": "in_progress", "attempt_id": "a" * 32, "lease_seconds": 300.0, "job_name": "nightly",
              "schedule_time": datetime(2026, 11, 30, 2, 30, tzinfo=timezone.utc), "manual": False,
              "project": "p", "location": "", "schedule": "30 2 * * *", "time_zone": "Europe/Berlin",
              "expire_at": expire, "finished_at": None, "error": None,
              "result": {"rows": [1, 2.5, "x", None, True], "nested": {"k": "v"}}}
    v = store.create(run_id, fields)
    assert v is not None
    v = store.update_if_unchanged(run_id, {"status": "completed", "result": {"n": 1}, "error": None}, v)
    assert v is not None
    record = store.get(run_id)
    assert record is not None
    expected = {**fields, "status": "completed", "result": {"n": 1}}
    for key, value in expected.items():
        assert record.data.get(key) == value, key
        if isinstance(value, datetime):
            assert record.data[key].tzinfo is not None, key
    assert record.status == "completed" and record.attempt_id == "a" * 32 and record.lease_seconds == 300.0


def test_an_unreachable_store_raises_the_contracts_error_within_its_timeout(server: StoreServer) -> None:
    """A bound port that never listens: every call fails as ``StoreUnavailableError`` (may have committed), never
    as the client library's own exception type, and within the store timeout plus a margin."""
    with reserve_port() as sock:
        host = f"127.0.0.1:{sock.getsockname()[1]}"
        store = server.connect(COLLECTION, timeout_seconds=2.0, host=host)
        for call in (lambda: store.create(uuid.uuid4().hex, _claim_fields("a" * 32)),
                     lambda: store.get("x"),
                     lambda: store.update_if_unchanged("x", {"attempts": 1}, datetime.now(timezone.utc)),
                     lambda: store.delete_if_unchanged("x", datetime.now(timezone.utc)),
                     lambda: next(iter(store.job_run_pages("j", since=None, until=None, page_size=5)))):
            started = time.monotonic()
            with pytest.raises(StoreCallError) as caught:
                call()
            assert isinstance(caught.value, StoreUnavailableError), caught.value
            assert time.monotonic() - started < 2.0 + 10.0
        store.close()


def test_the_server_hands_out_its_own_store(store: RunStore, server: StoreServer) -> None:
    assert store.kind == server.kind
    assert store.collection == COLLECTION and store.timeout_seconds == 20.0
