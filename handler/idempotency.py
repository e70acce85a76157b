"""Claim, lease, fence, complete: the one implementation of exactly-once execution.

Both the Cloud Scheduler handler and the public ``idempotent`` decorator run their work
through :class:`Idempotency.execute`.

Protocol for one run id (each step one Firestore RPC):

1. **Claim**: ``create()`` an ``in_progress`` record with a fresh attempt id. Exactly one of any
   number of concurrent creators wins; the rest get ``AlreadyExists``.
2. A loser **reads** the record: ``completed``/``failed`` is replayed (2 RPCs in all);
   ``in_progress`` with a live lease is answered as in progress; ``in_progress`` whose lease has
   expired (by Firestore's clock: last write + lease <= read time) is **taken over** with a write
   fenced on the record's commit time, so of many concurrent takers exactly one wins.
3. While the work runs, a :class:`LeaseKeeper` renews the lease every third of it.
4. **Complete** (or record ``failed``) with a write fenced on the holder's last commit time;
   a **retryable failure** deletes the record the same way, so the next delivery runs at once.
   If the fast fence fails (for instance a renewal's response was lost), the record is read and
   the write retried only if this attempt id still holds it. An attempt that lost its lease can
   therefore neither complete nor delete a newer attempt's record.

Two process-local shortcuts spare Firestore RPCs and server threads without deciding anything
Firestore has not: a delivery of a run that *this process* is running is answered in progress
at once (this process holds the claim, so its lease is live), and a run this process saw
completed or failed is replayed from a bounded cache (a finished record never changes until the
TTL policy deletes it, after the retention period).
"""

from __future__ import annotations

import enum
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from google.cloud import firestore

from scheduler_dedup.handler.errors import NonRetryableJobError
from scheduler_dedup.handler.lease import LeaseKeeper
from scheduler_dedup.handler.record import COMPLETED, FAILED, IN_PROGRESS, TTL_FIELD, RunRecord
from scheduler_dedup.handler.store import FirestoreRunStore

log = logging.getLogger("scheduler_dedup")

#: Largest stored result, in bytes of JSON (a Firestore document holds at most 1 MiB:
#: https://firebase.google.com/docs/firestore/quotas#collections_documents_and_fields).
MAX_RESULT_BYTES = 512 * 1024
_MAX_ERROR_CHARS = 2000
_CLAIM_ROUNDS = 5
#: How many finished runs each process remembers, to replay duplicates without an RPC.
FINISHED_CACHE_SIZE = 4096


class Outcome(str, enum.Enum):
    """What happened to one delivery."""

    PROCESSED = "processed"  #: this attempt ran the work and recorded it completed
    DUPLICATE = "duplicate"  #: the run was already completed; the work did not run
    IN_PROGRESS = "in_progress"  #: another attempt holds a live lease; the work did not run
    FAILED = "failed"  #: the run is recorded failed (non-retryable), now or before
    RELEASED = "released"  #: the work raised a retryable error; the claim was released
    FENCED = "fenced"  #: this attempt lost its lease; its completion or release was refused


@dataclass(frozen=True)
class RunOutcome:
    """The result of :meth:`Idempotency.execute`.

    Attributes:
        outcome: what happened.
        run_id: the run id.
        attempt_id: this delivery's attempt id (32 hex characters).
        executed: True if this delivery ran the work.
        result: the work's result (processed) or the stored one (duplicate).
        error: the error message (failed, released).
        exception: the exception the work raised (released, failed), for re-raising.
        retry_after_seconds: for in_progress, seconds until the other lease expires.
        took_over: True if this attempt took over a record whose lease had expired.
        result_dropped: why the result was not stored (too large, not JSON), or None.
    """

    outcome: Outcome
    run_id: str
    attempt_id: str
    executed: bool = False
    result: Any = None
    error: str | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    retry_after_seconds: float | None = None
    took_over: bool = False
    result_dropped: str | None = None


@dataclass(frozen=True)
class _Claim:
    update_time: Any
    took_over: bool


class Idempotency:
    """Exactly-once execution of work keyed by a run id, on one Firestore collection.

    Args:
        store: the run store.
        lease_seconds: lease length in seconds (renewed every third while work runs).
        retention_seconds: how long finished records live before the TTL policy may delete them.
    """

    def __init__(self, store: FirestoreRunStore, lease_seconds: float = 300.0, retention_seconds: float = 604800.0):
        self.store = store
        self.lease_seconds = lease_seconds
        self.retention_seconds = retention_seconds
        self._local_lock = threading.Lock()
        self._running: dict[str, float] = {}  # run id -> monotonic time of this process's claim
        self._finished: OrderedDict[str, tuple[Outcome, Any, str | None, float]] = OrderedDict()

    def execute(self, run_id: str, work: Callable[[str], Any], fields: Mapping[str, Any] | None = None) -> RunOutcome:
        """Run ``work(attempt_id)`` at most once to completion for ``run_id``.

        Args:
            run_id: document id of the run record (at most 1500 bytes, no '/').
            work: the work; receives this delivery's attempt id and returns a JSON-serialisable
                result or None. Raising :class:`NonRetryableJobError` records the run failed;
                any other ``Exception`` releases the claim so a retry runs it again.
            fields: extra fields stored in the record (job name, schedule time...).

        Returns:
            A :class:`RunOutcome`. Only a ``BaseException`` that is not an ``Exception``
            (e.g. ``KeyboardInterrupt``) propagates, after the claim is released.

        Raises:
            google.api_core.exceptions.GoogleAPICallError: Firestore failed while claiming.
        """
        attempt_id = uuid.uuid4().hex
        local = self._local_outcome(run_id, attempt_id)
        if local is not None:
            return local
        claim = self._claim(run_id, attempt_id, dict(fields or {}))
        if isinstance(claim, RunOutcome):
            self._remember(claim, claim.result)  # replayed from the store: already in stored form
            return claim
        with self._local_lock:
            self._running[run_id] = time.monotonic()
        try:
            outcome, stored = self._run_claimed(run_id, attempt_id, claim, work)
        finally:
            with self._local_lock:
                self._running.pop(run_id, None)
        self._remember(outcome, stored)
        return outcome

    def _local_outcome(self, run_id: str, attempt_id: str) -> RunOutcome | None:
        """Answer from this process's own knowledge, without an RPC, where it is certain."""
        with self._local_lock:
            claimed = self._running.get(run_id)
            if claimed is not None:
                return RunOutcome(Outcome.IN_PROGRESS, run_id, attempt_id, retry_after_seconds=self.lease_seconds)
            finished = self._finished.get(run_id)
            if finished is None:
                return None
            outcome, result, error, expires = finished
            if time.monotonic() >= expires:
                del self._finished[run_id]
                return None
            self._finished.move_to_end(run_id)
        return RunOutcome(outcome, run_id, attempt_id, result=result, error=error)

    def _remember(self, outcome: RunOutcome, stored_result: Any) -> None:
        """Cache a final outcome; ``stored_result`` is the result as Firestore holds it (what duplicates replay)."""
        final = {Outcome.PROCESSED: Outcome.DUPLICATE, Outcome.DUPLICATE: Outcome.DUPLICATE,
                 Outcome.FAILED: Outcome.FAILED}.get(outcome.outcome)
        if final is None:
            return
        result = stored_result if final is Outcome.DUPLICATE else None
        with self._local_lock:
            self._finished[outcome.run_id] = (final, result, outcome.error,
                                              time.monotonic() + self.retention_seconds)
            self._finished.move_to_end(outcome.run_id)
            while len(self._finished) > FINISHED_CACHE_SIZE:
                self._finished.popitem(last=False)

    def _run_claimed(self, run_id: str, attempt_id: str, claim: _Claim,
                     work: Callable[[str], Any]) -> tuple[RunOutcome, Any]:
        """Run the claimed work; returns the outcome and the result as stored (None unless completed)."""
        keeper = LeaseKeeper(self.store, run_id, attempt_id, claim.update_time, self.lease_seconds).start()
        try:
            value = work(attempt_id)
        except NonRetryableJobError as exc:
            keeper.stop()
            error = _error_text(exc)
            done = self._finish(run_id, attempt_id, keeper, {"status": FAILED, "error": error, "result": None})
            outcome = Outcome.FAILED if done else Outcome.FENCED
            return RunOutcome(outcome, run_id, attempt_id, executed=True, error=error, exception=exc,
                              took_over=claim.took_over), None
        except Exception as exc:
            keeper.stop()
            released = self._release(run_id, attempt_id, keeper)
            outcome = Outcome.RELEASED if released else Outcome.FENCED
            return RunOutcome(outcome, run_id, attempt_id, executed=True, error=_error_text(exc), exception=exc,
                              took_over=claim.took_over), None
        except BaseException:
            keeper.stop()
            self._release(run_id, attempt_id, keeper)
            raise
        keeper.stop()
        stored, dropped = _storable(value)
        done = self._finish(run_id, attempt_id, keeper, {"status": COMPLETED, "result": stored, "error": None,
                                                          "result_dropped": dropped})
        return RunOutcome(Outcome.PROCESSED if done else Outcome.FENCED, run_id, attempt_id, executed=True,
                          result=value, took_over=claim.took_over, result_dropped=dropped), stored

    # -- claim ---------------------------------------------------------------------------------

    def _in_progress_fields(self, attempt_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        now = self.store.server_now()
        return {
            **fields,
            "status": IN_PROGRESS,
            "attempt_id": attempt_id,
            "lease_seconds": self.lease_seconds,
            "lease_expires": now + timedelta(seconds=self.lease_seconds),
            "claimed_at": firestore.SERVER_TIMESTAMP,
            "heartbeat_at": firestore.SERVER_TIMESTAMP,
            "finished_at": None,
            "result": None,
            "error": None,
            "attempts": firestore.Increment(1),
            TTL_FIELD: now + timedelta(seconds=self.retention_seconds),
        }

    def _claim(self, run_id: str, attempt_id: str, fields: dict[str, Any]) -> _Claim | RunOutcome:
        for _ in range(_CLAIM_ROUNDS):
            update_time = self.store.create(run_id, self._in_progress_fields(attempt_id, fields))
            if update_time is not None:
                return _Claim(update_time, took_over=False)
            record = self.store.get(run_id)
            if record is None:
                continue  # released between our create and our read: claim again
            if record.status == IN_PROGRESS and record.attempt_id == attempt_id:
                # Our create committed, but its answer was lost and the retry saw AlreadyExists.
                return _Claim(record.update_time, took_over=False)
            if record.status != IN_PROGRESS:
                return _replay(record, attempt_id)
            remaining = record.lease_remaining_seconds
            if remaining > 0:
                return RunOutcome(Outcome.IN_PROGRESS, run_id, attempt_id, retry_after_seconds=remaining)
            takeover = {**self._in_progress_fields(attempt_id, fields), "previous_attempt_id": record.attempt_id}
            update_time = self.store.update_if_unchanged(run_id, takeover, record.update_time)
            if update_time is not None:
                log.warning("took over a run whose lease expired", extra={
                    "run_id": run_id, "attempt_id": attempt_id, "previous_attempt_id": record.attempt_id})
                return _Claim(update_time, took_over=True)
            # Another delivery changed the record first: look again.
        return RunOutcome(Outcome.IN_PROGRESS, run_id, attempt_id, retry_after_seconds=1.0)

    # -- finish and release, fenced by attempt id ------------------------------------------------

    def _finish(self, run_id: str, attempt_id: str, keeper: LeaseKeeper, fields: dict[str, Any]) -> bool:
        fields = {**fields, "finished_at": firestore.SERVER_TIMESTAMP,
                  TTL_FIELD: self.store.server_now() + timedelta(seconds=self.retention_seconds)}
        if not keeper.lost and self.store.update_if_unchanged(run_id, fields, keeper.update_time) is not None:
            return True
        return self._fenced_retry(run_id, attempt_id,
                                  lambda rec: self.store.update_if_unchanged(run_id, fields, rec.update_time) is not None)

    def _release(self, run_id: str, attempt_id: str, keeper: LeaseKeeper) -> bool:
        if not keeper.lost and self.store.delete_if_unchanged(run_id, keeper.update_time):
            return True
        if self._fenced_retry(run_id, attempt_id, lambda rec: self.store.delete_if_unchanged(run_id, rec.update_time)):
            return True
        # Gone already: our delete committed on a retried try whose answer was lost. Only the
        # holder deletes an in-progress record (TTL expiry is far beyond any lease), so it was ours.
        return self.store.get(run_id) is None

    def _fenced_retry(self, run_id: str, attempt_id: str, write: Callable[[RunRecord], bool]) -> bool:
        """Slow path: write only if ``attempt_id`` still holds the run (the fencing check)."""
        for _ in range(3):
            record = self.store.held_by(run_id, attempt_id)
            if record is None:
                log.warning("fenced: a newer attempt holds this run; not writing",
                            extra={"run_id": run_id, "attempt_id": attempt_id})
                return False
            if write(record):
                return True
        return False


def _replay(record: RunRecord, attempt_id: str) -> RunOutcome:
    if record.status == COMPLETED:
        return RunOutcome(Outcome.DUPLICATE, record.run_id, attempt_id, result=record.result)
    if record.status == FAILED:
        return RunOutcome(Outcome.FAILED, record.run_id, attempt_id, error=record.error)
    raise ValueError(f"run record {record.run_id} has unknown status {record.status!r}")


def _storable(value: Any) -> tuple[Any, str | None]:
    """The result as Firestore stores it (JSON values), or None and why it was dropped."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return None, f"result is not JSON-serialisable: {exc}"
    if len(text.encode()) > MAX_RESULT_BYTES:
        return None, f"result is {len(text.encode())} bytes of JSON, over the {MAX_RESULT_BYTES}-byte limit"
    return json.loads(text), None


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS]
