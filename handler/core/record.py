"""The run record (record id = run id) as every store keeps it, and its status values.

The record is store-neutral: each store (:mod:`scheduler_dedup.handler.stores`) reads its own format into a
:class:`RunRecord`, with its own clock's times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

IN_PROGRESS = "in_progress"
COMPLETED = "completed"
FAILED = "failed"
#: A run that did not execute because the job's previous run was still executing (overlap policy ``skip``, or a
#: third run under ``buffer_one``): final like ``completed``, and a record, so run history never reports it missed.
SKIPPED_OVERLAP = "skipped_overlap"
#: A run whose last attempt failed retryably (the job raised an ``Exception``): the record keeps that attempt's
#: ``error`` and ``output`` and counts it in ``releases``, and is not final: the next delivery claims it at once,
#: fenced on its version like a takeover, so of concurrent retries exactly one runs the job. It stays ``released``
#: once Scheduler's retries are over: run history then reports the run failed, with that error.
RELEASED = "released"
#: A run whose job was forwarded to a downstream execution (Cloud Run job, Workflows, Cloud Build) that has not ended
#: yet: the record holds the execution's name in its ``result``, no delivery starts it again, and the run check (or an
#: overlap policy's look at it) records the execution's own outcome, fenced on the record's version
#: (:mod:`scheduler_dedup.handler.protocol.downstream_outcome`).
RUNNING_DOWNSTREAM = "running_downstream"
#: A run whose downstream execution was cancelled (overlap policy ``replace``, or by hand): final, not a failure.
CANCELLED = "cancelled"
#: The statuses a run keeps once written: no delivery runs the job again.
FINAL_STATUSES = (COMPLETED, FAILED, SKIPPED_OVERLAP, CANCELLED)
#: The statuses of a run still executing: its job in the handler, or its downstream execution.
EXECUTING_STATUSES = (IN_PROGRESS, RUNNING_DOWNSTREAM)

#: The TTL field: the time after which the store may delete the record (a Firestore TTL policy, a Spanner row
#: deletion policy, a Redis key expiry; each store's module says how soon after it passes).
TTL_FIELD = "expire_at"
#: Field of a run settled from its downstream execution: when its outcome was recorded (``finished_at`` holds the
#: execution's own end, which may be checks earlier): the run check's time less a millisecond when the check settled
#: it, else the store's time of the write. The alerts count the run at it
#: (:mod:`scheduler_dedup.handler.protocol.downstream_outcome`).
SETTLED_AT_FIELD = "settled_at"

#: Environment variable of a dedup service whose TTL policy lives in another stack (a shared store):
#: where it lives, e.g. ``stack acme/scheduler-dedup/store``. The handler does not read it; it tells
#: readers of the stack and the policy pack that the TTL policy is not missing but owned elsewhere.
TTL_OWNER_ENV = "DEDUP_TTL_OWNER"


#: Field of an ``in_progress`` record: the store's time (as its writer estimated it) by which the claim or
#: takeover that wrote it stops waiting for its answer (send time + the store timeout).
CLAIM_DEADLINE_FIELD = "claim_deadline"
#: Slack for the writer's estimate of the store's clock (off by at most one call's latency once it has talked to
#: the store, by the instance's NTP-synced clock before) and the client's last retry backoff, in seconds.
CLAIM_LANDING_MARGIN_SECONDS = 2.0


def claim_landed_late(claimed_at: datetime | None, claim_deadline: datetime | None) -> bool:
    """True if a claim (or takeover) write committed after its writer had stopped waiting for it.

    Such a write comes from a call whose answer its attempt never got in time (a late packet, a Commit held
    beyond the store timeout): that attempt either answered ``store_error`` (the job did not run) or read the
    record afterwards and applies this same rule, so nobody runs the job under that claim. It holds nothing:
    any delivery may take it over at once, without waiting for its lease and without counting a takeover.
    Deciding by two values stored in the record (the write's commit time, ``claimed_at``, and the deadline
    the writer stored with it) makes every reader, the writer included, decide alike, with no extra write.

    Args:
        claimed_at: the record's ``claimed_at``: the commit time of the claim or takeover (aware UTC).
        claim_deadline: the record's :data:`CLAIM_DEADLINE_FIELD` (aware UTC); None for records written
            before the handler stored it (never late).

    Returns:
        True if ``claimed_at`` is more than :data:`CLAIM_LANDING_MARGIN_SECONDS` after ``claim_deadline``.
    """
    if claimed_at is None or claim_deadline is None:
        return False
    return claimed_at > claim_deadline + timedelta(seconds=CLAIM_LANDING_MARGIN_SECONDS)


@dataclass(frozen=True)
class RunRecord:
    """One run record as read from a store.

    Attributes:
        run_id: the record id, the run id.
        status: ``in_progress`` | ``running_downstream`` | ``completed`` | ``failed`` | ``skipped_overlap`` |
            ``cancelled`` | ``released``.
        attempt_id: the attempt that holds (or held) the run, 32 hex characters.
        lease_seconds: the lease length the holder wrote, in seconds.
        update_time: the store's commit time of the last write (the holder's last claim or renewal), aware
            UTC; also the record's version, which conditional writes are fenced on.
        read_time: the store's time of this read, aware UTC.
        data: every stored field.
        create_time: the store's commit time of the record's creation: a record deleted and claimed
            afresh has a new one, a record taken over keeps its own.
    """

    run_id: str
    status: str
    attempt_id: str
    lease_seconds: float
    update_time: datetime
    read_time: datetime
    data: dict[str, Any] = field(default_factory=dict)
    create_time: datetime | None = None

    @property
    def lease_remaining_seconds(self) -> float:
        """Seconds until the lease expires, by the store's clock alone: last write + lease - read time.

        Both times come from the store, so no instance's clock takes part in the decision.
        Negative when expired, and never positive for a claim that landed after its writer gave up
        (:attr:`landed_late`: nobody holds it). Meaningful only for ``in_progress`` records.
        """
        remaining = self.lease_seconds - (self.read_time - self.update_time).total_seconds()
        return min(remaining, 0.0) if self.landed_late else remaining

    @property
    def landed_late(self) -> bool:
        """True if this ``in_progress`` record's claim or takeover committed after its attempt gave up on it
        (:func:`claim_landed_late`): no attempt runs the job under it."""
        return self.status == IN_PROGRESS and claim_landed_late(_aware(self.data.get("claimed_at")),
                                                                _aware(self.data.get(CLAIM_DEADLINE_FIELD)))

    def held_by(self, attempt_id: str) -> bool:
        """True if ``attempt_id`` holds the run: the record is ``in_progress`` under that attempt id.

        The fencing check: an attempt may write the record only while this holds.
        """
        return self.status == IN_PROGRESS and self.attempt_id == attempt_id

    @property
    def result(self) -> Any:
        """The job's stored result in JSON values (None if it had none or it was dropped)."""
        return self.data.get("result")

    @property
    def result_dropped(self) -> str | None:
        """Why the job's result was not stored, or None."""
        value = self.data.get("result_dropped")
        return None if value is None else str(value)

    @property
    def error(self) -> str | None:
        """The recorded error of a failed or released run: the exception's type and message, scrubbed."""
        value = self.data.get("error")
        return None if value is None else str(value)

    @property
    def output(self) -> str | None:
        """The tail of what the failed or released attempt's job wrote to stdout/stderr, scrubbed; None if none."""
        value = self.data.get("output")
        return str(value) if value else None

    @property
    def releases(self) -> int:
        """How many attempts released the run after a retryable failure (0 for a record without the field)."""
        value = self.data.get("releases")
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _aware(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) and value.tzinfo is not None else None
