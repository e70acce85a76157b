"""The store contract's run history queries, on each store's real server."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from scheduler_dedup.handler.monitoring.run_history import RunHistory
from scheduler_dedup.handler.stores.base import SERVER_TIME, RunStore

T0 = datetime(2026, 11, 30, 0, 0, tzinfo=timezone.utc)


def _put(store: RunStore, job: str, when: datetime, run_id: str | None = None, status: str = "completed") -> str:
    run_id = run_id or uuid.uuid4().hex
    assert store.create(run_id, {"status": status, "attempt_id": "a" * 32, "lease_seconds": 30.0, "job_name": job,
                                 "schedule_time": when, "claimed_at": SERVER_TIME, "attempts": 1}) is not None
    return run_id


def test_one_jobs_runs_newest_first_within_the_window_a_page_at_a_time(store: RunStore) -> None:
    times = [T0 + timedelta(minutes=15 * n) for n in range(11)]
    for t in times:
        _put(store, "nightly", t)
    _put(store, "other-job", times[3])
    _put(store, "nightly-2", times[4])  # a job whose name merely starts alike
    pages = list(store.job_run_pages("nightly", since=times[2], until=times[9], page_size=3))
    assert [len(p) for p in pages] == [3, 3, 1]
    got = [r.data["schedule_time"] for p in pages for r in p]
    assert got == sorted(times[2:9], reverse=True)  # since inclusive, until exclusive
    assert all(r.data["job_name"] == "nightly" for p in pages for r in p)
    everything = [r for p in store.job_run_pages("nightly", since=None, until=None, page_size=100) for r in p]
    assert len(everything) == 11
    assert list(store.job_run_pages("nobody", since=None, until=None, page_size=5)) == [[]]


def test_runs_at_one_schedule_time_are_ordered_by_run_id_descending(store: RunStore) -> None:
    ids = sorted(uuid.uuid4().hex for _ in range(5))
    for run_id in ids:
        _put(store, "ties", T0, run_id)
    pages = list(store.job_run_pages("ties", since=None, until=None, page_size=2))
    assert [r.run_id for p in pages for r in p] == list(reversed(ids))


def test_an_exact_page_multiple_ends_with_an_empty_page(store: RunStore) -> None:
    for n in range(4):
        _put(store, "even", T0 + timedelta(hours=n))
    assert [len(p) for p in store.job_run_pages("even", since=None, until=None, page_size=2)] == [2, 2, 0]


def test_records_without_a_schedule_time_are_not_runs(store: RunStore) -> None:
    run_id = uuid.uuid4().hex
    assert store.create(run_id, {"status": "completed", "attempt_id": "a" * 32, "job_name": "keyed"}) is not None
    _put(store, "keyed", T0)
    runs = [r for p in store.job_run_pages("keyed", since=None, until=None, page_size=10) for r in p]
    assert [r.data["schedule_time"] for r in runs] == [T0]


def test_a_run_by_its_id_prefix_reads_at_most_the_limit(store: RunStore) -> None:
    wanted = "abc" + uuid.uuid4().hex[3:]
    also = "abd" + uuid.uuid4().hex[3:]
    _put(store, "p", T0, wanted)
    _put(store, "p", T0 + timedelta(hours=1), also)
    for n in range(6):
        _put(store, "p", T0 + timedelta(hours=2 + n), "f" + uuid.uuid4().hex[1:])
    assert [r.run_id for r in store.runs_with_id_prefix("abc", 2)] == [wanted]
    assert [r.run_id for r in store.runs_with_id_prefix("ab", 5)] == [wanted, also]
    assert len(store.runs_with_id_prefix("f", 2)) == 2
    assert store.runs_with_id_prefix("0123", 2) == []
    assert [r.run_id for r in store.runs_with_id_prefix(wanted, 2)] == [wanted]


def test_run_history_reads_any_store_through_the_contract(store: RunStore) -> None:
    for n in range(7):
        _put(store, "hist", T0 + timedelta(minutes=15 * n), status="failed" if n == 3 else "completed")
    history = RunHistory(store, page_size=2)
    runs = list(history.runs("hist", since=T0, until=T0 + timedelta(hours=2)))
    assert [r.schedule_time for r in runs] == [T0 + timedelta(minutes=15 * n) for n in reversed(range(7))]
    assert [r.state for r in runs].count("failed") == 1
    latest = history.latest("hist")
    assert latest is not None and latest.schedule_time == T0 + timedelta(minutes=90)
    assert history.get(runs[0].run_id) == runs[0]
    assert history.with_id_prefix(runs[0].run_id[:12])[0].run_id == runs[0].run_id
