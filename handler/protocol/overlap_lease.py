"""A job's overlap policy: at most one run of a job executes at once (``skip``, ``buffer_one``), across instances.

Cloud Scheduler keeps one execution of a job outstanding, but it stops waiting at the attempt deadline while the
handler goes on running the job, so a job slower than its interval runs beside the next fire time (and a backfill
or a forced run beside a scheduled one). Policies (``DEDUP_OVERLAP``), after the run's own claim is won:

* ``allow``: no job lease; runs of one job may execute at once (each still runs once).
* ``skip``: the run takes the job's *overlap lease*; if another run of the job holds it live, the run is recorded
  ``skipped_overlap`` (final, answered 200) and does not execute.
* ``buffer_one``: as ``skip``, but the first run to find the lease held becomes the job's one *waiter* (a second
  record, taken the same way) and executes once the lease is free; a run finding a waiter too is skipped.
* ``replace``: the run cancels the downstream execution of the run holding the lease, records that run
  ``cancelled``, and executes (proxy targets only: a python job cannot be cancelled, :func:`replace_problem`).

**A run forwarded downstream holds the lease until its execution ends.** Its holder turns the lease record into a
pointer (status ``running_downstream``, the holder's run id and execution) instead of deleting it; a later run
finding it asks :func:`~scheduler_dedup.handler.protocol.downstream_outcome.still_executing` (the run record, then
the execution's API), and takes the lease over once the execution has ended.

**The lease is a record of the run store**, keyed by the job (:func:`lease_id`: SHA-256 of project, location and
job id, so it has a run id's form), written only through the store contract (put-if-absent, writes fenced on the
record's version, the store's clock): every store gets it with no code of its own. It is fenced exactly like a
run's lease: ``in_progress`` under the holder's attempt id, renewed every third of ``lease_seconds`` by a
:class:`~scheduler_dedup.handler.protocol.lease.LeaseKeeper`, taken over only once expired by the store's clock
(or at once when the claim landed after its writer gave up, :func:`~scheduler_dedup.handler.core.record.claim_landed_late`,
or when it is held by an earlier attempt of the same run, whose run lease the caller has already taken over), and
deleted fenced on the holder's last write. It has no ``schedule_time``, so run history never lists it.

**Where it cannot hold.** Like the run lease: a holder paused longer than the lease (two renewals lost in a row,
a stopped process) loses it while its job still runs, and the next run executes beside it; a Redis failover that
loses the lease's last write (asynchronous replication) lets a second run take it. A release that never reaches
the store leaves the lease to expire: runs in between are skipped, never run beside it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from scheduler_dedup.handler.core.downstream import DownstreamExecution, ExecutionControl
from scheduler_dedup.handler.core.errors import StoreUnavailableError
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.record import (CLAIM_DEADLINE_FIELD, IN_PROGRESS, RUNNING_DOWNSTREAM, TTL_FIELD,
                                                 RunRecord, claim_landed_late)
from scheduler_dedup.handler.protocol.downstream_outcome import cancel_execution, still_executing
from scheduler_dedup.handler.protocol.lease import LeaseKeeper, LossAction, held_lease_fields
from scheduler_dedup.handler.schedule.overlap_policy import ALLOW, REPLACE, SKIP, overlap_policy_problem
from scheduler_dedup.handler.stores.base import STORE_ERRORS, RunStore

log = logging.getLogger("scheduler_dedup")

#: Field of a lease record naming its holder: ``{"run_id": ..., "schedule_time": RFC 3339, "job": ...}`` (stored in
#: the record's JSON ``result`` field, a field every store already has).
HOLDER_FIELD = "result"
_ROUNDS = 5
_RELEASE_ROUNDS = 3
#: How often a run held back by a downstream execution asks its API again, seconds (a ``buffer_one`` waiter's
#: poll; ``replace`` waiting for a holder still starting its execution).
DOWNSTREAM_POLL_SECONDS = 5.0

T = TypeVar("T")


class RunSkipped(Exception):
    """Raised inside a run's work when it must not execute: the run is recorded ``skipped_overlap``.

    Attributes:
        reason: a sentence naming the run that holds the job (stored as the record's ``error``).
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ReplaceUnfinished(RuntimeError):
    """``replace`` could not end the run holding the job (its cancel or read got no useful answer, or it kept
    starting): this run is released, and Scheduler's retry tries again; nothing was started beside it."""


@dataclass(frozen=True)
class _Busy:
    holder_run_id: str
    holder_schedule_time: str
    remaining_seconds: float
    downstream: RunRecord | None = None  # the holder's run record while its downstream execution runs


def lease_id(project: str, location: str, job_name: str, role: str = "lease") -> str:
    """The record id of a job's overlap lease (``role="lease"``) or of its one waiter (``role="waiter"``).

    Returns:
        64 lower-case hex characters (SHA-256), the form of a run id, never equal to one (another prefix).
    """
    canonical = "\x1f".join(("scheduler-dedup/v1", f"overlap-{role}", project, location, job_name))
    return hashlib.sha256(canonical.encode()).hexdigest()


class OverlapGuard:
    """Runs a claimed run's work under the job's overlap policy.

    Args:
        store: the run store (the lease records live in its collection).
        policy: one of :data:`OVERLAP_POLICIES`.
        lease_seconds: the overlap lease's length, seconds (the handler's ``DEDUP_LEASE_SECONDS``).
        poll_seconds: how often a ``buffer_one`` waiter looks at the lease, seconds.
        downstream: reads and cancels the proxy target's executions, or None (a python job).
        retention_seconds: how long a settled run's record lives (``DEDUP_RETENTION_SECONDS``).
        on_lease_lost: what stops the job once the overlap lease it runs under is (about to be) lost
            (:class:`~scheduler_dedup.handler.protocol.lease.LeaseKeeper`'s ``on_lost``); None: nothing.
    """

    def __init__(self, store: RunStore, policy: str, lease_seconds: float, poll_seconds: float = 0.25,
                 downstream: ExecutionControl | None = None, retention_seconds: float = 604800.0,
                 on_lease_lost: LossAction | None = None):
        problem = overlap_policy_problem(policy)
        if problem:
            raise ValueError(problem)
        if policy == REPLACE and downstream is None:
            raise ValueError("overlap policy replace needs a proxy target whose executions can be cancelled")
        self.store = store
        self.policy = policy
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.downstream = downstream
        self.retention_seconds = retention_seconds
        self.on_lease_lost = on_lease_lost

    def run(self, *, project: str, location: str, job_name: str, run_id: str, schedule_time: str,
            attempt_id: str, work: Callable[[], T]) -> T:
        """Run ``work()`` once the job's overlap lease is this attempt's (at once under ``allow``).

        Raises:
            RunSkipped: another run of the job holds the lease (``skip``), or holds it with a waiter already
                (``buffer_one``); ``work`` did not run.
            ReplaceUnfinished: ``replace`` could not end the holder; ``work`` did not run.
            StoreUnavailableError, StoreRefusedError: the lease could not be taken or read; ``work`` did not run.
            Whatever ``work`` raises, after the lease was released.
        """
        if self.policy == ALLOW:
            return work()
        holder = {"run_id": run_id, "schedule_time": schedule_time, "job": job_name}
        lease = lease_id(project, location, job_name)
        taken = self._acquire(lease, run_id, attempt_id, holder)
        if isinstance(taken, _Busy):
            if self.policy == SKIP:
                raise RunSkipped(_busy_reason(taken, "skip"))
            if self.policy == REPLACE:
                taken = self._replace(lease, run_id, attempt_id, holder, taken)
            else:
                taken = self._wait_as_waiter(lease_id(project, location, job_name, "waiter"), lease, run_id,
                                             attempt_id, holder, taken)
        keeper = LeaseKeeper(self.store, lease, attempt_id, taken, self.lease_seconds, self.on_lease_lost).start()
        value: Any = None
        try:
            value = work()
            return value
        finally:
            keeper.stop()
            if keeper.lost:
                log.error("overlap lease lost while the job ran: another run of the job may have executed beside "
                          "this one", extra={LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id})
            if not (isinstance(value, DownstreamExecution) and value.name
                    and self._point_at(lease, attempt_id, keeper, {**holder, "execution": value.name})):
                self._release(lease, attempt_id, keeper)

    def _point_at(self, record_id: str, attempt_id: str, keeper: LeaseKeeper, holder: dict[str, Any]) -> bool:
        """Keep the lease for a run whose downstream execution runs on: status ``running_downstream`` naming it,
        fenced on this attempt's last write. True once in place; False (never raises) if it could not be written,
        and the caller deletes the lease instead (the next run then does not see the execution)."""
        fields = {"status": RUNNING_DOWNSTREAM, HOLDER_FIELD: holder,
                  TTL_FIELD: self.store.server_now() + timedelta(seconds=self.retention_seconds)}
        if keeper.lost:
            return False
        try:
            if self.store.update_if_unchanged(record_id, fields, keeper.update_time) is not None:
                return True
        except STORE_ERRORS:
            pass
        try:
            record = self.store.get(record_id)
        except STORE_ERRORS:
            record = None
        placed = (record is not None and record.attempt_id == attempt_id and record.status == RUNNING_DOWNSTREAM)
        if not placed:
            log.warning("overlap lease not kept for the downstream execution %s: the next run does not see it",
                        holder.get("execution"), extra={LogField.ATTEMPT_ID: attempt_id})
        return placed

    def _replace(self, lease: str, run_id: str, attempt_id: str, holder: dict[str, Any], busy: _Busy) -> datetime:
        """``replace``: cancel the holder's downstream execution, record its run cancelled, take the lease. A holder
        still starting its execution (``in_progress``) is waited for, up to one lease length."""
        assert self.downstream is not None
        deadline = time.monotonic() + self.lease_seconds
        while True:
            if busy.downstream is not None and busy.downstream.status == RUNNING_DOWNSTREAM:
                if not cancel_execution(self.store, self.downstream, busy.downstream, self.retention_seconds):
                    raise ReplaceUnfinished(f"overlap policy replace: the downstream execution of run "
                                            f"{busy.holder_run_id} could not be cancelled (its API gave no useful "
                                            "answer); this run was released and Scheduler's retry tries again")
                log.warning("overlap policy replace: cancelled the downstream execution of run %s",
                            busy.holder_run_id, extra={LogField.RUN_ID: run_id, LogField.ATTEMPT_ID: attempt_id})
            elif time.monotonic() >= deadline:
                raise ReplaceUnfinished(f"overlap policy replace: run {busy.holder_run_id} was still starting its "
                                        f"execution after {self.lease_seconds:g} s; this run was released")
            else:
                time.sleep(min(DOWNSTREAM_POLL_SECONDS, self.poll_seconds * 4))
            got = self._acquire(lease, run_id, attempt_id, holder)
            if not isinstance(got, _Busy):
                return got
            busy = got

    # -- taking a lease record ------------------------------------------------------------------

    def _fields(self, attempt_id: str, holder: dict[str, Any]) -> dict[str, Any]:
        now = self.store.server_now()
        held = held_lease_fields(now, attempt_id, self.lease_seconds)
        return {
            **held,
            HOLDER_FIELD: holder,
            # The TTL policy removes a lease whose holder vanished and that no run took over since.
            TTL_FIELD: now + timedelta(seconds=max(self.lease_seconds * 4, 86400)),
            CLAIM_DEADLINE_FIELD: now + timedelta(seconds=self.store.timeout_seconds),
        }

    def _acquire(self, record_id: str, run_id: str, attempt_id: str,
                 holder: dict[str, Any]) -> datetime | _Busy:
        """Take the lease record ``record_id``: its version once it is this attempt's, or who holds it live.

        A write refused or left unanswered may have committed: the record is read and decided by attempt id.
        """
        for _ in range(_ROUNDS):
            fields = self._fields(attempt_id, holder)
            unanswered: Exception | None = None
            try:
                created = self.store.create(record_id, fields)
            except STORE_ERRORS as exc:
                created, unanswered = None, exc
            if created is not None and not _late(created, fields):
                return created
            record = self.store.get(record_id)
            if record is None:
                if unanswered is not None:
                    raise unanswered
                continue  # released between our create and our read
            if _holds(record, attempt_id):
                return record.update_time
            busy = self._busy(record, run_id)
            if busy is not None:
                return busy
            try:
                written = self.store.update_if_unchanged(record_id, fields, record.update_time)
            except STORE_ERRORS:
                written = None
            if written is not None and not _late(written, fields):
                log.warning("took over the overlap lease of run %s (expired or of an earlier attempt of this run)",
                            _holder(record).get("run_id"), extra={LogField.RUN_ID: run_id,
                                                                 LogField.ATTEMPT_ID: attempt_id,
                                                                 LogField.PREVIOUS_ATTEMPT_ID: record.attempt_id})
                return written
            if written is None:
                after = self.store.get(record_id)
                if after is not None and _holds(after, attempt_id):
                    return after.update_time
        raise StoreUnavailableError(f"overlap lease {record_id}: the record kept changing; nothing decided",
                                    store=self.store.display_name)

    def _wait_as_waiter(self, waiter: str, lease: str, run_id: str, attempt_id: str, holder: dict[str, Any],
                        busy: _Busy) -> datetime:
        """``buffer_one``: become the job's one waiter, then wait for the lease and take it."""
        taken = self._acquire(waiter, run_id, attempt_id, holder)
        if isinstance(taken, _Busy):
            raise RunSkipped(_busy_reason(busy, "buffer_one", waiting=taken))
        keeper = LeaseKeeper(self.store, waiter, attempt_id, taken, self.lease_seconds).start()
        try:
            while True:
                if keeper.lost:
                    raise RunSkipped(f"this run lost its place as the job's waiter while run {busy.holder_run_id} "
                                     "executed (its waiter lease lapsed)")
                time.sleep(max(self.poll_seconds, DOWNSTREAM_POLL_SECONDS) if busy.downstream is not None else
                           min(self.poll_seconds, max(0.01, busy.remaining_seconds)))
                got = self._acquire(lease, run_id, attempt_id, holder)
                if not isinstance(got, _Busy):
                    return got
                busy = got
        finally:
            keeper.stop()
            self._release(waiter, attempt_id, keeper)

    def _busy(self, record: RunRecord, run_id: str) -> _Busy | None:
        """Who holds the lease record, or None when it may be taken (expired, landed late, not in progress, held by
        an earlier attempt of this same run, whose run lease the caller holds now, or pointing at a run whose
        downstream execution has ended)."""
        holder = _holder(record)
        if holder.get("run_id") == run_id:
            return None
        if record.status == RUNNING_DOWNSTREAM:
            running = still_executing(self.store, self.downstream, str(holder.get("run_id", "")),
                                      self.retention_seconds)
            if running is None:
                return None
            return _Busy(str(holder.get("run_id", "?")), str(holder.get("schedule_time", "?")),
                         DOWNSTREAM_POLL_SECONDS, running)
        if record.status != IN_PROGRESS:
            return None
        remaining = record.lease_remaining_seconds
        if remaining <= 0:
            return None
        return _Busy(str(holder.get("run_id", "?")), str(holder.get("schedule_time", "?")), remaining)

    def _release(self, record_id: str, attempt_id: str, keeper: LeaseKeeper) -> None:
        """Delete the lease record fenced on this attempt's last write; never raises (it expires by itself)."""
        update_time = keeper.update_time
        for _ in range(_RELEASE_ROUNDS):
            try:
                if self.store.delete_if_unchanged(record_id, update_time):
                    return
            except STORE_ERRORS:
                pass
            try:
                record = self.store.get(record_id)
            except STORE_ERRORS:
                continue
            if record is None or not record.held_by(attempt_id):
                return  # our delete landed with its answer lost, or another run holds it now
            update_time = record.update_time
        log.warning("overlap lease not released (the store did not answer); it expires %g s after its last renewal, "
                    "and runs due before then are skipped", self.lease_seconds,
                    extra={LogField.ATTEMPT_ID: attempt_id})


def _holder(record: RunRecord) -> dict[str, Any]:
    value = record.data.get(HOLDER_FIELD)
    return value if isinstance(value, dict) else {}


def _holds(record: RunRecord, attempt_id: str) -> bool:
    return record.held_by(attempt_id) and not record.landed_late


def _late(update_time: datetime, written: dict[str, Any]) -> bool:
    deadline = written.get(CLAIM_DEADLINE_FIELD)
    return claim_landed_late(update_time, deadline if isinstance(deadline, datetime) else None)


def _busy_reason(busy: _Busy, policy: str, waiting: _Busy | None = None) -> str:
    where = " (its downstream execution)" if busy.downstream is not None else ""
    text = (f"overlap policy {policy}: run {busy.holder_run_id} (scheduled {busy.holder_schedule_time}) of this job "
            f"was still executing{where}")
    if waiting is not None:
        text += f", and run {waiting.holder_run_id} (scheduled {waiting.holder_schedule_time}) was already waiting"
    return text + "; this run did not execute"
