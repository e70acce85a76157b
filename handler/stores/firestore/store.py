"""The Firestore store: single-document operations with Firestore's own clock.

Every write that follows a claim carries a precondition on the document's ``update_time``: Firestore commits
it only if nobody wrote the document since we last saw it. That is a compare-and-set on one document in one
RPC, with no lock held, so it cannot leave a document locked when a client dies (a transaction's lock lasts
about 60 s) nor abort under contention (transactions under contention do; 20 concurrent ``create()`` calls
give one winner and 19 ``AlreadyExists``).

==============================  =====================================================================
contract                        Firestore
==============================  =====================================================================
put-if-absent                   ``create()`` (precondition ``exists: false``): one Commit
read, with the store's clock    ``get()``: one BatchGetDocuments; ``read_time`` is Firestore's
fenced update / delete          precondition ``update_time`` (the record's version): one Commit
server-side values              ``SERVER_TIMESTAMP``, ``Increment`` transforms in the same Commit
run history                     ``job_name ==``, ``schedule_time`` range, ordered ``schedule_time DESC``:
                                the composite index of :data:`.schema.RUN_HISTORY_INDEXES`
TTL                             a TTL policy on ``expire_at``: deleted typically within 24 h after it passes
==============================  =====================================================================

RPC floor: a first delivery costs 2 RPCs (claim, completion) plus one renewal per third of the lease the
job runs; a duplicate costs 2 on another instance (the claim's ``AlreadyExists``, then a read) and 0 on the
instance that ran it (its cache of finished runs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

from google.api_core import exceptions as gexc
from google.api_core import retry as gretry
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from scheduler_dedup.handler.stores.firestore.config import EMULATOR_VARIABLE
from scheduler_dedup.handler.core.errors import (InvalidWriteError, StoreConfigError, StoreRefusedError,
                                                 StoreUnavailableError)
from scheduler_dedup.handler.core.record import RunRecord
from scheduler_dedup.handler.stores.firestore import values as firestore_values
from scheduler_dedup.handler.stores.base import SERVER_TIME, Increment, RunStore

#: Emulator variable the Firestore client honours (``host:port``, no TLS, no credentials).
EMULATOR_ENV = EMULATOR_VARIABLE

#: Answers after which a call certainly did not write: Firestore refused it.
_REFUSED = (gexc.PermissionDenied, gexc.Unauthenticated, gexc.NotFound, gexc.FailedPrecondition,
            gexc.OutOfRange, gexc.ResourceExhausted, gexc.MethodNotImplemented)


class FirestoreRunStore(RunStore):
    """Run records in one Firestore collection (document id = run id).

    Args:
        client: a ``google.cloud.firestore.Client`` (thread-safe; share one per process).
        collection: the collection id holding run records.
        timeout_seconds: how long one operation may take, retries of transient errors
            (UNAVAILABLE, DEADLINE_EXCEEDED...) included, in seconds.

    Raises (every method): the contract's errors (:mod:`scheduler_dedup.handler.stores.base`), with
    Firestore's exception chained.
    """

    kind: ClassVar[str] = "firestore"
    display_name: ClassVar[str] = "Firestore"

    def __init__(self, client: firestore.Client, collection: str, timeout_seconds: float = 20.0,
                 emulator_host: str | None = None):
        self.client = client
        self.emulator_host = emulator_host
        self.collection = collection
        self.timeout_seconds = timeout_seconds
        self._retry = gretry.Retry(predicate=gretry.if_transient_error, initial=0.1, maximum=2.0, multiplier=2.0,
                                   timeout=timeout_seconds)
        self._rpc = {"retry": self._retry, "timeout": timeout_seconds}
        self._offset_lock = threading.Lock()
        self._clock_offset: float = 0.0  # Firestore's clock minus ours, in seconds

    @classmethod
    def connect(cls, project: str, database: str, collection: str, timeout_seconds: float = 20.0,
                emulator_host: str | None = None) -> "FirestoreRunStore":
        """Create a client for ``project``/``database`` (the client honours ``FIRESTORE_EMULATOR_HOST``;
        ``emulator_host``, its value, is what the store's hints name).

        Raises:
            StoreRefusedError: there are no credentials (Application Default Credentials not set up).
        """
        try:
            client = firestore.Client(project=project, database=database)
        except Exception as exc:  # google.auth's DefaultCredentialsError, a bad project
            raise StoreRefusedError(f"cannot create a Firestore client: {exc}", store=cls.display_name,
                                    hint=_hint(exc, emulator_host)) from exc
        return cls(client, collection, timeout_seconds, emulator_host)

    # -- helpers ---------------------------------------------------------------------------------

    def _doc(self, run_id: str) -> Any:
        return self.client.collection(self.collection).document(run_id)

    def _observe(self, server_time: datetime | None) -> None:
        if server_time is not None:
            with self._offset_lock:
                self._clock_offset = server_time.timestamp() - time.time()

    def _rpc_for(self, timeout_seconds: float | None, *, initial: float = 0.1, maximum: float = 2.0) -> dict[str, Any]:
        if timeout_seconds is None and initial == 0.1 and maximum == 2.0:
            return self._rpc
        seconds = self.timeout_seconds if timeout_seconds is None else timeout_seconds
        return {"retry": gretry.Retry(predicate=gretry.if_transient_error, initial=initial, maximum=maximum,
                                      multiplier=2.0, timeout=seconds), "timeout": seconds}

    def _failed(self, exc: BaseException, action: str) -> Exception:
        """The contract's error for a Firestore exception raised by ``action`` (its cause chained by the caller)."""
        text = f"Firestore failed to {action}: {type(exc).__name__}: {exc}"
        if isinstance(exc, gexc.InvalidArgument):
            return InvalidWriteError(text, store=self.display_name)
        if isinstance(exc, (ValueError, TypeError, OverflowError)):  # the client could not encode a value
            return InvalidWriteError(text, store=self.display_name, sent=False)
        fix = config_fix(exc, str(getattr(self.client, "project", "") or ""),
                         str(getattr(self.client, "_database", "") or "(default)"))
        if fix is not None:
            return StoreConfigError(text, store=self.display_name, fix=fix)
        if isinstance(exc, _REFUSED):
            return StoreRefusedError(text, store=self.display_name, hint=_hint(exc, self.emulator_host))
        return StoreUnavailableError(text, store=self.display_name, hint=_hint(exc, self.emulator_host))

    @staticmethod
    def _fields(fields: Mapping[str, Any]) -> dict[str, Any]:
        """The contract's server-side values as Firestore transforms."""
        out: dict[str, Any] = {}
        for key, value in fields.items():
            if value is SERVER_TIME:
                value = firestore.SERVER_TIMESTAMP
            elif isinstance(value, Increment):
                value = firestore.Increment(value.amount)
            out[key] = value
        return out

    # -- the contract ------------------------------------------------------------------------------

    def server_now(self) -> datetime:
        """Firestore's current time as this instance last observed it (aware UTC); see :meth:`RunStore.server_now`."""
        with self._offset_lock:
            offset = self._clock_offset
        return datetime.now(timezone.utc) + timedelta(seconds=offset)

    def create(self, run_id: str, fields: Mapping[str, Any]) -> datetime | None:
        """Put-if-absent. Returns the write's commit time, or None if the document exists."""
        try:
            result = self._doc(run_id).create(self._fields(fields), **self._rpc)
        except gexc.AlreadyExists:
            return None
        except (gexc.GoogleAPICallError, gexc.RetryError, ValueError, TypeError, OverflowError) as exc:
            raise self._failed(exc, f"create {run_id}") from exc
        self._observe(result.update_time)
        update_time: datetime = result.update_time
        return update_time

    def get(self, run_id: str, *, timeout_seconds: float | None = None) -> RunRecord | None:
        """Read one record; None if there is none."""
        try:
            snap = self._doc(run_id).get(**self._rpc_for(timeout_seconds))
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise self._failed(exc, f"read {run_id}") from exc
        self._observe(snap.read_time)
        if not snap.exists:
            return None
        return record_from_snapshot(snap)

    def update_if_unchanged(self, run_id: str, fields: Mapping[str, Any], update_time: datetime) -> datetime | None:
        """Update fields only if the document's last commit time is still ``update_time``.

        Returns the new commit time, or None if the document changed or is gone since ``update_time``:
        changed by another attempt, or by this very write on an earlier try whose answer was lost.
        """
        try:
            result = self._doc(run_id).update(
                self._fields(fields), option=self.client.write_option(last_update_time=update_time), **self._rpc)
        except (gexc.FailedPrecondition, gexc.NotFound):
            return None
        except (gexc.GoogleAPICallError, gexc.RetryError, ValueError, TypeError, OverflowError) as exc:
            raise self._failed(exc, f"update {run_id}") from exc
        self._observe(result.update_time)
        new_time: datetime = result.update_time
        return new_time

    def delete_if_unchanged(self, run_id: str, update_time: datetime) -> bool:
        """Delete only if the document's last commit time is still ``update_time``.

        Returns False if the document changed or is gone since (possibly by this very delete on an
        earlier try whose answer was lost).
        """
        try:
            commit_time = self._doc(run_id).delete(option=self.client.write_option(last_update_time=update_time),
                                                   **self._rpc)
        except (gexc.FailedPrecondition, gexc.NotFound):
            return False
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise self._failed(exc, f"delete {run_id}") from exc
        self._observe(commit_time)
        return True

    def result_refusal(self, result: Any, run_id: str, record_fields: Mapping[str, Any]) -> str | None:
        """Firestore's value model and 1 MiB document size (:mod:`.values`)."""
        return firestore_values.result_refusal(result, collection=self.collection, document_id=run_id,
                                               record_fields=record_fields)

    # -- run history ---------------------------------------------------------------------------

    def _history_rpc(self, timeout_seconds: float | None) -> dict[str, Any]:
        return self._rpc_for(timeout_seconds, initial=0.2, maximum=5.0)

    def _job_query(self, job_name: str, since: datetime | None, until: datetime | None) -> Any:
        query = self.client.collection(self.collection).where(filter=FieldFilter("job_name", "==", job_name))
        if since is not None:
            query = query.where(filter=FieldFilter("schedule_time", ">=", since))
        if until is not None:
            query = query.where(filter=FieldFilter("schedule_time", "<", until))
        return query.order_by("schedule_time", direction=firestore.Query.DESCENDING)

    def job_run_pages(self, job_name: str, *, since: datetime | None, until: datetime | None, page_size: int,
                      timeout_seconds: float | None = None) -> Iterator[list[RunRecord]]:
        """One query per page through the composite index ``job_name ASC, schedule_time DESC``
        (:data:`.schema.RUN_HISTORY_INDEXES`); without it real Firestore answers
        ``FailedPrecondition`` with a link that creates it (a :class:`StoreRefusedError` here)."""
        query = self._job_query(job_name, since, until).limit(page_size)
        while True:
            try:
                snaps = list(query.stream(**self._history_rpc(timeout_seconds)))
            except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
                raise self._failed(exc, f"query the runs of {job_name}") from exc
            yield [record_from_snapshot(snap) for snap in snaps]
            if len(snaps) < page_size:
                return
            query = self._job_query(job_name, since, until).start_after(snaps[-1]).limit(page_size)

    def runs_with_id_prefix(self, prefix: str, limit: int, *,
                            timeout_seconds: float | None = None) -> list[RunRecord]:
        """One document-id range query (``prefix <= __name__ < prefix + "g"``, as run ids are hex)."""
        collection = self.client.collection(self.collection)
        query = (collection.where(filter=FieldFilter("__name__", ">=", collection.document(prefix)))
                 .where(filter=FieldFilter("__name__", "<", collection.document(prefix + "g")))
                 .limit(limit))
        try:
            snaps = list(query.stream(**self._history_rpc(timeout_seconds)))
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise self._failed(exc, f"query run ids starting {prefix}") from exc
        return [record_from_snapshot(snap) for snap in snaps]

    def close(self) -> None:
        """Close the client's channel."""
        self.client.close()


def record_from_snapshot(snap: Any) -> RunRecord:
    """A record from an existing ``DocumentSnapshot`` (a ``get()`` or a query result)."""
    data = snap.to_dict() or {}
    return RunRecord(
        run_id=snap.id,
        status=str(data.get("status", "")),
        attempt_id=str(data.get("attempt_id", "")),
        lease_seconds=float(data.get("lease_seconds", 0) or 0),
        update_time=snap.update_time,
        read_time=snap.read_time,
        data=data,
        create_time=snap.create_time,
    )


def config_fix(exc: BaseException, project: str, database: str) -> str | None:
    """What to change when Firestore's answer says the database is set up so that every call fails, or None.

    Firestore's own answers (texts as its clients report them; Google's docs
    https://cloud.google.com/datastore/docs/firestore-or-datastore and
    https://cloud.google.com/firestore/docs/security/iam):

    - FAILED_PRECONDITION "The Cloud Firestore API is not available for Firestore in Datastore Mode database
      projects/P/databases/D" (older: "... for Cloud Datastore projects" / "... for Datastore Mode projects"):
      the database is in Datastore mode; the run store needs Native mode.
    - NOT_FOUND "The database D does not exist for project P" / "The project P does not exist or it does not contain
      an active Cloud Datastore or Cloud Firestore database": no such database (``DEDUP_DATABASE``).
    - PERMISSION_DENIED "Missing or insufficient permissions." / "Permission denied on resource project P" /
      "Cloud Firestore API has not been used in project P before or it is disabled": the runtime identity lacks
      ``roles/datastore.user``, or the API is off.

    A FAILED_PRECONDITION about a missing index or a changed document, and a NOT_FOUND of one document, are not
    configuration answers (None).
    """
    text = str(exc).lower()
    where = f"database {database} of project {project or '(GOOGLE_CLOUD_PROJECT)'}"
    if isinstance(exc, gexc.FailedPrecondition) and "datastore" in text and "not available" in text:
        return (f"the {where} is in Datastore mode, and the run store needs Firestore in Native mode: point "
                "DEDUP_DATABASE (the stack's database_id) at a Native-mode database, for example one the component "
                "creates (create_database true), or, if this database has never held data, switch it with `gcloud "
                f"firestore databases update --database='{database}' --type=firestore-native`")
    if isinstance(exc, gexc.NotFound) and ("database" in text or "project" in text) and (
            "does not exist" in text or "not found" in text):
        return (f"the {where} does not exist: set DEDUP_DATABASE (the stack's database_id) to an existing database "
                "id, or create it (`gcloud firestore databases create --database=ID --location=LOCATION "
                "--type=firestore-native`, or let the component create it)")
    if isinstance(exc, gexc.PermissionDenied):
        if "has not been used" in text or "is disabled" in text or "service_disabled" in text:
            return (f"the Firestore API is not enabled in project {project or '(GOOGLE_CLOUD_PROJECT)'}: enable "
                    "firestore.googleapis.com (`gcloud services enable firestore.googleapis.com`); if it was enabled "
                    "in the last few minutes, wait: Google answers this until the enablement has spread")
        return (f"the handler's runtime identity may not read and write the {where}: grant its service account "
                f"roles/datastore.user on project {project or '(GOOGLE_CLOUD_PROJECT)'} (the component grants it; "
                "check the service's identity and any IAM deny policy or condition)")
    return None


def _hint(exc: BaseException, host: str | None) -> str:
    """What to check when Firestore did not answer or refused: the emulator (at ``host``, when one is used),
    credentials, the index."""
    from google.auth.exceptions import DefaultCredentialsError

    if isinstance(exc, DefaultCredentialsError):
        return ("no Google credentials: run `gcloud auth application-default login` (an account with "
                f"roles/datastore.viewer is enough to read run history), or set {EMULATOR_ENV} to use an emulator")
    if "index" in str(exc).lower():
        return ("the query needs the composite index job_name ASC + schedule_time DESC (the component creates it; "
                "the message has a link that creates it by hand)")
    if isinstance(exc, (gexc.PermissionDenied, gexc.Unauthenticated)):
        return ("the credentials may not read or write this database: reading run history needs "
                "roles/datastore.viewer, the handler roles/datastore.user")
    if host:
        return f"is the emulator running at {EMULATOR_ENV}={host}?"
    return ("check the network and your credentials (`gcloud auth application-default login`), or set "
            f"{EMULATOR_ENV} to use an emulator")


def from_settings(settings: Any, collection: str) -> FirestoreRunStore:
    """The store of the handler's settings (``GOOGLE_CLOUD_PROJECT``, ``DEDUP_STORE_TIMEOUT_SECONDS``, its
    :class:`~scheduler_dedup.handler.stores.firestore.config.FirestoreConfig`: ``DEDUP_DATABASE``,
    ``FIRESTORE_EMULATOR_HOST``) on ``collection``."""
    config = settings.store_config
    return FirestoreRunStore.connect(settings.project, config.database, collection, settings.store_timeout_seconds,
                                     config.emulator_host)
