"""What only the Spanner store promises, on the real emulator: its RPC floor counted on the wire, its schema (written
once, applied alike by ``store init`` and the emulator's set-up, migrated where an older table lacks something),
refusals before anything is sent, and the contract's races again on an emulator that aborts a running transaction
whenever another begins.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import InvalidWriteError, StoreRefusedError
from scheduler_dedup.handler.protocol.catch_up import CATCH_UP_LEFT_FIELD
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.handler.service.delivery import _record_fields
from scheduler_dedup.handler.stores.spanner import schema as spanner_schema
from scheduler_dedup.handler.stores.base import SERVER_TIME, RunStore
from scheduler_dedup.handler.stores.spanner.admin import init_table
from scheduler_dedup.handler.stores.spanner.config import SpannerConfig
from scheduler_dedup.local.servers.spanner_emulator import SpannerEmulator

# The contract's races, collected again in this module, where ``store`` is a client of the aborting emulator.
from .test_contract_writes import (  # noqa: F401
    test_a_fenced_write_has_exactly_one_winner_among_20_concurrent_takers as test_aborting_takeover_race,
    test_put_if_absent_has_exactly_one_winner_among_20_concurrent_creators as test_aborting_claim_race,
)

pytestmark = pytest.mark.server  # tests/costs.py

TABLE = "spanner_runs"


@pytest.fixture(scope="module")
def emulator() -> Iterator[SpannerEmulator]:
    """A Spanner emulator of this module's own, aborting the running read-write transaction every time another
    begins (``--abort_current_transaction_probability=100``; its default is 20): every conflict is an abort."""
    with SpannerEmulator(abort_probability=100) as server:
        server.prepare(TABLE)
        yield server


@pytest.fixture()
def server(emulator: SpannerEmulator) -> SpannerEmulator:
    emulator.wipe()
    return emulator


@pytest.fixture()
def store(server: SpannerEmulator) -> Iterator[RunStore]:
    client = server.connect(TABLE, timeout_seconds=20.0)
    yield client
    client.close()


@pytest.fixture()
def proxy(server: SpannerEmulator) -> Iterator[Any]:
    p = server.fault_proxy()
    yield p
    p.stop()


def _calls(proxy: Any) -> list[tuple[str, str]]:
    return list(proxy.calls)


def test_the_rpc_floor_per_first_delivery_and_per_duplicate(server: SpannerEmulator, proxy: Any) -> None:
    """A first delivery: 3 RPCs (claim Commit; completion: the read that begins its transaction, Commit). A duplicate
    on another instance: 2 (the claim's ALREADY_EXISTS, a strong read); on the instance that ran it: 0."""
    ran = server.connect(TABLE, host=proxy.host)
    other = server.connect(TABLE, host=proxy.host)
    for client in (ran, other):  # sessions are created once per process, not per delivery
        assert client.get(uuid.uuid4().hex) is None
    first, duplicate = Idempotency(ran, lease_seconds=30), Idempotency(other, lease_seconds=30)
    run_id = uuid.uuid4().hex
    proxy.clear()
    assert first.execute(run_id, lambda a: {"ok": 1}, {"job_name": "floor"}).outcome is Outcome.PROCESSED
    assert _calls(proxy) == [("claim", "Commit"), ("other", "StreamingRead"), ("completion", "Commit")]
    proxy.clear()
    assert duplicate.execute(run_id, lambda a: None).outcome is Outcome.DUPLICATE
    assert _calls(proxy) == [("claim", "Commit"), ("read", "StreamingRead")]
    proxy.clear()
    assert first.execute(run_id, lambda a: None).outcome is Outcome.DUPLICATE
    assert _calls(proxy) == []
    ran.close()
    other.close()


def test_a_renewal_costs_two_rpcs_and_a_lost_race_one_more(server: SpannerEmulator, proxy: Any) -> None:
    """A fenced write is a read that begins the transaction and a Commit; when the version moved on, a Rollback
    releases the read's lock at once instead of the Commit."""
    client = server.connect(TABLE, host=proxy.host)
    run_id = uuid.uuid4().hex
    version = client.create(run_id, {"status": "in_progress", "attempt_id": "a" * 32, "heartbeat_at": SERVER_TIME})
    assert version is not None
    proxy.clear()
    assert client.update_if_unchanged(run_id, {"heartbeat_at": SERVER_TIME}, version) is not None
    assert _calls(proxy) == [("other", "StreamingRead"), ("renewal", "Commit")]
    proxy.clear()
    assert client.update_if_unchanged(run_id, {"heartbeat_at": SERVER_TIME}, version) is None
    assert _calls(proxy) == [("other", "StreamingRead"), ("other", "Rollback")]
    client.close()


def test_a_field_without_a_column_or_of_the_wrong_type_is_refused_before_sending(server: SpannerEmulator,
                                                                                 proxy: Any) -> None:
    client = server.connect(TABLE, host=proxy.host)
    assert client.get("warm") is None
    proxy.clear()
    for fields in ({"status": "in_progress", "colour": "red"}, {"attempts": "3"}, {"manual": 1},
                   {"schedule_time": datetime(2026, 1, 1)}, {"expire_at": SERVER_TIME}, {"result": 2**64}):
        with pytest.raises(InvalidWriteError) as caught:
            client.create(uuid.uuid4().hex, fields)
        assert caught.value.sent is False, fields
    assert _calls(proxy) == []
    client.close()


def test_every_field_the_handler_writes_has_a_column() -> None:
    """The table is typed: a record field the protocol or the Scheduler handler starts writing needs a column here
    (and ``store init`` adds it to older tables), or every claim on Spanner would be refused."""
    settings = Settings(project="p", store="spanner", store_config=SpannerConfig(instance="i1", database="d1"))
    key = RunKey(project="p", location="us-central1", job_name="j",
                 schedule_time=datetime(2026, 11, 30, 2, 30, tzinfo=timezone.utc), wall_clock="x")
    idem = Idempotency(_NoStore())  # type: ignore[arg-type]
    written = {**idem._in_progress_fields("a" * 32, _record_fields(key, settings)),
               **idem._finish_fields("completed", {"error": None}),
               **idem._finish_fields("released", {"error": "E", "output": "O", "releases": 1}),
               "previous_attempt_id": "b", "result": None, "result_dropped": None, CATCH_UP_LEFT_FIELD: None}
    missing = sorted(set(written) - set(spanner_schema.COLUMNS_BY_NAME))
    assert not missing, f"add columns for {missing} to spanner_schema.COLUMNS"


class _NoStore:
    """Just enough of a store for building the protocol's field sets (no call is made)."""

    timeout_seconds = 20.0
    display_name = "none"

    def server_now(self) -> datetime:
        return datetime.now(timezone.utc)


def test_store_init_adds_what_an_older_table_lacks_and_then_nothing(server: SpannerEmulator) -> None:
    """A table made before a record field, the row deletion policy and the index existed: ``store init`` adds each,
    and a second run sends no statement."""
    table = f"old_{uuid.uuid4().hex[:8]}"
    old = spanner_schema.create_table_ddl(table).replace(",\n  " + spanner_schema.row_deletion_policy(), "")
    old = old.replace("  schedule_since TIMESTAMP,\n", "")
    client = server._admin()
    database = client.instance(server.instance).database(server.database)  # type: ignore[attr-defined]
    database.update_ddl([old]).result(120)
    lines: list[str] = []
    sent = init_table(server.project, server.instance, server.database, table, say=lines.append, client=client,
                      emulator=True)
    added = [spanner_schema.add_column_ddl(table, column.name) for column in spanner_schema.ADDED_COLUMNS]
    assert sent == [spanner_schema.add_column_ddl(table, "schedule_since"), *added,
                    f"ALTER TABLE {table} ADD {spanner_schema.row_deletion_policy()}",
                    spanner_schema.create_index_ddl(table)], sent
    assert len(lines) == len(sent)
    again: list[str] = []
    assert init_table(server.project, server.instance, server.database, table, say=again.append, client=client,
                      emulator=True) == []
    assert "nothing to do" in again[0]
    with database.snapshot() as snap:
        policy = list(snap.execute_sql("SELECT ROW_DELETION_POLICY_EXPRESSION FROM INFORMATION_SCHEMA.TABLES "
                                       f"WHERE TABLE_NAME = '{table}'"))
    assert policy and "OLDER_THAN" in policy[0][0] and "expire_at" in policy[0][0] and "INTERVAL 0 DAY" in policy[0][0]


def test_a_database_made_before_a_column_was_added_gets_it_from_the_appended_statements(
        server: SpannerEmulator) -> None:
    """The component's ``ddls`` only grow at the end (the provider replaces a database whose earlier statements
    change): the statements of a table made before :data:`spanner_schema.ADDED_COLUMNS` existed are the current
    list's first ones, and the statements after them alone bring the table to every column, which a record of an
    ``idempotent`` key then fills."""
    table = f"older_{uuid.uuid4().hex[:8]}"
    statements = spanner_schema.ddl_statements(table)
    before = len(statements) - len(spanner_schema.ADDED_COLUMNS)
    assert all(column.name not in statements[0] for column in spanner_schema.ADDED_COLUMNS)
    client = server._admin()
    database = client.instance(server.instance).database(server.database)  # type: ignore[attr-defined]
    database.update_ddl(statements[:before]).result(120)
    database.update_ddl(statements[before:]).result(120)
    store = server.connect(table)
    try:
        fields = {"status": "in_progress", "attempt_id": "a" * 32, "key": "k", "scope": "s", "function": "f",
                  "payload_fingerprint": "0" * 64}
        assert store.create("r" * 64, fields) is not None
        record = store.get("r" * 64)
        assert record is not None and {k: record.data[k] for k in fields} == fields
    finally:
        store.close()


def test_the_emulators_table_is_the_schema_ddl(server: SpannerEmulator) -> None:
    """The emulator's set-up applied :func:`spanner_schema.ddl_statements`: the database's DDL holds them."""
    client = server._admin()
    database = client.instance(server.instance).database(server.database)  # type: ignore[attr-defined]
    database.reload()
    statements = " ".join(database.ddl_statements)
    for column in spanner_schema.COLUMNS:
        assert column.name in statements
    assert spanner_schema.index_name(TABLE) in statements
    assert "ROW DELETION POLICY" in statements.upper()
    policies = spanner_schema.deletion_policies(list(database.ddl_statements))
    assert policies[TABLE.lower()] == spanner_schema.DeletionPolicy("expire_at", 0)


def test_a_result_of_several_megabytes_passes_the_fault_proxy(server: SpannerEmulator, proxy: Any) -> None:
    """Spanner takes 10 MB of JSON: the proxy forwards messages beyond gRPC's 4 MiB default both ways."""
    client = server.connect(TABLE, host=proxy.host)
    run_id = uuid.uuid4().hex
    version = client.create(run_id, {"status": "in_progress", "attempt_id": "a" * 32})
    assert version is not None
    big = "x" * 6_000_000
    assert client.update_if_unchanged(run_id, {"status": "completed", "result": big}, version) is not None
    record = client.get(run_id)
    assert record is not None and record.result == big
    client.close()


_GOOD = "update_time TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp=true)"


@pytest.mark.parametrize(("change", "named"), [
    # every claim refused: the version column cannot take the commit timestamp
    ((_GOOD, "update_time TIMESTAMP NOT NULL"), "update_time"),
    # every claim refused: a column the store never writes, NOT NULL without a default
    (("  status STRING(MAX),", "  status STRING(MAX),\n  owner STRING(MAX) NOT NULL,"), "owner"),
    # every claim refused: run ids are 64 characters
    (("run_id STRING(64)", "run_id STRING(36)"), "run_id"),
    # a duplicate would replay the result as a string; a long error could never be recorded
    (("result JSON", "result STRING(MAX)"), "result"),
    (("error STRING(MAX)", "error STRING(100)"), "error"),
    # the claim writes NULL here
    (("finished_at TIMESTAMP OPTIONS", "finished_at TIMESTAMP NOT NULL OPTIONS"), "finished_at"),
    # records deleted a day after their claim, whatever DEDUP_RETENTION_SECONDS says
    (("OLDER_THAN(expire_at, INTERVAL 0 DAY)", "OLDER_THAN(create_time, INTERVAL 1 DAY)"), "create_time"),
])
def test_store_init_refuses_a_table_that_cannot_hold_run_records(server: SpannerEmulator, change: tuple[str, str],
                                                                  named: str) -> None:
    """An existing table whose columns or row deletion policy differ from the schema: ``store init`` names what
    differs and sends nothing, instead of saying the table is in place while every claim is refused (or a result
    replays changed, or records are deleted before the job's retries end)."""
    table = f"odd_{uuid.uuid4().hex[:8]}"
    ddl = spanner_schema.create_table_ddl(table)
    assert change[0] in ddl
    client = server._admin()
    database = client.instance(server.instance).database(server.database)  # type: ignore[attr-defined]
    database.update_ddl([ddl.replace(*change)]).result(120)
    lines: list[str] = []
    with pytest.raises(StoreRefusedError) as caught:
        init_table(server.project, server.instance, server.database, table, say=lines.append, client=client,
                   emulator=True)
    assert named in str(caught.value) and table in str(caught.value), caught.value
    database.reload()
    assert not any(spanner_schema.index_name(table) in s for s in database.ddl_statements), "sent DDL anyway"


def test_store_init_accepts_what_only_adds_to_the_schema(server: SpannerEmulator) -> None:
    """Columns of the user's own that every write can leave out (nullable, defaulted, generated), a longer
    retention interval and upper-case names change nothing the store relies on."""
    table = f"Wide_{uuid.uuid4().hex[:8]}"
    ddl = spanner_schema.create_table_ddl(table).replace("  status STRING(MAX),", (
        "  Status STRING(MAX),\n  note STRING(MAX),\n  team STRING(MAX) NOT NULL DEFAULT ('ops'),\n"
        "  tries INT64 AS (attempts + 1) STORED,")).replace("INTERVAL 0 DAY", "INTERVAL 3 DAY")
    client = server._admin()
    database = client.instance(server.instance).database(server.database)  # type: ignore[attr-defined]
    database.update_ddl([ddl]).result(120)
    sent = init_table(server.project, server.instance, server.database, table.lower(), say=lambda _: None,
                      client=client, emulator=True)
    added = [spanner_schema.add_column_ddl(table, column.name) for column in spanner_schema.ADDED_COLUMNS]
    assert sent == [*added, spanner_schema.create_index_ddl(table)], sent  # the columns added since CREATE TABLE
    store = server.connect(table, timeout_seconds=10.0)
    run_id = uuid.uuid4().hex * 2
    assert store.create(run_id, {"status": "in_progress", "attempt_id": "a" * 32, "finished_at": None}) is not None
    store.close()


@pytest.mark.parametrize("when", [datetime(1, 1, 1, tzinfo=timezone.utc),
                                  datetime(999, 12, 31, 23, 59, 59, 5, tzinfo=timezone.utc),
                                  datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)])
def test_timestamps_of_every_year_spanner_holds_are_written_and_queried(store: RunStore, when: datetime) -> None:
    """Spanner's TIMESTAMP holds years 1 to 9999 as four-digit RFC 3339 years: a value before year 1000 (a record
    field, or ``runs --since 0999-01-01``) is sent as such, not refused as unparseable."""
    run_id = uuid.uuid4().hex
    assert store.create(run_id, {"status": "completed", "attempt_id": "a" * 32, "job_name": "old",
                                 "schedule_time": when}) is not None
    record = store.get(run_id)
    assert record is not None and record.data["schedule_time"] == when
    since = datetime(1, 1, 1, tzinfo=timezone.utc)
    assert [r.run_id for p in store.job_run_pages("old", since=since, until=None, page_size=5) for r in p] == [run_id]


def test_a_wipe_recovers_from_a_transaction_left_open_for_good() -> None:
    """A read-write transaction whose session was deleted can never end, and the emulator then aborts every other
    transaction on its database (cloud-spanner-emulator #30). The wipe moves to a fresh database with the same
    tables, and a client opened after it writes there."""
    from google.cloud.spanner_v1.keyset import KeySet

    with SpannerEmulator(abort_probability=0) as emulator:
        emulator.prepare(TABLE)
        admin: Any = emulator._admin()
        db = admin.instance(emulator.instance).database(emulator.database)
        session = db.session()
        session.create()
        orphan = session.transaction()
        orphan.begin()
        list(orphan.execute_sql(f"SELECT COUNT(*) FROM {TABLE}"))
        session.delete()
        stuck = emulator.database
        with pytest.raises(Exception, match="one transaction at a time"):
            with db.batch() as batch:
                batch.delete(TABLE, KeySet(all_=True))
        emulator.wipe(patience_seconds=1.0)
        assert emulator.database != stuck
        assert emulator.endpoint_env()["DEDUP_SPANNER_DATABASE"] == emulator.database
        client = emulator.connect(TABLE)
        try:
            run_id = uuid.uuid4().hex
            assert client.create(run_id, {"status": "in_progress", "attempt_id": "a" * 32, "lease_seconds": 30.0,
                                          "job_name": "r", "claimed_at": SERVER_TIME}) is not None
            assert client.get(run_id) is not None
        finally:
            client.close()
