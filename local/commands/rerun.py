"""``scheduler-dedup runs rerun RUN_ID``: run a failed run again through the claim, keeping the failed attempt.

A re-run writes only through the store contract:

1. the failed record is copied to a *previous attempt* record (:func:`previous_attempt_id`: the run id and the
   re-run's rank ``n`` = 1, 2, ..., hashed; put-if-absent, so a re-run retried after a lost answer finds its own
   copy). It has no ``schedule_time``, so run history never counts it as a run; ``runs show`` lists it;
2. the failed record is deleted fenced on its version (its last commit time): if anything changed it since it was
   read, nothing is deleted and the re-run stops;
3. the fire time is delivered to the handler with its own schedule time (:mod:`~scheduler_dedup.local.commands.backfill`),
   so it goes through the normal claim: a concurrent delivery of the same fire time cannot run it twice.

A ``released`` run (every attempt failed retryably, Scheduler's retries over) needs neither step 1 nor 2: its record
already keeps the last attempt's error, and the next delivery claims it through the same fenced write as a retry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.core.downstream import execution_name
from scheduler_dedup.handler.core.record import FAILED, RELEASED, RunRecord
from scheduler_dedup.handler.monitoring.run_view import rfc3339
from scheduler_dedup.handler.stores.base import RunStore

#: Most re-runs of one run kept (previous attempt records looked at by ``runs show``).
MAX_PREVIOUS_ATTEMPTS = 50
#: Fields of a failed record copied to its previous attempt record (each one a column on every store).
_COPIED = ("status", "attempt_id", "previous_attempt_id", "lease_seconds", "claimed_at", "finished_at", "attempts",
           "error", "project", "location", "expire_at")


class RerunRefused(Exception):
    """The run cannot be re-run (absent, not failed, or changed since it was read); the message says why."""


def previous_attempt_id(run_id: str, n: int) -> str:
    """The record id of run ``run_id``'s ``n``-th previous attempt (1-based): 64 hex characters (SHA-256)."""
    return hashlib.sha256("\x1f".join(("scheduler-dedup/v1", "previous-attempt", run_id, str(n))).encode()).hexdigest()


@dataclass(frozen=True)
class RerunPlan:
    """What a re-run will write, decided from one read of the failed record.

    Attributes:
        record: the failed record as read (its ``update_time`` fences the delete).
        copy_id: the previous attempt record it is copied to (``""`` for a released run: nothing to copy).
        copy_fields: what that record will hold.
        rank: which previous attempt this is (1 for the first re-run; 0 for a released run).
    """

    record: RunRecord
    copy_id: str
    copy_fields: dict[str, Any]
    rank: int

    @property
    def schedule_time(self) -> str:
        return rfc3339(self.record.data.get("schedule_time")) or ""

    def describe(self) -> list[str]:
        """The re-run's steps as sentences (what ``--dry-run`` prints)."""
        r = self.record
        if not self.copy_id:
            return [f"deliver job {r.data.get('job_name')} at schedule time {self.schedule_time} through the claim: "
                    f"the run is released (its last attempt {r.attempt_id} failed retryably: {r.error or 'no error'}), "
                    "so the delivery claims it as a retry; nothing is copied or deleted"]
        return [f"copy failed attempt {r.attempt_id} (error: {r.error or 'none'}) to previous attempt record "
                f"{self.copy_id} (#{self.rank})",
                f"delete run record {r.run_id} only if its version is still {r.update_time.isoformat()} "
                "(nothing is deleted if it changed)",
                f"deliver job {r.data.get('job_name')} at schedule time {self.schedule_time} through the claim"]


def previous_attempts(store: RunStore, run_id: str) -> list[RunRecord]:
    """Run ``run_id``'s previous attempt records, oldest first."""
    found = []
    for n in range(1, MAX_PREVIOUS_ATTEMPTS + 1):
        record = store.get(previous_attempt_id(run_id, n))
        if record is None:
            break
        found.append(record)
    return found


def plan_rerun(store: RunStore, run_id: str) -> RerunPlan:
    """Read the run and plan its re-run.

    Raises:
        RerunRefused: no such record, or it is neither ``failed`` nor ``released``.
        StoreUnavailableError, StoreRefusedError: a read failed.
    """
    record = store.get(run_id)
    if record is None:
        raise RerunRefused(f"run {run_id} has no record: nothing failed. A fire time that never ran is delivered "
                           "by `scheduler-dedup backfill`")
    if record.status == RELEASED:
        return RerunPlan(record, "", {}, 0)
    if record.status != FAILED:
        raise RerunRefused(f"run {run_id} is {record.status}, not failed: only a failed (or released) run is re-run")
    rank = 1
    for rank in range(1, MAX_PREVIOUS_ATTEMPTS + 1):
        existing = store.get(previous_attempt_id(run_id, rank))
        if existing is None or existing.attempt_id == record.attempt_id:
            break
    else:
        raise RerunRefused(f"run {run_id} was re-run {MAX_PREVIOUS_ATTEMPTS} times already")
    fields = {key: record.data.get(key) for key in _COPIED if key in record.data}
    fields["result"] = {"previous_attempt_of": run_id, "job_name": record.data.get("job_name"),
                        "schedule_time": rfc3339(record.data.get("schedule_time")), "rank": rank,
                        # a failed downstream execution stays named in the history; the re-run starts a new one
                        "execution": execution_name(record.result)}
    return RerunPlan(record, previous_attempt_id(run_id, rank), fields, rank)


def reset(store: RunStore, plan: RerunPlan) -> None:
    """Copy the failed attempt, then delete the failed record fenced on its version (steps 1 and 2).

    Raises:
        RerunRefused: the record changed since :func:`plan_rerun` read it (another re-run, a delivery).
        StoreUnavailableError, StoreRefusedError: the store failed; a retry of the re-run is safe.
    """
    if not plan.copy_id:
        return  # released: the delivery claims it as it is
    if store.create(plan.copy_id, plan.copy_fields) is None:
        copied = store.get(plan.copy_id)
        if copied is None or copied.attempt_id != plan.record.attempt_id:
            raise RerunRefused(f"previous attempt record #{plan.rank} holds another attempt: re-run again")
    if store.delete_if_unchanged(plan.record.run_id, plan.record.update_time):
        return
    now = store.get(plan.record.run_id)
    if now is None:
        return  # our delete landed with its answer lost, or another re-run reset it: either way it is free
    if now.status == FAILED and now.attempt_id == plan.record.attempt_id and now.update_time == plan.record.update_time:
        raise RerunRefused(f"run {plan.record.run_id}: the store did not delete it; nothing changed, re-run again")
    raise RerunRefused(f"run {plan.record.run_id} changed since it was read (now {now.status}, attempt "
                       f"{now.attempt_id}): nothing was deleted")
