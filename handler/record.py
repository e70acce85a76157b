"""The run record stored in Firestore (document id = run id) and its status values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

IN_PROGRESS = "in_progress"
COMPLETED = "completed"
FAILED = "failed"
STATUSES = (IN_PROGRESS, COMPLETED, FAILED)

#: The TTL field: a Firestore TTL policy on it deletes the record after this time
#: (https://cloud.google.com/firestore/docs/ttl; deletion typically within 24 h after it passes).
TTL_FIELD = "expire_at"

#: Environment variable of a dedup service whose TTL policy lives in another stack (a shared store):
#: where it lives, e.g. ``stack acme/scheduler-dedup/store``. The handler does not read it; it tells
#: readers of the stack and the policy pack that the TTL policy is not missing but owned elsewhere.
TTL_OWNER_ENV = "DEDUP_TTL_OWNER"

#: Composite indexes that run history queries need on the run records' collection, each a tuple of
#: ``(field, "ASCENDING" | "DESCENDING")``. One job's runs, newest first (equality on ``job_name``,
#: range and order on ``schedule_time``) needs ``job_name`` ascending + ``schedule_time`` descending:
#: https://cloud.google.com/firestore/docs/query-data/index-overview#composite_indexes . The
#: infrastructure creates exactly these; the history reader queries only what they serve.
RUN_HISTORY_INDEXES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("job_name", "ASCENDING"), ("schedule_time", "DESCENDING")),
)


@dataclass(frozen=True)
class RunRecord:
    """One run record as read from Firestore.

    Attributes:
        run_id: document id, the run id.
        status: ``in_progress`` | ``completed`` | ``failed``.
        attempt_id: the attempt that holds (or held) the run, 32 hex characters.
        lease_seconds: the lease length the holder wrote, in seconds.
        update_time: Firestore's commit time of the last write (the holder's last claim or renewal).
        read_time: Firestore's time of this read.
        data: every stored field.
        create_time: Firestore's commit time of the document's creation: a record deleted and claimed
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

    @classmethod
    def from_snapshot(cls, snap: Any) -> "RunRecord":
        """Build a record from an existing ``DocumentSnapshot`` (a ``get()`` or a query result)."""
        data = snap.to_dict() or {}
        return cls(
            run_id=snap.id,
            status=str(data.get("status", "")),
            attempt_id=str(data.get("attempt_id", "")),
            lease_seconds=float(data.get("lease_seconds", 0) or 0),
            update_time=snap.update_time,
            read_time=snap.read_time,
            data=data,
            create_time=snap.create_time,
        )

    @property
    def lease_remaining_seconds(self) -> float:
        """Seconds until the lease expires, by Firestore's clock alone: last write + lease - read time.

        Both times come from Firestore, so no instance's clock takes part in the decision.
        Negative when expired. Meaningful only for ``in_progress`` records.
        """
        return self.lease_seconds - (self.read_time - self.update_time).total_seconds()

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
        """The recorded error message of a failed run."""
        value = self.data.get("error")
        return None if value is None else str(value)
