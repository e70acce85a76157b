"""Claim, lease, fence, complete: the one implementation of exactly-once execution.

Both the Cloud Scheduler handler and the public ``idempotent`` decorator run their work
through :class:`Idempotency.execute`.

Protocol for one run id, written against the run-store contract (:mod:`scheduler_dedup.handler.stores.base`;
each step one store call, one RPC on Firestore):

1. **Claim**: ``create()`` an ``in_progress`` record with a fresh attempt id. Exactly one of any
   number of concurrent creators wins; the rest get ``AlreadyExists``.
2. A loser **reads** the record: ``completed``/``failed`` is replayed (2 RPCs in all);
   ``in_progress`` with a live lease is answered as in progress; ``in_progress`` whose lease has
   expired (by the store's clock: last write + lease <= read time) is **taken over** with a write
   fenced on the record's commit time, so of many concurrent takers exactly one wins; ``released``
   is claimed at once by the same fenced write (a retry after a retryable failure, not a takeover).
3. While the work runs, a :class:`LeaseKeeper` renews the lease every third of it.
4. **Complete** (or record ``failed``) with a write fenced on the holder's last commit time;
   a **retryable failure** **releases** the run the same way: status ``released`` with the attempt's
   error and the tail of its output, and ``releases`` counted up, so the next delivery runs at once and
   the reason stays readable once Scheduler's retries are over. An attempt that lost its lease can
   therefore neither complete nor release a newer attempt's record.

**A write whose answer was lost is not a write that was refused.** Every conditional write (claim,
takeover, renewal, completion, failure record, release) that is refused by its precondition or ends
without an answer (the contract's :class:`~scheduler_dedup.handler.core.errors.StoreUnavailableError`: UNAVAILABLE,
DEADLINE_EXCEEDED, retries run out) may have committed. So the record is read and the attempt decides by attempt id and status: its own write in
place counts as done; a record still ``in_progress`` under its own attempt id is still its own (the write
is tried again on the record's current commit time); only another attempt id holding the run, or the
record gone, means the run was taken over (``fenced``). A release is in place once the record counts more
``releases`` than this attempt's claim found: this attempt's, or a later holder's after taking the run over
(then the run was released either way), even when another delivery has claimed the run again since. When the store stays unreachable, a
:class:`~scheduler_dedup.handler.core.errors.StoreError` says which step failed and whether the work ran.

**A claim that lands after its attempt gave up holds nothing.** A claim or takeover held in the network beyond
the store timeout can commit after its delivery answered ``store_error``. Each such write stores when its call
stops waiting (``claim_deadline``); one committed later (:func:`~scheduler_dedup.handler.core.record.claim_landed_late`)
is never run by its own attempt and counts as expired for everyone, so the next delivery claims the run at once,
without counting a takeover. Deciding from the record's own values costs no extra write. A claim that committed
in time but could not be read back (Firestore unreachable for the claim and the read after it) still holds the
run until its lease expires: only a write when the job starts could tell it apart, and that write would cost
every run.

**A run that executed is never run again because of its result.** The result is checked against
the store's limits first (:meth:`~scheduler_dedup.handler.stores.base.RunStore.result_refusal`) and stored in
the form every answer replays (:mod:`scheduler_dedup.handler.core.stored_result`); a result that does not fit is
dropped with a reason, and if the store still refuses the completion write as invalid, the run is completed
without its result.

Two process-local shortcuts spare store calls and server threads without deciding anything
the store has not: a delivery of a run that *this process* is running is answered in progress
at once (this process holds the claim, so its lease is live), and a run this process saw
completed (or skipped) is replayed from a bounded cache (such a record never changes until the
TTL policy deletes it, after the retention period; a failed one may be re-run, so it is read).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scheduler_dedup.handler.core.errors import (InvalidWriteError, NonRetryableJobError, StoreError,
                                                 StoreRefusedError, StoreUnavailableError)
from scheduler_dedup.handler.protocol.lease import LeaseKeeper, LossAction, current_lease, held_lease_fields
from scheduler_dedup.handler.core.job_traceback import job_traceback
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.downstream import DownstreamExecution, execution_name
from scheduler_dedup.handler.core.record import (CANCELLED, CLAIM_DEADLINE_FIELD, COMPLETED, FAILED, IN_PROGRESS,
                                                 RELEASED, RUNNING_DOWNSTREAM, SKIPPED_OVERLAP, TTL_FIELD, RunRecord,
                                                 claim_landed_late)
from scheduler_dedup.handler.protocol.overlap_lease import RunSkipped
from scheduler_dedup.handler.protocol.payload import FINGERPRINT_FIELD, check_payload
from scheduler_dedup.handler.core.safe_text import exception_text
from scheduler_dedup.handler.stores.base import SERVER_TIME, STORE_ERRORS, Increment, RunStore
from scheduler_dedup.handler.core.stored_result import (StoredResult, finished_value, fresh_copy, prepare_result,
                                                        replayable)

log = logging.getLogger("scheduler_dedup")

_MAX_ERROR_CHARS = 2000
#: Characters of a job's output tail stored in a record (the tail's own bound plus its "not kept" note).
_MAX_OUTPUT_CHARS = 2100
_EXITED = (" (the job raised a BaseException that is not an Exception: a job must return or raise an Exception, "
           "never exit; the run was released, so a retry runs the job again)")
_CLAIM_ROUNDS = 5
#: Writes of a holder tried per step before the store counts as unreachable (each try one read + one write).
_HOLDER_ROUNDS = 3
#: Waits between tries of a final write the store refused while the lease holds, seconds (doubling).
_REFUSED_FIRST_WAIT_SECONDS = 0.1
_REFUSED_MAX_WAIT_SECONDS = 2.0
#: How many finished runs each process remembers, to replay duplicates without an RPC.
FINISHED_CACHE_SIZE = 4096


class Outcome(str, enum.Enum):
    """What happened to one delivery."""

    PROCESSED = "processed"  #: this attempt ran the work and recorded it completed
    DUPLICATE = "duplicate"  #: the run was already completed; the work did not run
    IN_PROGRESS = "in_progress"  #: another attempt holds a live lease; the work did not run
    FAILED = "failed"  #: the run is recorded failed (non-retryable), now or before
    RELEASED = "released"  #: the work raised a retryable error; the run was released (recorded, retried at once)
    FENCED = "fenced"  #: another attempt took the run over from this one; its outcome was not recorded
    SKIPPED_OVERLAP = "skipped_overlap"  #: the work raised RunSkipped (overlap policy): recorded, never run


@dataclass(frozen=True)
class RunOutcome:
    """The result of :meth:`Idempotency.execute`.

    Attributes:
        outcome: what happened.
        run_id: the run id.
        attempt_id: this delivery's attempt id (32 hex characters).
        executed: True if this delivery ran the work.
        result: the result in its stored form (processed: what was stored; duplicate: what the record
            holds), a copy of its own; None when there is none or it was dropped.
        error: the error message (failed, released).
        exception: the exception the work raised (released, failed), for re-raising.
        retry_after_seconds: for in_progress, seconds until the other lease expires.
        took_over: True if this attempt took over a record whose lease had expired.
        result_dropped: why the result was not stored, or None.
        output: the tail of what the work wrote to stdout/stderr (failed, released), scrubbed; None if none or
            not captured.
        downstream: the downstream execution the run was forwarded to and is recorded ``running_downstream`` for
            (processed, or a duplicate of such a run), or None.
        record: the record a replay was read from (duplicate, failed), or None (the process's own cache).
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
    output: str | None = None
    downstream: str | None = None
    record: RunRecord | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class _Claim:
    update_time: datetime
    took_over: bool
    fields: dict[str, Any]  # what the claim wrote: the record's other fields, to size the completed record
    releases: int = 0  # the record's releases when claimed: a release is in place once the record counts more


@dataclass(frozen=True)
class _Finished:
    outcome: Outcome
    result: Any
    error: str | None
    result_dropped: str | None
    expires: float  # monotonic seconds
    fingerprint: str | None = None  # the payload fingerprint of the call that ran it


class Idempotency:
    """Exactly-once execution of work keyed by a run id, on one collection of a run store.

    Args:
        store: the run store.
        lease_seconds: lease length in seconds (renewed every third while work runs).
        retention_seconds: how long finished records live before the TTL policy may delete them.
        on_lease_lost: what stops the work once its lease is (about to be) lost
            (:class:`~scheduler_dedup.handler.protocol.lease.LeaseKeeper`'s ``on_lost``): the Scheduler handler ends
            its worker for a Python job; None (``idempotent``): the work must ask its lease.
    """

    def __init__(self, store: RunStore, lease_seconds: float = 300.0, retention_seconds: float = 604800.0,
                 on_lease_lost: LossAction | None = None):
        self.store = store
        self.on_lease_lost = on_lease_lost
        self.lease_seconds = lease_seconds
        self.retention_seconds = retention_seconds
        self._local_lock = threading.Lock()
        self._running: dict[str, str | None] = {}  # run id -> payload fingerprint of this process's claim
        self._finished: OrderedDict[str, _Finished] = OrderedDict()

    def execute(self, run_id: str, work: Callable[[str], Any], fields: Mapping[str, Any] | None = None,
                output: Callable[[], str] | None = None, *, fingerprint: str | None = None) -> RunOutcome:
        """Run ``work(attempt_id)`` at most once to completion for ``run_id``.

        Args:
            run_id: id of the run record (64 hex characters for runs and ``idempotent`` keys).
            work: the work; receives this delivery's attempt id and returns its result (stored in the
                form :mod:`~scheduler_dedup.handler.core.stored_result` describes). Raising
                :class:`NonRetryableJobError` records the run failed; any other ``Exception`` releases the
                run (recorded ``released`` with its error) so a retry runs it again.
            fields: extra fields stored in the record (job name, schedule time...).
            output: called once after the work failed: the tail of what it wrote (already scrubbed), stored in
                the record's ``output`` (at most :data:`_MAX_OUTPUT_CHARS` characters) and the outcome's.
            fingerprint: the payload fingerprint of this call (:mod:`~scheduler_dedup.handler.protocol.payload`),
                stored with the claim; a record holding another one refuses the call, whatever its status.

        Returns:
            A :class:`RunOutcome`. A ``BaseException`` that is not an ``Exception`` (``SystemExit``,
            ``KeyboardInterrupt``, ``GeneratorExit``) raised by the work is a retryable failure too: the run
            is released and the outcome (``released``, its ``exception`` the one raised) says a job must
            return or raise an ``Exception``, never exit; it never propagates.

        Raises:
            StoreError: the store failed or timed out; ``executed`` says whether the work ran.
            PayloadMismatchError: the record holds another payload fingerprint; nothing ran.
        """
        attempt_id = uuid.uuid4().hex
        local = self._local_outcome(run_id, attempt_id, fingerprint)
        if local is not None:
            return local
        claim_fields = {**(fields or {}), **({FINGERPRINT_FIELD: fingerprint} if fingerprint else {})}
        try:
            claim = self._claim(run_id, attempt_id, claim_fields, fingerprint)
        except STORE_ERRORS as exc:
            raise StoreError(run_id, attempt_id, "claim", False, exc) from exc
        if isinstance(claim, RunOutcome):
            self._remember(claim, fingerprint)
            return claim
        with self._local_lock:
            self._running[run_id] = fingerprint
        try:
            outcome = self._run_claimed(run_id, attempt_id, claim, work, output)
        finally:
            with self._local_lock:
                self._running.pop(run_id, None)
        self._remember(outcome, fingerprint)
        return outcome

    def _local_outcome(self, run_id: str, attempt_id: str, fingerprint: str | None) -> RunOutcome | None:
        """Answer from this process's own knowledge, without an RPC, where it is certain."""
        with self._local_lock:
            if run_id in self._running:
                check_payload(run_id, self._running[run_id], fingerprint)
                return RunOutcome(Outcome.IN_PROGRESS, run_id, attempt_id, retry_after_seconds=self.lease_seconds)
            finished = self._finished.get(run_id)
            if finished is None:
                return None
            if time.monotonic() >= finished.expires:
                del self._finished[run_id]
                return None
            check_payload(run_id, finished.fingerprint, fingerprint)
            self._finished.move_to_end(run_id)
        return RunOutcome(finished.outcome, run_id, attempt_id, result=fresh_copy(finished.result),
                          error=finished.error, result_dropped=finished.result_dropped)

    def _remember(self, outcome: RunOutcome, fingerprint: str | None) -> None:
        """Cache a final outcome, with a copy of its stored result that no caller can change."""
        # Not a failed run (nor one whose downstream execution runs, which may yet fail): `runs rerun` deletes its
        # record (fenced) to run it again, and a cached replay would answer that re-run's delivery for the retention.
        final = {Outcome.PROCESSED: Outcome.DUPLICATE, Outcome.DUPLICATE: Outcome.DUPLICATE,
                 Outcome.SKIPPED_OVERLAP: Outcome.SKIPPED_OVERLAP}.get(outcome.outcome)
        if final is None or outcome.downstream is not None:
            return
        result = fresh_copy(outcome.result) if final is Outcome.DUPLICATE else None
        if outcome.record is not None:  # a replay: the fingerprint of the call that ran it
            stored = outcome.record.data.get(FINGERPRINT_FIELD)
            fingerprint = stored if isinstance(stored, str) and stored else None
        entry = _Finished(final, result, outcome.error, outcome.result_dropped,
                          time.monotonic() + self.retention_seconds, fingerprint)
        with self._local_lock:
            self._finished[outcome.run_id] = entry
            self._finished.move_to_end(outcome.run_id)
            while len(self._finished) > FINISHED_CACHE_SIZE:
                self._finished.popitem(last=False)

    def _run_claimed(self, run_id: str, attempt_id: str, claim: _Claim, work: Callable[[str], Any],
                     output: Callable[[], str] | None) -> RunOutcome:
        """Run the claimed work and record its outcome."""
        keeper = LeaseKeeper(self.store, run_id, attempt_id, claim.update_time, self.lease_seconds,
                             self.on_lease_lost).start()
        try:
            value = _with_lease(keeper, work, attempt_id)
        except RunSkipped as exc:
            keeper.stop()
            return self._skip(run_id, attempt_id, keeper, claim, exc)
        except NonRetryableJobError as exc:
            keeper.stop()
            error, tail = _error_text(exc), _output_tail(output, exc)
            done = self._recorded(run_id, attempt_id, "record_failure", lambda: self._finish(
                run_id, attempt_id, keeper, claim, FAILED, {"error": error, "output": tail, "result": None}),
                job_error=error, output=tail)
            outcome = Outcome.FAILED if done else Outcome.FENCED
            return RunOutcome(outcome, run_id, attempt_id, executed=True, error=error, exception=exc,
                              took_over=claim.took_over, output=tail)
        except BaseException as exc:
            # An Exception is retryable. SystemExit (a click/argparse main()), KeyboardInterrupt, GeneratorExit...
            # are a job failure like any other, never a reason to let the exception reach the server (SystemExit
            # stops a gunicorn worker); the Scheduler handler records a job's SystemExit failed before it gets here.
            keeper.stop()
            error = _error_text(exc) if isinstance(exc, Exception) else \
                _error_text(exc)[:_MAX_ERROR_CHARS - len(_EXITED)] + _EXITED
            tail = _output_tail(output, exc)
            released = self._recorded(run_id, attempt_id, "release",
                                      lambda: self._release(run_id, attempt_id, keeper, claim, error, tail),
                                      job_error=error, output=tail)
            outcome = Outcome.RELEASED if released else Outcome.FENCED
            return RunOutcome(outcome, run_id, attempt_id, executed=True, error=error, exception=exc,
                              took_over=claim.took_over, output=tail)
        keeper.stop()
        stored = self._recorded(run_id, attempt_id, "complete",
                                lambda: self._complete(run_id, attempt_id, keeper, claim, value))
        if stored is None:
            return RunOutcome(Outcome.FENCED, run_id, attempt_id, executed=True, took_over=claim.took_over)
        return RunOutcome(Outcome.PROCESSED, run_id, attempt_id, executed=True, result=stored.value,
                          took_over=claim.took_over, result_dropped=stored.dropped,
                          downstream=value.name if isinstance(value, DownstreamExecution) else None)

    def _skip(self, run_id: str, attempt_id: str, keeper: LeaseKeeper, claim: _Claim, exc: RunSkipped) -> RunOutcome:
        """Record the run ``skipped_overlap`` (the work did not execute), fenced like a completion."""
        try:
            done = self._finish(run_id, attempt_id, keeper, claim, SKIPPED_OVERLAP,
                                {"error": exc.reason[:_MAX_ERROR_CHARS], "result": None})
        except STORE_ERRORS as error:
            raise StoreError(run_id, attempt_id, "record_skip", False, error) from error
        return RunOutcome(Outcome.SKIPPED_OVERLAP if done else Outcome.FENCED, run_id, attempt_id,
                          error=exc.reason, took_over=claim.took_over)

    @staticmethod
    def _recorded(run_id: str, attempt_id: str, step: str, write: Callable[[], Any], *, job_error: str | None = None,
                  output: str | None = None) -> Any:
        """Run a recording step after the work ran; the store staying unreachable becomes a :class:`StoreError`
        (carrying the work's own ``job_error`` and ``output`` that could not be recorded, if any)."""
        try:
            return write()
        except STORE_ERRORS as exc:
            raise StoreError(run_id, attempt_id, step, True, exc, job_error=job_error, output=output) from exc

    # -- claim ---------------------------------------------------------------------------------

    def _in_progress_fields(self, attempt_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        now = self.store.server_now()
        held = held_lease_fields(now, attempt_id, self.lease_seconds)
        return {
            **fields,
            **held,
            "finished_at": None,
            "result": None,
            "error": None,
            "output": None,
            "attempts": Increment(1),
            TTL_FIELD: now + timedelta(seconds=self.retention_seconds),
            # When this write's call stops waiting for its answer: a write landing later holds nothing.
            CLAIM_DEADLINE_FIELD: now + timedelta(seconds=self.store.timeout_seconds),
        }

    def _claim(self, run_id: str, attempt_id: str, fields: dict[str, Any],
               fingerprint: str | None) -> _Claim | RunOutcome:
        for _ in range(_CLAIM_ROUNDS):
            claim_fields = self._in_progress_fields(attempt_id, fields)
            unanswered: Exception | None = None
            try:
                update_time = self.store.create(run_id, claim_fields)
            except STORE_ERRORS as exc:
                update_time, unanswered = None, exc
            if update_time is not None and not _landed_late(update_time, claim_fields):
                return _Claim(update_time, False, claim_fields)
            record = self.store.get(run_id)
            if record is None:
                if unanswered is not None:
                    # The create did not get through. One that lands later holds nothing: it lands after this
                    # attempt stopped waiting, so every reader takes it over at once (RunRecord.landed_late).
                    raise unanswered
                continue  # released between our create and our read: claim again
            if _holds(record, attempt_id):
                # Our create committed in time, but its answer was lost (the retry saw AlreadyExists, or none
                # came): we hold the claim, so run the job now rather than leave a claim nobody runs.
                return _Claim(record.update_time, False, claim_fields, record.releases)
            check_payload(run_id, record.data.get(FINGERPRINT_FIELD), fingerprint)
            # A released run (its last attempt failed retryably) is claimed at once: a retry, not a takeover.
            retry = record.status == RELEASED
            if record.status != IN_PROGRESS and not retry:
                return _replay(record, attempt_id)
            remaining = 0.0 if retry else record.lease_remaining_seconds
            if remaining > 0:
                return RunOutcome(Outcome.IN_PROGRESS, run_id, attempt_id, retry_after_seconds=remaining)
            # A claim that landed after its writer gave up never ran the job: taking it over is no re-run.
            abandoned = record.landed_late
            takeover = self._in_progress_fields(attempt_id, fields)
            if abandoned:
                del takeover["attempts"]
            elif not retry:
                takeover["previous_attempt_id"] = record.attempt_id
            try:
                update_time = self.store.update_if_unchanged(run_id, takeover, record.update_time)
            except STORE_ERRORS:
                update_time = None
            if update_time is None:
                # Refused or unanswered: it may have committed with its answer lost. Look.
                after = self.store.get(run_id)
                if after is None or not _holds(after, attempt_id):
                    continue  # another delivery changed the record first, or ours landed late: look again
                update_time = after.update_time
            elif _landed_late(update_time, takeover):
                continue  # committed after we stopped waiting: it holds nothing, so look again
            if retry:
                log.info("claimed a run released after a retryable failure (%s)", record.error, extra={
                    LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id,
                    LogField.PREVIOUS_ATTEMPT_ID: record.attempt_id})
            elif abandoned:
                log.warning("claimed a run whose previous claim landed after its attempt gave up on it "
                            "(that attempt never ran the job)", extra={
                                LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id,
                                LogField.ABANDONED_ATTEMPT_ID: record.attempt_id})
            else:
                log.warning("took over a run whose lease expired", extra={
                    LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id,
                    LogField.PREVIOUS_ATTEMPT_ID: record.attempt_id})
            return _Claim(update_time, not (abandoned or retry), takeover, record.releases)
        return RunOutcome(Outcome.IN_PROGRESS, run_id, attempt_id, retry_after_seconds=1.0)

    # -- complete, record failure, release: fenced by attempt id ----------------------------------

    def _complete(self, run_id: str, attempt_id: str, keeper: LeaseKeeper, claim: _Claim,
                  value: Any) -> StoredResult | None:
        """Record the run completed with its result (``running_downstream`` when the work started a downstream
        execution it names, a ``DownstreamExecution``); returns what was stored, or None if fenced."""
        status = RUNNING_DOWNSTREAM if isinstance(value, DownstreamExecution) and value.name else COMPLETED
        finish = self._finish_fields(status, {"error": None, "output": None})
        record_fields = {**claim.fields, **finish, "result_dropped": None}
        stored = prepare_result(value, lambda form: self.store.result_refusal(form, run_id, record_fields))
        try:
            done = self._finish(run_id, attempt_id, keeper, claim, status,
                                {"error": None, "output": None, "result": stored.value,
                                 "result_dropped": stored.dropped})
        except Exception as exc:
            if stored.value is None or (isinstance(exc, STORE_ERRORS) and not isinstance(exc, InvalidWriteError)):
                raise
            # The store's check missed a rule, or the client could not encode the result: the run still
            # completes, without its result.
            stored = StoredResult(None, f"{self.store.display_name} refused the result: "
                                        f"{exception_text(exc.__cause__ or exc, _MAX_ERROR_CHARS)}")
            log.warning("completion refused as invalid; completing without the result: %s", stored.dropped,
                        extra={LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id})
            done = self._finish(run_id, attempt_id, keeper, claim, COMPLETED,  # no name kept: nothing to follow
                                {"error": None, "output": None, "result": None,
                                 "result_dropped": stored.dropped})
        if stored.dropped is not None:
            log.warning("result not stored: %s", stored.dropped,
                        extra={LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id})
        return stored if done else None

    def _finish_fields(self, status: str, fields: dict[str, Any]) -> dict[str, Any]:
        # A run forwarded downstream finishes when its execution does (protocol.downstream_outcome writes it).
        finished = {} if status == RUNNING_DOWNSTREAM else {"finished_at": SERVER_TIME}
        return {**fields, "status": status, **finished,
                TTL_FIELD: self.store.server_now() + timedelta(seconds=self.retention_seconds)}

    def _finish(self, run_id: str, attempt_id: str, keeper: LeaseKeeper, claim: _Claim, status: str,
                fields: dict[str, Any]) -> bool:
        """Write the final ``status``; True once it is in place, False if another attempt took the run over."""
        fields = self._finish_fields(status, fields)
        return self._write_as_holder(
            run_id, attempt_id, None if keeper.lost else keeper.update_time,
            write=lambda update_time: self.store.update_if_unchanged(run_id, fields, update_time) is not None,
            in_place=lambda record: record is not None and record.attempt_id == attempt_id
            and record.status == status,
            step=status, keeper=keeper)

    def _release(self, run_id: str, attempt_id: str, keeper: LeaseKeeper, claim: _Claim, error: str,
                 output: str | None) -> bool:
        """Record the run ``released`` with the attempt's ``error`` and ``output``, counting it in ``releases``;
        True once in place, False if another attempt took the run over.

        In place means the record counts more releases than this attempt's claim found. The release is this
        attempt's (its answer lost, and perhaps the run claimed again since), or a later holder's after taking
        the run over from this one: either way the run was released and Scheduler's retry runs it. Only a
        holder writes ``released``, fenced on its version, so no release lands on a newer attempt's claim.
        """
        fields = self._finish_fields(RELEASED, {"error": error, "output": output, "result": None,
                                                "releases": Increment(1)})
        return self._write_as_holder(
            run_id, attempt_id, None if keeper.lost else keeper.update_time,
            write=lambda update_time: self.store.update_if_unchanged(run_id, fields, update_time) is not None,
            in_place=lambda record: record is not None and record.releases > claim.releases,
            step="release")

    def _write_as_holder(self, run_id: str, attempt_id: str, update_time: datetime | None,
                         write: Callable[[datetime], bool], in_place: Callable[[RunRecord | None], bool],
                         step: str, keeper: LeaseKeeper | None = None) -> bool:
        """Write as the holder of the run, fenced on ``update_time``; decide a refusal or silence by reading.

        Returns True when the write is in place (now, or on an earlier try whose answer was lost), False
        when another attempt id holds the run or the record is gone without this write in place.

        A write the store refused (:class:`StoreRefusedError`: nothing was written, e.g. a full Redis) while the
        record is still this attempt's is never taken as done: with ``keeper`` (the outcome of a job that ran), it
        is tried again with backoff for as long as the lease holds, renewing it between tries, since the run
        would otherwise be run again once the lease lapses; each try fenced on the record's current version.

        Raises:
            StoreUnavailableError, StoreRefusedError: the store stayed unreachable for :data:`_HOLDER_ROUNDS`
                tries, or refused.
            InvalidWriteError: the write itself is invalid (nothing committed).
        """
        extra: dict[str, object] = {LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id, LogField.STEP: step}
        last_error: Exception | None = None
        invalid: InvalidWriteError | None = None
        rounds = 0
        backoff = _REFUSED_FIRST_WAIT_SECONDS
        while rounds < _HOLDER_ROUNDS:
            rounds += 1
            refused = False
            if update_time is not None:
                try:
                    if write(update_time):
                        return True
                    last_error = None
                except InvalidWriteError as exc:
                    if not exc.sent:
                        raise  # refused by the client before sending: nothing can be in place
                    invalid = exc  # definitive unless a retried try of this write is in place: look first
                except StoreRefusedError as exc:
                    last_error, refused = exc, True
                except STORE_ERRORS as exc:
                    last_error = exc
            try:
                record = self.store.get(run_id)
            except STORE_ERRORS as exc:
                last_error = exc
                continue
            if in_place(record):
                log.info("%s: this attempt's write is in place (its answer was lost)", step, extra=extra)
                return True
            if record is not None and record.held_by(attempt_id):
                if invalid is not None:
                    raise invalid
                update_time = record.update_time  # still ours: write on its current commit time
                if refused and keeper is not None and not keeper.lost:
                    remaining = keeper.remaining_seconds()
                    if remaining > backoff:
                        if backoff == _REFUSED_FIRST_WAIT_SECONDS:
                            log.warning("%s refused by the store (%s); the record is still this attempt's, trying again "
                                    "within the %.1f s left of the lease", step, last_error, remaining,
                                        extra=extra)
                        if keeper.renew():
                            update_time = keeper.update_time
                        time.sleep(min(backoff, keeper.remaining_seconds() / 4) if keeper.holds() else backoff)
                        backoff = min(backoff * 2, _REFUSED_MAX_WAIT_SECONDS)
                        rounds -= 1  # a refusal within the lease uses up no round
                continue
            if record is None:
                log.warning("fenced: the run record is gone (another attempt took the run over and released it); "
                            "not writing %s", step, extra=extra)
            else:
                log.warning("fenced: attempt %s holds the run (%s); not writing %s", record.attempt_id, record.status,
                            step, extra={**extra, LogField.HOLDER_ATTEMPT_ID: record.attempt_id})
            return False
        if last_error is not None:
            raise last_error
        raise StoreUnavailableError(f"{step}: the record kept changing under this attempt's id; nothing decided",
                                    store=self.store.display_name)


def _with_lease(keeper: LeaseKeeper, work: Callable[[str], Any], attempt_id: str) -> Any:
    """``work(attempt_id)`` with ``keeper`` as the lease of this context (what ``ScheduledRun.lease_holds`` asks)."""
    token = current_lease.set(keeper)
    try:
        return finished_value(work(attempt_id))
    finally:
        current_lease.reset(token)


def _holds(record: RunRecord, attempt_id: str) -> bool:
    """True if ``attempt_id`` holds the run by a claim that landed while it was still waiting for it."""
    return record.held_by(attempt_id) and not record.landed_late


def _landed_late(update_time: datetime, written: Mapping[str, Any]) -> bool:
    """The rule of :func:`claim_landed_late` applied to a claim or takeover this attempt wrote itself."""
    deadline = written.get(CLAIM_DEADLINE_FIELD)
    return claim_landed_late(update_time, deadline if isinstance(deadline, datetime) else None)


def _replay(record: RunRecord, attempt_id: str) -> RunOutcome:
    if record.status in (COMPLETED, RUNNING_DOWNSTREAM, CANCELLED):
        # The run was started (and its execution perhaps ended, or was cancelled): no delivery starts it again.
        stored = replayable(record.result)
        running = execution_name(record.result) if record.status == RUNNING_DOWNSTREAM else None
        return RunOutcome(Outcome.DUPLICATE, record.run_id, attempt_id, result=stored.value,
                          result_dropped=record.result_dropped or stored.dropped, downstream=running,
                          record=record)
    if record.status == FAILED:
        return RunOutcome(Outcome.FAILED, record.run_id, attempt_id, error=record.error, output=record.output,
                          record=record)
    if record.status == SKIPPED_OVERLAP:
        return RunOutcome(Outcome.SKIPPED_OVERLAP, record.run_id, attempt_id, error=record.error)
    raise ValueError(f"run record {record.run_id} has unknown status {record.status!r}")


def _error_text(exc: BaseException) -> str:
    return exception_text(exc, _MAX_ERROR_CHARS)


def _output_tail(output: Callable[[], str] | None, exc: BaseException) -> str | None:
    """The work's output tail as stored (the last :data:`_MAX_OUTPUT_CHARS` characters), ending with ``exc``'s
    traceback as a failing script's stderr would (:func:`~scheduler_dedup.handler.core.job_traceback.job_traceback`:
    scrubbed, the job's frames first, bounded); a failure to read the output is no output (the outcome is recorded
    all the same)."""
    text = ""
    try:
        text = output()[-_MAX_OUTPUT_CHARS:] if output is not None else ""
    except Exception:  # noqa: BLE001 - the tail is a courtesy; recording the outcome must not depend on it
        log.exception("could not read the job's output tail")
    return (text + ("\n" if text and not text.endswith("\n") else "") + job_traceback(exc)) or None
