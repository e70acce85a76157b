"""The Firestore store: four small single-document operations and Firestore's clock.

Every write that follows a claim carries a precondition on the document's ``update_time``:
Firestore commits it only if nobody wrote the document since we last saw it. That is a
compare-and-set on one document in one RPC, with no lock held, so it cannot leave a document
locked when a client dies (a transaction's lock lasts about 60 s) nor abort under contention.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core import retry as gretry
from google.cloud import firestore

from scheduler_dedup.handler.record import RunRecord

#: What a store call raises when Firestore failed or never answered: an API error (UNAVAILABLE,
#: DEADLINE_EXCEEDED... after the client library's own retries), or ``RetryError`` when those retries ran
#: out of time. After one of these a write may or may not have committed; callers find out by reading.
STORE_ERRORS: tuple[type[Exception], ...] = (gexc.GoogleAPICallError, gexc.RetryError)


class FirestoreRunStore:
    """Run records in one Firestore collection.

    Args:
        client: a ``google.cloud.firestore.Client`` (thread-safe; share one per process).
        collection: the collection id holding run records.
        timeout_seconds: how long one operation may take, retries of transient errors
            (UNAVAILABLE, DEADLINE_EXCEEDED...) included, in seconds.

    All methods raise one of :data:`STORE_ERRORS` for Firestore failures other than the expected ones
    they turn into return values. A write that raised, or that was refused after a retry, may have
    committed on an earlier try whose answer was lost: callers read the record and recognise their own
    attempt id.
    """

    def __init__(self, client: firestore.Client, collection: str, timeout_seconds: float = 20.0):
        self.client = client
        self.collection = collection
        self.timeout_seconds = timeout_seconds
        self._retry = gretry.Retry(predicate=gretry.if_transient_error, initial=0.1, maximum=2.0, multiplier=2.0,
                                   timeout=timeout_seconds)
        self._rpc = {"retry": self._retry, "timeout": timeout_seconds}
        self._offset_lock = threading.Lock()
        self._clock_offset: float = 0.0  # Firestore's clock minus ours, in seconds

    @classmethod
    def connect(cls, project: str, database: str, collection: str, timeout_seconds: float = 20.0) -> "FirestoreRunStore":
        """Create a client for ``project``/``database`` (honours ``FIRESTORE_EMULATOR_HOST``)."""
        return cls(firestore.Client(project=project, database=database), collection, timeout_seconds)

    def _doc(self, run_id: str) -> Any:
        return self.client.collection(self.collection).document(run_id)

    def _observe(self, server_time: datetime | None) -> None:
        if server_time is not None:
            with self._offset_lock:
                self._clock_offset = server_time.timestamp() - time.time()

    def server_now(self) -> datetime:
        """Firestore's current time as this instance last observed it (aware UTC).

        Our clock plus the offset seen in the last Firestore response: used to stamp ``expire_at``
        and to spot forced runs, so neither depends on this instance's clock being right. The
        error is at most one RPC's latency; before the first RPC it is our own clock.
        """
        with self._offset_lock:
            offset = self._clock_offset
        return datetime.now(timezone.utc) + timedelta(seconds=offset)

    def create(self, run_id: str, fields: Mapping[str, Any]) -> datetime | None:
        """Put-if-absent. Returns the write's commit time, or None if the document exists."""
        try:
            result = self._doc(run_id).create(dict(fields), **self._rpc)
        except gexc.AlreadyExists:
            return None
        self._observe(result.update_time)
        return result.update_time

    def get(self, run_id: str) -> RunRecord | None:
        """Read one record; None if there is none."""
        snap = self._doc(run_id).get(**self._rpc)
        self._observe(snap.read_time)
        if not snap.exists:
            return None
        return RunRecord.from_snapshot(snap)

    def update_if_unchanged(self, run_id: str, fields: Mapping[str, Any], update_time: datetime) -> datetime | None:
        """Update fields only if the document's last commit time is still ``update_time``.

        Returns the new commit time, or None if the document changed or is gone since ``update_time``:
        changed by another attempt, or by this very write on an earlier try whose answer was lost.
        """
        try:
            result = self._doc(run_id).update(
                dict(fields), option=self.client.write_option(last_update_time=update_time), **self._rpc
            )
        except (gexc.FailedPrecondition, gexc.NotFound):
            return None
        self._observe(result.update_time)
        return result.update_time

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
        self._observe(commit_time)
        return True
