"""The Cloud Spanner store: one row per run id, fenced on the commit timestamp, judged by Spanner's clock.

==============================  =====================================================================
contract                        Spanner
==============================  =====================================================================
put-if-absent                   an insert mutation in one Commit (single-use read-write transaction);
                                ``ALREADY_EXISTS`` means the record exists
read, with the store's clock    a single-use strong read-only StreamingRead of the row; ``read_time``
                                is the read's timestamp (``return_read_timestamp``), Spanner's clock
fenced update / delete          a read-write transaction: a StreamingRead of the row's version that
                                begins the transaction inline (exclusive lock hint), then one Commit
                                with an update or delete mutation, sent only if the version is still
                                the expected one (else a Rollback); the new version is the commit
                                timestamp, which strictly increases per row
server-side values              ``SERVER_TIME``: the commit timestamp (``spanner.commit_timestamp()``)
                                in an ``allow_commit_timestamp`` column; ``Increment``: the value read
                                in the same transaction plus the amount
run history                     GoogleSQL through the secondary index ``(job_name,
                                schedule_time DESC)`` of :mod:`.schema`, keyset pages
TTL                             ``ROW DELETION POLICY (OLDER_THAN(expire_at, INTERVAL 0 DAY))``:
                                deleted typically within 72 h after ``expire_at``
==============================  =====================================================================

**RPC floor** (counted on the wire by ``tests/stores/test_spanner_store.py`` and ``bench/dedup_bench.py``):
a first delivery costs 3 RPCs (the claim's Commit; the completion's read and Commit) plus 2 per lease renewal
(a third of the lease); a duplicate costs 2 on another instance (the claim's ``ALREADY_EXISTS``, then a strong
read) and 0 on the instance that ran it (its cache of finished runs). A conditional write cannot be one RPC on
Spanner: a Commit's mutations carry no condition, and DML needs a transaction begun by an earlier call (the
condition read here begins it inline, so no BeginTransaction is sent). Sessions: one multiplexed session per
process (one CreateSession, then shared by every call); a server that does not hand out multiplexed sessions
(the emulator) gets a pool of regular sessions, one per concurrent call, each created once.

**Errors.** Every call runs within the store timeout: an ``ABORTED`` transaction (Spanner aborts one that
conflicts with another; the emulator also aborts some on purpose) and transient errors (``UNAVAILABLE``,
``DEADLINE_EXCEEDED``, ``RESOURCE_EXHAUSTED``, ``INTERNAL``) are retried as a whole operation with a new
transaction, with jittered backoff, until the timeout; then :class:`StoreUnavailableError` (a Commit may have
applied). Retrying a whole operation is safe: a claim whose first Commit applied meets ``ALREADY_EXISTS``, a
fenced write meets a newer version, a delete a missing row, so nothing is applied twice. Refusals (permission,
no such database or table) are :class:`StoreRefusedError`; a value the table cannot hold is
:class:`InvalidWriteError`, refused before sending where the column types tell (:mod:`.values`).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, TypeVar

from google.api_core import exceptions as gexc
from google.api_core.datetime_helpers import DatetimeWithNanoseconds
from google.cloud.spanner_v1 import types as sp
from google.protobuf import struct_pb2

from scheduler_dedup.handler.core.errors import (InvalidWriteError, StoreConfigError, StoreRefusedError,
                                                 StoreUnavailableError)
from scheduler_dedup.handler.core.record import RunRecord
from scheduler_dedup.handler.stores.spanner import values as spanner_values
from scheduler_dedup.handler.stores.spanner.config import EMULATOR_VARIABLE
from scheduler_dedup.handler.stores.base import SERVER_TIME, Increment, RunStore
from scheduler_dedup.handler.stores.spanner.schema import (COLUMNS_BY_NAME, CREATE_TIME_COLUMN, KEY_COLUMN,
                                                           READ_COLUMNS, VERSION_COLUMN, index_name)

#: Emulator variable the Spanner client honours (``host:port``, no TLS, no credentials).
EMULATOR_ENV = EMULATOR_VARIABLE
#: The value a commit timestamp column is given to hold the write's commit timestamp.
COMMIT_TIMESTAMP = "spanner.commit_timestamp()"

#: Errors after which the operation is tried again with a new transaction (within the store timeout).
_RETRIED = (gexc.Aborted, gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.ResourceExhausted,
            gexc.InternalServerError, gexc.Unknown, gexc.Cancelled)
#: Errors that leave the call's outcome unknown (its transaction may still be open).
_AMBIGUOUS = (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.InternalServerError, gexc.Unknown, gexc.Cancelled)
#: Answers after which nothing was written: Spanner refused the call.
_REFUSED = (gexc.PermissionDenied, gexc.Unauthenticated, gexc.NotFound, gexc.MethodNotImplemented)
#: Answers that refuse a write's values or the statement (schema mismatch, bad value).
_INVALID = (gexc.InvalidArgument, gexc.FailedPrecondition, gexc.OutOfRange)

_T = TypeVar("_T")
_RW = sp.TransactionOptions(read_write=sp.TransactionOptions.ReadWrite())
_STRONG = sp.TransactionSelector(single_use=sp.TransactionOptions(
    read_only=sp.TransactionOptions.ReadOnly(strong=True, return_read_timestamp=True)))


class _SessionNotFound(Exception):
    """The session a call used is gone (deleted, or idle for over an hour): retried on a new one."""


def _session_gone(exc: BaseException) -> bool:
    return isinstance(exc, gexc.NotFound) and "session not found" in str(exc).lower()


class _Sessions:
    """The sessions of one store: one multiplexed session shared by every call, or, where the server hands out
    only regular sessions (the emulator), a pool with one session per concurrent call.

    A regular session runs one transaction at a time (a new one ends the one before), and a call whose answer
    was lost may leave its transaction open, so such a session is dropped rather than reused.
    """

    def __init__(self, api: Any, database: str, metadata: Sequence[tuple[str, str]]):
        self._api = api
        self._database = database
        self._metadata = list(metadata)
        self._lock = threading.Lock()
        self._multiplexed: str | None = None
        self._free: list[str] = []
        self._all: set[str] = set()

    def _create(self, deadline: float) -> Any:
        return self._api.create_session(
            request=sp.CreateSessionRequest(database=self._database, session=sp.Session(multiplexed=True)),
            metadata=self._metadata, timeout=_remaining(deadline), retry=None)

    @contextmanager
    def session(self, deadline: float) -> Iterator[str]:
        """A session for one call; a pooled one goes back to the pool unless the call's outcome is unknown.

        Raises:
            google.api_core exceptions: CreateSession failed.
        """
        with self._lock:
            name = self._multiplexed or (self._free.pop() if self._free else None)
        if name is None:
            created = self._create(deadline)
            with self._lock:
                if created.multiplexed:
                    if self._multiplexed is None:
                        self._multiplexed = created.name
                    name = self._multiplexed
                else:
                    name = created.name
                    self._all.add(name)
        assert name is not None
        gone = unknown = False
        try:
            yield name
        except _SessionNotFound:
            gone = True
            raise
        except _AMBIGUOUS:
            unknown = True  # the call's transaction may still be open on a regular session
            raise
        finally:
            if gone or (unknown and name != self._multiplexed):
                self._drop(name)
            elif name != self._multiplexed:
                with self._lock:
                    self._free.append(name)

    def _drop(self, name: str) -> None:
        with self._lock:
            if name == self._multiplexed:
                self._multiplexed = None
            self._all.discard(name)

    def close(self) -> None:
        """Delete the pooled sessions (best effort; a multiplexed session expires by itself)."""
        with self._lock:
            names, self._all, self._free = list(self._all), set(), []
        for name in names:
            try:
                self._api.delete_session(name=name, metadata=self._metadata, timeout=2.0, retry=None)
            except Exception:  # noqa: BLE001 - the emulator or server may be gone already
                pass


def _remaining(deadline: float) -> float:
    return max(0.001, deadline - time.monotonic())


class SpannerRunStore(RunStore):
    """Run records in one Spanner table (primary key = run id), schema :mod:`.schema`.

    Args:
        api: a ``google.cloud.spanner_v1.SpannerClient`` (thread-safe; share one per process).
        database: the database's resource name, ``projects/P/instances/I/databases/D``.
        table: the table holding run records (``DEDUP_COLLECTION``).
        timeout_seconds: how long one operation may take, retries of aborted transactions and transient errors
            included, in seconds.

    Raises (every method): the contract's errors (:mod:`scheduler_dedup.handler.stores.base`), with the client's
    exception chained.
    """

    kind: ClassVar[str] = "spanner"
    display_name: ClassVar[str] = "Spanner"

    def __init__(self, api: Any, database: str, table: str, timeout_seconds: float = 20.0,
                 emulator_host: str | None = None):
        self.api = api
        self.emulator_host = emulator_host
        self.database = database
        self.collection = table
        self.timeout_seconds = timeout_seconds
        self._metadata = [("google-cloud-resource-prefix", database)]
        self._leader = [*self._metadata, ("x-goog-spanner-route-to-leader", "true")]
        self._sessions = _Sessions(api, database, self._leader)
        self._offset_lock = threading.Lock()
        self._clock_offset: float = 0.0  # Spanner's clock minus ours, in seconds
        self._history_sql = (f"SELECT {', '.join(READ_COLUMNS)} FROM {table}@{{FORCE_INDEX={index_name(table)}}} "
                             "WHERE job_name = @job AND schedule_time IS NOT NULL")

    @classmethod
    def connect(cls, project: str, instance: str, database: str, table: str,
                timeout_seconds: float = 20.0, emulator_host: str | None = None) -> "SpannerRunStore":
        """A client of ``projects/project/instances/instance/databases/database``, or of the emulator at
        ``emulator_host`` (``SPANNER_EMULATOR_HOST``: plain gRPC, anonymous credentials).

        Raises:
            StoreRefusedError: there are no credentials (Application Default Credentials not set up).
        """
        try:
            api = make_api(emulator_host)
        except Exception as exc:  # google.auth's DefaultCredentialsError
            raise StoreRefusedError(f"cannot create a Spanner client: {exc}", store=cls.display_name,
                                    hint=_hint(exc, emulator_host)) from exc
        return cls(api, f"projects/{project}/instances/{instance}/databases/{database}", table, timeout_seconds,
                   emulator_host)

    # -- running one operation -----------------------------------------------------------------------

    def _run(self, action: str, attempt: Callable[[str, float], _T], timeout_seconds: float | None = None,
             write: bool = False) -> _T:
        """``attempt(session, deadline)`` until it answers, retried as a whole on aborted transactions and transient
        errors until the store timeout; every failure becomes the contract's error."""
        seconds = self.timeout_seconds if timeout_seconds is None else timeout_seconds
        deadline = time.monotonic() + seconds
        backoff = 0.01
        while True:
            try:
                with self._sessions.session(deadline) as session:
                    try:
                        return attempt(session, deadline)
                    except gexc.NotFound as exc:
                        if _session_gone(exc):
                            raise _SessionNotFound() from exc
                        raise
            except _SessionNotFound as gone:
                last: BaseException = gone.__cause__ or gone
            except _RETRIED as exc:
                last = exc
            except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
                raise self._failed(exc, action, write) from exc
            pause = random.uniform(backoff / 2, backoff)
            if time.monotonic() + pause >= deadline:
                raise self._failed(last, action, write, timed_out=seconds) from last
            time.sleep(pause)
            backoff = min(backoff * 2, 1.0)

    def _failed(self, exc: BaseException, action: str, write: bool, timed_out: float | None = None) -> Exception:
        """The contract's error for a client exception raised by ``action``."""
        text = f"Spanner failed to {action}: {type(exc).__name__}: {exc}"
        if timed_out is not None:
            text += f" (retried for the store timeout, {timed_out:g} s)"
            return StoreUnavailableError(text, store=self.display_name, hint=_hint(exc, self.emulator_host))
        fix = config_fix(exc, self.database)
        if fix is not None:
            return StoreConfigError(text, store=self.display_name, fix=fix)
        if write and isinstance(exc, _INVALID):
            return InvalidWriteError(text, store=self.display_name,
                                     hint=_hint(exc, self.emulator_host, self.collection))
        if isinstance(exc, (*_REFUSED, *_INVALID)):
            return StoreRefusedError(text, store=self.display_name, hint=_hint(exc, self.emulator_host, self.collection))
        return StoreUnavailableError(text, store=self.display_name, hint=_hint(exc, self.emulator_host))

    def _observe(self, server_time: datetime | None) -> None:
        if server_time is not None:
            with self._offset_lock:
                self._clock_offset = server_time.timestamp() - time.time()

    # -- values ------------------------------------------------------------------------------------

    def _write_values(self, fields: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, struct_pb2.Value]:
        """``fields`` as column values: ``SERVER_TIME`` as the commit timestamp, ``Increment`` added to ``current``.

        Raises:
            InvalidWriteError: a field has no column or a value of another type (``sent=False``).
        """
        values: dict[str, struct_pb2.Value] = {}
        for name, value in fields.items():
            column = COLUMNS_BY_NAME.get(name)
            if value is SERVER_TIME:
                if column is None or not column.commit_timestamp:
                    self._refuse(f"{name} cannot hold the commit timestamp (SERVER_TIME): only "
                                 f"{', '.join(c.name for c in COLUMNS_BY_NAME.values() if c.commit_timestamp)} can")
                values[name] = struct_pb2.Value(string_value=COMMIT_TIMESTAMP)
                continue
            if isinstance(value, Increment):
                base = current.get(name)
                value = (base if isinstance(base, int) else 0) + value.amount
            problem = spanner_values.field_problem(name, value)
            if problem is not None:
                self._refuse(problem)
            values[name] = encode(COLUMNS_BY_NAME[name].type, value)
        return values

    def _refuse(self, problem: str) -> None:
        raise InvalidWriteError(f"Spanner cannot store the record: {problem}", store=self.display_name, sent=False)

    def _mutation_write(self, run_id: str, values: Mapping[str, struct_pb2.Value], *,
                        created: bool) -> sp.Mutation.Write:
        stamp = struct_pb2.Value(string_value=COMMIT_TIMESTAMP)
        columns = [KEY_COLUMN, VERSION_COLUMN, *([CREATE_TIME_COLUMN] if created else []), *values]
        row = [struct_pb2.Value(string_value=run_id), stamp, *([stamp] if created else []), *values.values()]
        return sp.Mutation.Write(table=self.collection, columns=columns, values=[struct_pb2.ListValue(values=row)])

    def _key_set(self, run_id: str) -> sp.KeySet:
        return sp.KeySet(keys=[struct_pb2.ListValue(values=[struct_pb2.Value(string_value=run_id)])])

    # -- the contract ------------------------------------------------------------------------------

    def server_now(self) -> datetime:
        """Spanner's current time as this instance last observed it (aware UTC); see :meth:`RunStore.server_now`."""
        with self._offset_lock:
            offset = self._clock_offset
        return datetime.now(timezone.utc) + timedelta(seconds=offset)

    def create(self, run_id: str, fields: Mapping[str, Any]) -> datetime | None:
        """Put-if-absent: an insert mutation in one Commit. Returns its commit timestamp, or None if the row exists."""
        values = self._write_values(fields, {})
        mutation = sp.Mutation(insert=self._mutation_write(run_id, values, created=True))

        def attempt(session: str, deadline: float) -> datetime | None:
            try:
                response = self.api.commit(request=sp.CommitRequest(session=session, single_use_transaction=_RW,
                                                                    mutations=[mutation]),
                                           metadata=self._leader, timeout=_remaining(deadline), retry=None)
            except gexc.AlreadyExists:
                return None
            return self._committed(response)

        return self._run(f"create {run_id}", attempt, write=True)

    def _committed(self, response: Any) -> datetime:
        commit_time: datetime = response.commit_timestamp
        self._observe(commit_time)
        return commit_time

    def get(self, run_id: str, *, timeout_seconds: float | None = None) -> RunRecord | None:
        """A strong single-use read of the row; None if there is none."""
        def attempt(session: str, deadline: float) -> RunRecord | None:
            request = sp.ReadRequest(session=session, transaction=_STRONG, table=self.collection,
                                     columns=list(READ_COLUMNS), key_set=self._key_set(run_id))
            rows, meta = _rows(self.api.streaming_read(request=request, metadata=self._metadata,
                                                       timeout=_remaining(deadline), retry=None))
            read_time = _read_timestamp(meta)
            self._observe(read_time)
            return record_from_row(rows[0], read_time) if rows else None

        return self._run(f"read {run_id}", attempt, timeout_seconds)

    def _conditional(self, action: str, run_id: str, expected: datetime,
                     mutation: Callable[[Mapping[str, Any]], sp.Mutation], read: Sequence[str]) -> datetime | None:
        """One read-write transaction: read the row's version (and ``read`` columns), commit ``mutation(row)`` only if
        the version is still ``expected``. Returns the commit timestamp, or None (a Rollback) if it is not."""
        columns = [VERSION_COLUMN, *read]

        def attempt(session: str, deadline: float) -> datetime | None:
            request = sp.ReadRequest(session=session, transaction=sp.TransactionSelector(begin=_RW),
                                     table=self.collection, columns=columns, key_set=self._key_set(run_id),
                                     lock_hint=sp.ReadRequest.LockHint.LOCK_HINT_EXCLUSIVE)
            rows, meta, token = _rows_and_token(self.api.streaming_read(
                request=request, metadata=self._leader, timeout=_remaining(deadline), retry=None))
            transaction = meta.transaction.id if meta is not None else b""
            row = dict(zip(columns, rows[0])) if rows else None
            if row is None or row[VERSION_COLUMN] != expected:
                self._rollback(session, transaction)
                return None
            commit = sp.CommitRequest(session=session, transaction_id=transaction, mutations=[mutation(row)],
                                      precommit_token=token)
            response = self.api.commit(request=commit, metadata=self._leader, timeout=_remaining(deadline),
                                       retry=None)
            if response.precommit_token and response.precommit_token.precommit_token:
                # A multiplexed session's commit asks to be sent again with a newer precommit token.
                response = self.api.commit(
                    request=sp.CommitRequest(session=session, transaction_id=transaction,
                                             precommit_token=response.precommit_token),
                    metadata=self._leader, timeout=_remaining(deadline), retry=None)
            return self._committed(response)

        return self._run(action, attempt, write=True)

    def _rollback(self, session: str, transaction: bytes) -> None:
        """Release a transaction's locks at once (best effort: Spanner also ends an idle one by itself)."""
        if not transaction:
            return
        try:
            self.api.rollback(session=session, transaction_id=transaction, metadata=self._leader, timeout=2.0,
                              retry=None)
        except gexc.GoogleAPICallError:
            pass

    def update_if_unchanged(self, run_id: str, fields: Mapping[str, Any], update_time: datetime) -> datetime | None:
        """Set ``fields`` only if the row's version is still ``update_time``: read, then an update mutation.

        Returns the new commit timestamp, or None if the row changed or is gone since ``update_time``.
        """
        increments = [name for name, value in fields.items() if isinstance(value, Increment)]
        self._write_values({k: v for k, v in fields.items() if not isinstance(v, Increment)}, {})  # refuse early

        def mutation(row: Mapping[str, Any]) -> sp.Mutation:
            return sp.Mutation(update=self._mutation_write(run_id, self._write_values(fields, row), created=False))

        return self._conditional(f"update {run_id}", run_id, update_time, mutation, increments)

    def delete_if_unchanged(self, run_id: str, update_time: datetime) -> bool:
        """Delete the row only if its version is still ``update_time``: read, then a delete mutation."""
        def mutation(row: Mapping[str, Any]) -> sp.Mutation:
            return sp.Mutation(delete=sp.Mutation.Delete(table=self.collection, key_set=self._key_set(run_id)))

        return self._conditional(f"delete {run_id}", run_id, update_time, mutation, ()) is not None

    def result_refusal(self, result: Any, run_id: str, record_fields: Mapping[str, Any]) -> str | None:
        """Spanner's JSON type: nesting, number range, UTF-8 and size (:mod:`.values`)."""
        return spanner_values.result_refusal(result)

    # -- run history ---------------------------------------------------------------------------

    def _query(self, action: str, sql: str, params: Mapping[str, tuple[str, Any]],
               timeout_seconds: float | None) -> list[RunRecord]:
        struct = struct_pb2.Struct(fields={name: encode(kind, value) for name, (kind, value) in params.items()})
        types = {name: sp.Type(code=_TYPE_CODES[kind]) for name, (kind, _) in params.items()}

        def attempt(session: str, deadline: float) -> list[RunRecord]:
            request = sp.ExecuteSqlRequest(session=session, transaction=_STRONG, sql=sql, params=struct,
                                           param_types=types)
            rows, meta = _rows(self.api.execute_streaming_sql(request=request, metadata=self._metadata,
                                                              timeout=_remaining(deadline), retry=None))
            read_time = _read_timestamp(meta)
            self._observe(read_time)
            return [record_from_row(row, read_time) for row in rows]

        seconds = max(self.timeout_seconds, 10.0) if timeout_seconds is None else timeout_seconds
        return self._run(action, attempt, seconds)

    def job_run_pages(self, job_name: str, *, since: datetime | None, until: datetime | None, page_size: int,
                      timeout_seconds: float | None = None) -> Iterator[list[RunRecord]]:
        """One query per page through the index ``(job_name, schedule_time DESC)``, each page after the last row of
        the one before (``schedule_time``, then run id, both descending)."""
        sql = self._history_sql
        params: dict[str, tuple[str, Any]] = {"job": ("STRING(MAX)", job_name), "n": ("INT64", page_size)}
        if since is not None:
            sql += " AND schedule_time >= @since"
            params["since"] = ("TIMESTAMP", since)
        if until is not None:
            sql += " AND schedule_time < @until"
            params["until"] = ("TIMESTAMP", until)
        order = " ORDER BY schedule_time DESC, run_id DESC LIMIT @n"
        after = ""
        while True:
            page = self._query(f"query the runs of {job_name}", sql + after + order, params, timeout_seconds)
            yield page
            if len(page) < page_size:
                return
            last = page[-1]
            after = " AND (schedule_time < @at OR (schedule_time = @at AND run_id < @id))"
            params["at"] = ("TIMESTAMP", last.data["schedule_time"])
            params["id"] = ("STRING(MAX)", last.run_id)

    def runs_with_id_prefix(self, prefix: str, limit: int, *,
                            timeout_seconds: float | None = None) -> list[RunRecord]:
        """One primary key range read (``prefix <= run_id < prefix + "g"``, as run ids are hex), at most ``limit``."""
        key_range = sp.KeyRange(start_closed=struct_pb2.ListValue(values=[struct_pb2.Value(string_value=prefix)]),
                                end_open=struct_pb2.ListValue(values=[struct_pb2.Value(string_value=prefix + "g")]))

        def attempt(session: str, deadline: float) -> list[RunRecord]:
            request = sp.ReadRequest(session=session, transaction=_STRONG, table=self.collection,
                                     columns=list(READ_COLUMNS), key_set=sp.KeySet(ranges=[key_range]), limit=limit)
            rows, meta = _rows(self.api.streaming_read(request=request, metadata=self._metadata,
                                                       timeout=_remaining(deadline), retry=None))
            read_time = _read_timestamp(meta)
            return [record_from_row(row, read_time) for row in rows]

        seconds = max(self.timeout_seconds, 10.0) if timeout_seconds is None else timeout_seconds
        return self._run(f"query run ids starting {prefix}", attempt, seconds)

    def close(self) -> None:
        """Delete pooled sessions and close the channel."""
        self._sessions.close()
        self.api.transport.close()


# -- the wire format of values -------------------------------------------------------------------------

_TYPE_CODES = {"STRING(MAX)": sp.TypeCode.STRING, "INT64": sp.TypeCode.INT64, "FLOAT64": sp.TypeCode.FLOAT64,
               "BOOL": sp.TypeCode.BOOL, "TIMESTAMP": sp.TypeCode.TIMESTAMP, "JSON": sp.TypeCode.JSON}


def encode(column_type: str, value: Any) -> struct_pb2.Value:
    """A Python value as the ``google.protobuf.Value`` Spanner takes for ``column_type``
    (https://cloud.google.com/spanner/docs/reference/rpc/google.spanner.v1#typecode): INT64 as a decimal string,
    TIMESTAMP as RFC 3339 in UTC (years 1 to 9999, four digits), JSON as its text."""
    if value is None:
        return struct_pb2.Value(null_value=struct_pb2.NULL_VALUE)
    if column_type == "JSON":
        return struct_pb2.Value(string_value=spanner_values.json_text(value))
    if column_type == "TIMESTAMP":
        stamp = value.astimezone(timezone.utc)
        nanos = getattr(value, "nanosecond", None) if isinstance(value, DatetimeWithNanoseconds) else None
        # The year in four digits: strftime's %Y drops the leading zeros of years before 1000.
        text = (f"{stamp.year:04d}-{stamp:%m-%dT%H:%M:%S}." + (f"{nanos:09d}" if nanos else f"{stamp.microsecond:06d}")
                + "Z")
        return struct_pb2.Value(string_value=text)
    if column_type == "INT64":
        return struct_pb2.Value(string_value=str(int(value)))
    if column_type == "FLOAT64":
        return struct_pb2.Value(number_value=float(value))
    if column_type == "BOOL":
        return struct_pb2.Value(bool_value=bool(value))
    return struct_pb2.Value(string_value=str(value))


def decode(code: int, value: struct_pb2.Value) -> Any:
    """A ``google.protobuf.Value`` of Spanner type ``code`` as a Python value (TIMESTAMP: an aware UTC datetime)."""
    kind = value.WhichOneof("kind")
    if kind == "null_value":
        return None
    if code == sp.TypeCode.TIMESTAMP:
        return DatetimeWithNanoseconds.from_rfc3339(value.string_value)
    if code == sp.TypeCode.INT64:
        return int(value.string_value)
    if code == sp.TypeCode.FLOAT64:
        return value.number_value if kind == "number_value" else float(value.string_value)
    if code == sp.TypeCode.BOOL:
        return value.bool_value
    if code == sp.TypeCode.JSON:
        return json.loads(value.string_value)
    return value.string_value


def _merge_chunk(head: struct_pb2.Value, tail: struct_pb2.Value) -> struct_pb2.Value:
    """Join a value split across two partial result sets (strings concatenate; our columns hold no lists)."""
    return struct_pb2.Value(string_value=head.string_value + tail.string_value)


def _rows_and_token(stream: Any) -> tuple[list[list[Any]], Any, Any]:
    """Rows of a streamed read (decoded by the row type), its metadata and the highest precommit token."""
    meta = None
    values: list[struct_pb2.Value] = []
    pending: struct_pb2.Value | None = None
    token = None
    for part in stream:
        pb = sp.PartialResultSet.pb(part)
        if pb.HasField("metadata") and meta is None:
            meta = pb.metadata
        if pb.HasField("precommit_token") and (token is None or pb.precommit_token.seq_num > token.seq_num):
            token = pb.precommit_token
        chunk = list(pb.values)
        if pending is not None and chunk:
            chunk[0] = _merge_chunk(pending, chunk[0])
            pending = None
        if pb.chunked_value and chunk:
            pending = chunk.pop()
        values.extend(chunk)
    if pending is not None:
        values.append(pending)
    if meta is None:
        return [], None, token
    codes = [field.type_.code for field in meta.row_type.fields]  # the proto field is named type_
    width = len(codes) or 1
    rows = [[decode(codes[i], v) for i, v in enumerate(values[start:start + width])]
            for start in range(0, len(values), width)]
    return rows, meta, (sp.MultiplexedSessionPrecommitToken.wrap(token) if token is not None else None)


def _rows(stream: Any) -> tuple[list[list[Any]], Any]:
    rows, meta, _ = _rows_and_token(stream)
    return rows, meta


def _read_timestamp(meta: Any) -> datetime:
    """The strong read's timestamp (``return_read_timestamp``), Spanner's clock, aware UTC."""
    if meta is None or not meta.transaction.HasField("read_timestamp"):
        raise gexc.InternalServerError("Spanner returned no read timestamp")  # retried; never expected
    read_time: datetime = DatetimeWithNanoseconds.from_timestamp_pb(meta.transaction.read_timestamp)
    return read_time


def record_from_row(row: Sequence[Any], read_time: datetime) -> RunRecord:
    """A record from a row of :data:`~.schema.READ_COLUMNS`; NULL columns are absent fields."""
    values = dict(zip(READ_COLUMNS, row))
    run_id = values.pop(KEY_COLUMN)
    update_time = values.pop(VERSION_COLUMN)
    create_time = values.pop(CREATE_TIME_COLUMN)
    data = {name: value for name, value in values.items() if value is not None}
    return RunRecord(
        run_id=run_id,
        status=str(data.get("status", "")),
        attempt_id=str(data.get("attempt_id", "")),
        lease_seconds=float(data.get("lease_seconds", 0) or 0),
        update_time=update_time,
        read_time=read_time,
        data=data,
        create_time=create_time,
    )


def config_fix(exc: BaseException, database: str) -> str | None:
    """What to change when Spanner's answer says the database is set up so that every call fails, or None.

    Spanner's answers (https://cloud.google.com/spanner/docs/error-codes, https://cloud.google.com/spanner/docs/iam):
    NOT_FOUND "Database not found: projects/P/instances/I/databases/D" or "Instance not found: ..." (a session that
    is gone, or a table, is not one of them), and PERMISSION_DENIED "Caller is missing IAM permission
    spanner.sessions.create on resource ..." (the runtime identity lacks ``roles/spanner.databaseUser``).

    Args:
        exc: the client's exception.
        database: the store's database, ``projects/P/instances/I/databases/D``.
    """
    text = str(exc).lower()
    if isinstance(exc, gexc.NotFound) and not _session_gone(exc) and (
            "database not found" in text or "instance not found" in text):
        what = "instance" if "instance not found" in text else "database"
        return (f"the Spanner {what} of {database} does not exist: set DEDUP_SPANNER_INSTANCE and "
                "DEDUP_SPANNER_DATABASE (the stack's store instance_id and database_id) to existing ones, or create "
                "them (`scheduler-dedup store init --store spanner ...`, or let the component create them)")
    if isinstance(exc, gexc.PermissionDenied):
        if "has not been used" in text or "is disabled" in text or "service_disabled" in text:
            return ("the Spanner API is not enabled in the project: enable spanner.googleapis.com; if it was enabled "
                    "in the last few minutes, wait: Google answers this until the enablement has spread")
        return (f"the handler's runtime identity may not read and write {database}: grant its service account "
                "roles/spanner.databaseUser on the database (the component grants it)")
    return None


def _hint(exc: BaseException, host: str | None, table: str = "") -> str:
    """What to check when Spanner did not answer or refused: the emulator (at ``host``, when one is used),
    credentials, the table."""
    from google.auth.exceptions import DefaultCredentialsError

    if isinstance(exc, DefaultCredentialsError):
        return ("no Google credentials: run `gcloud auth application-default login` (an account with "
                f"roles/spanner.databaseReader is enough to read run history), or set {EMULATOR_ENV} to use an "
                "emulator")
    text = str(exc).lower()
    if isinstance(exc, (gexc.NotFound, gexc.FailedPrecondition, gexc.InvalidArgument)) and \
            ("table" in text or "column" in text or "index" in text):
        return (f"the database lacks the run records' table {table or '(DEDUP_COLLECTION)'}, a column or its index: "
                "run `scheduler-dedup store init --store spanner ...` (the component creates them)")
    if isinstance(exc, gexc.NotFound) and ("database" in text or "instance" in text):
        return "the Spanner instance or database does not exist: check DEDUP_SPANNER_INSTANCE and DEDUP_SPANNER_DATABASE"
    if isinstance(exc, (gexc.PermissionDenied, gexc.Unauthenticated)):
        return ("the credentials may not read or write this database: reading run history needs "
                "roles/spanner.databaseReader, the handler roles/spanner.databaseUser on the database")
    if host:
        return f"is the emulator running at {EMULATOR_ENV}={host}?"
    return ("check the network and your credentials (`gcloud auth application-default login`), or set "
            f"{EMULATOR_ENV} to use an emulator")


def make_api(emulator_host: str | None = None) -> Any:
    """A ``SpannerClient`` for Spanner, or for the emulator at ``emulator_host`` (plain gRPC, anonymous
    credentials). Messages of any size both ways: a result may be 10 MB.

    Raises:
        google.auth.exceptions.DefaultCredentialsError: no emulator and no Application Default Credentials.
    """
    import grpc
    from google.api_core.gapic_v1.client_info import ClientInfo
    from google.cloud.spanner_v1.services.spanner import SpannerClient
    from google.cloud.spanner_v1.services.spanner.transports.grpc import SpannerGrpcTransport

    info = ClientInfo(user_agent="scheduler-dedup")
    if emulator_host:
        channel = grpc.insecure_channel(emulator_host, options=[("grpc.max_send_message_length", -1),
                                                      ("grpc.max_receive_message_length", -1)])
        return SpannerClient(transport=SpannerGrpcTransport(channel=channel), client_info=info)
    return SpannerClient(client_info=info)


def from_settings(settings: Any, collection: str) -> SpannerRunStore:
    """The store of the handler's settings (``GOOGLE_CLOUD_PROJECT``, its
    :class:`~scheduler_dedup.handler.stores.spanner.config.SpannerConfig`: ``DEDUP_SPANNER_INSTANCE``,
    ``DEDUP_SPANNER_DATABASE``, ``SPANNER_EMULATOR_HOST``; ``DEDUP_STORE_TIMEOUT_SECONDS``) on table ``collection``."""
    config = settings.store_config
    return SpannerRunStore.connect(settings.project, config.instance, config.database, collection,
                                   settings.store_timeout_seconds, config.emulator_host)
