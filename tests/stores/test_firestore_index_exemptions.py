"""Firestore's write rate: every field a run record holds that only grows (a timestamp) and that no query reads alone
is exempt from single-field indexing, and the component creates exactly those exemptions.

Firestore keeps a single-field index on every field by default; an index on a value that only grows makes every
write land at the end of one key range, which caps the collection at about 500 writes/s ("high read, write, and
delete rates to a narrow document range", "monotonically increasing indexed fields":
https://cloud.google.com/firestore/docs/best-practices; the Firestore team on googleapis/google-cloud-dotnet#1618).
The fields are read from real writes on the emulator, the queries from the ones the store really sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from google.cloud import firestore
from google.cloud.firestore_v1 import base_query

from scheduler_dedup.handler import FirestoreRunStore
from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.protocol.overlap_lease import OverlapGuard
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.handler.service.delivery import _record_fields
from scheduler_dedup.handler.stores.firestore.schema import RUN_HISTORY_INDEXES, UNINDEXED_FIELDS
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator

COLLECTION = "scheduler_runs"


@pytest.fixture()
def queries(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The fields each query the client sends filters or orders on (from the StructuredQuery it builds)."""
    sent: list[set[str]] = []
    build = base_query.BaseQuery._to_protobuf

    def recording(self: Any) -> Any:
        query = build(self)
        fields: set[str] = {order.field.field_path for order in query.order_by}
        pending = [query.where] if query._pb.HasField("where") else []
        while pending:
            where = pending.pop()
            if where._pb.HasField("composite_filter"):
                pending.extend(where.composite_filter.filters)
            elif where._pb.HasField("field_filter"):
                fields.add(where.field_filter.field.field_path)
            elif where._pb.HasField("unary_filter"):
                fields.add(where.unary_filter.field.field_path)
        sent.append(fields - {"__name__"})
        return query

    monkeypatch.setattr(base_query.BaseQuery, "_to_protobuf", recording)
    return sent


@pytest.fixture()
def store(emulator: FirestoreEmulator) -> Iterator[FirestoreRunStore]:
    client = firestore.Client(project=emulator.project)
    yield FirestoreRunStore(client, COLLECTION)


def _deliver(store: FirestoreRunStore, job: str, when: datetime, outcome: str) -> None:
    key = RunKey(project="p1", location="europe-west1", job_name=job, schedule_time=when)
    settings = Settings(project="p1", collection=COLLECTION, schedule="0 * * * *", time_zone="Etc/UTC",
                        schedule_since=when - timedelta(days=1))
    guard = OverlapGuard(store, "skip", lease_seconds=30)

    def work(attempt_id: str) -> Any:
        def job_body() -> Any:
            if outcome == "released":
                raise ConnectionError("downstream reset")
            return {"done": True}
        return guard.run(project=key.project, location=key.location, job_name=job, run_id=key.run_id,
                         schedule_time=key.schedule_time_rfc3339, attempt_id=attempt_id, work=job_body)

    Idempotency(store, lease_seconds=30).execute(key.run_id, work, _record_fields(key, settings))


def _growing_fields(emulator: FirestoreEmulator) -> dict[str, set[str]]:
    """Field -> ids of the documents where it holds a timestamp (a value that only grows from write to write)."""
    found: dict[str, set[str]] = {}
    for doc in firestore.Client(project=emulator.project).collection(COLLECTION).stream():
        for field, value in (doc.to_dict() or {}).items():
            if isinstance(value, datetime):
                found.setdefault(field, set()).add(doc.id)
    return found


def test_every_growing_field_is_exempt_or_queried_and_no_exempt_field_is_queried_alone(
        emulator: FirestoreEmulator, store: FirestoreRunStore, queries: list[set[str]]) -> None:
    start = datetime(2026, 12, 7, 12, tzinfo=timezone.utc)
    for n, outcome in enumerate(("completed", "released", "completed")):
        _deliver(store, "nightly", start + timedelta(hours=n), outcome)
    pages = list(store.job_run_pages("nightly", since=start, until=start + timedelta(days=1), page_size=2))
    assert sum(len(p) for p in pages) == 3
    store.runs_with_id_prefix("0", 10)

    growing = _growing_fields(emulator)
    assert {"claimed_at", "heartbeat_at", "lease_expires", "finished_at", "expire_at"} <= set(growing), growing
    alone = {next(iter(fields)) for fields in queries if len(fields) == 1}
    composite = {frozenset(fields) for fields in queries if len(fields) > 1}
    assert composite == {frozenset(field for field, _ in index) for index in RUN_HISTORY_INDEXES}
    unserved = sorted(set(growing) - set(UNINDEXED_FIELDS) - alone)
    assert unserved == [], (f"fields that only grow, neither exempt from single-field indexing "
                            f"(UNINDEXED_FIELDS) nor read alone by a query: {unserved}")
    assert sorted(set(UNINDEXED_FIELDS) & alone) == [], "an exempt field is read alone by a query"
