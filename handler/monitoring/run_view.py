"""One run as the run history shows it (:class:`HistoryRun`), derived from its run record: its state, its times in
UTC and in the job's time zone, and a JSON form with stable field names.
"""

from __future__ import annotations

import json
import zoneinfo
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from scheduler_dedup.handler.core.downstream import execution_name
from scheduler_dedup.handler.core.record import (CANCELLED, COMPLETED, EXECUTING_STATUSES, FAILED, IN_PROGRESS,
                                                 RELEASED, RUNNING_DOWNSTREAM, SETTLED_AT_FIELD, SKIPPED_OVERLAP,
                                                 RunRecord)
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE

#: Derived run states (:attr:`HistoryRun.state`): the stored status, except that an ``in_progress``
#: record whose lease has expired is ``stuck``. ``released``: the last attempt failed retryably.
#: ``running_downstream``: the run's downstream execution still runs; ``cancelled``: it was cancelled.
STUCK = "stuck"
STATES = (COMPLETED, FAILED, IN_PROGRESS, STUCK, RELEASED, RUNNING_DOWNSTREAM, CANCELLED, SKIPPED_OVERLAP)


def _utc(value: Any) -> datetime | None:
    return value.astimezone(timezone.utc) if isinstance(value, datetime) else None


def rfc3339(value: datetime | None) -> str | None:
    """``value`` as RFC 3339 in UTC with a ``Z`` (microseconds only when non-zero), or None."""
    if value is None:
        return None
    t = value.astimezone(timezone.utc)
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{t.microsecond:06d}Z" if t.microsecond else f"{text}Z"


@dataclass(frozen=True)
class HistoryRun:
    """One run as the history shows it, derived from its record.

    Attributes:
        run_id: the run id (document id).
        job_name: the Scheduler job id.
        schedule_time: the run's schedule time, aware UTC.
        status: the stored status: ``completed`` | ``failed`` | ``in_progress`` | ``released`` (the last attempt
            failed retryably) | ``skipped_overlap`` | ``running_downstream`` (its downstream execution still runs) |
            ``cancelled``.
        stuck: True for an ``in_progress`` record whose lease expired without renewal (by the store's
            clock: last write + lease <= read time): its holder died and no retry took it over.
        attempts: how many attempts claimed the run (1, plus one per retry after a release or takeover after a
            crash).
        attempt_id: the attempt that holds or held the run.
        previous_attempt_id: the attempt taken over, when a takeover happened.
        manual: True for a forced run (``gcloud scheduler jobs run``), keyed apart from scheduled runs.
        claimed_at: when the holding attempt claimed (or took over) the run, aware UTC.
        finished_at: when it was recorded completed, failed or released (a run forwarded downstream: when its
            execution ended, by the execution's API), aware UTC, or None.
        duration_seconds: ``finished_at - claimed_at``; for a run in progress or running downstream, the time since
            its claim by the store's clock; None if unknown.
        result_bytes: size of the stored result as JSON, in bytes; None without a result.
        result_dropped: why the result was not stored (too large, not JSON), or None.
        error: the recorded error of a failed or released run (the exception's type and message), or None.
        schedule: the job's unix-cron schedule as the handler knew it (``DEDUP_SCHEDULE``), or None.
        time_zone: the schedule's time zone (``DEDUP_TIME_ZONE``), or None.
        schedule_since: when the job got that schedule (``DEDUP_SCHEDULE_SINCE``, aware UTC), or None.
        project: the project id the run is keyed on.
        location: the Scheduler region, or ``""``.
        output: the tail of what the failed or released attempt's job wrote to stdout/stderr, or None.
        releases: how many attempts failed retryably (each released the run for a retry).
        execution: the downstream execution (or build) the run was forwarded to, or None.
        settled_at: when a run forwarded downstream was recorded finished (the settling run check's time less a
            millisecond, else the store's time at the write), aware UTC, or None.
    """

    run_id: str
    job_name: str
    schedule_time: datetime
    status: str
    stuck: bool
    attempts: int
    attempt_id: str
    previous_attempt_id: str | None
    manual: bool
    claimed_at: datetime | None
    finished_at: datetime | None
    duration_seconds: float | None
    result_bytes: int | None
    result_dropped: str | None
    error: str | None
    schedule: str | None
    time_zone: str | None
    project: str
    location: str
    schedule_since: datetime | None = None
    output: str | None = None
    releases: int = 0
    execution: str | None = None
    settled_at: datetime | None = None

    @classmethod
    def from_record(cls, record: RunRecord) -> "HistoryRun":
        """Derive the history view of a record read from a store.

        Raises:
            ValueError: the record has no ``schedule_time`` (it was not written by the Scheduler handler).
        """
        d = record.data
        schedule_time = _utc(d.get("schedule_time"))
        if schedule_time is None:
            raise ValueError(f"run record {record.run_id} has no schedule_time")
        claimed_at, finished_at = _utc(d.get("claimed_at")), _utc(d.get("finished_at"))
        stuck = record.status == IN_PROGRESS and record.lease_seconds > 0 and record.lease_remaining_seconds <= 0
        if claimed_at is not None and finished_at is not None:
            duration: float | None = (finished_at - claimed_at).total_seconds()
        elif claimed_at is not None and record.status in EXECUTING_STATUSES:
            duration = (record.read_time - claimed_at).total_seconds()
        else:
            duration = None
        result = d.get("result")
        previous = d.get("previous_attempt_id")
        return cls(
            run_id=record.run_id,
            job_name=str(d.get("job_name", "")),
            schedule_time=schedule_time,
            status=record.status,
            stuck=stuck,
            attempts=int(d.get("attempts") or 1),
            attempt_id=record.attempt_id,
            previous_attempt_id=str(previous) if previous else None,
            manual=bool(d.get("manual", False)),
            claimed_at=claimed_at,
            finished_at=finished_at,
            duration_seconds=duration,
            result_bytes=None if result is None else len(json.dumps(result, default=str).encode()),
            result_dropped=d.get("result_dropped") or None,
            error=record.error,
            schedule=d.get("schedule") or None,
            time_zone=d.get("time_zone") or None,
            project=str(d.get("project", "")),
            location=str(d.get("location", "")),
            schedule_since=_utc(d.get("schedule_since")),
            output=record.output,
            releases=record.releases,
            execution=execution_name(result),
            settled_at=_utc(d.get(SETTLED_AT_FIELD)),
        )

    @property
    def state(self) -> str:
        """``completed`` | ``failed`` | ``in_progress`` | ``stuck`` | ``released`` | ``running_downstream`` |
        ``cancelled`` | ``skipped_overlap`` (:data:`STATES`)."""
        return STUCK if self.stuck else self.status

    @property
    def took_over(self) -> bool:
        """True if an attempt took the run over after another's lease expired: the job ran again (twice in
        all if the earlier attempt had started it before it died). A retry after a release is no takeover."""
        return self.previous_attempt_id is not None or self.attempts - self.releases > 1

    def retries_over(self, now: datetime, grace_seconds: float) -> bool:
        """True for a ``released`` run whose grace period (the job's retry window) has passed at ``now``:
        Scheduler's retries are over and every attempt failed."""
        return self.status == RELEASED and now >= self.schedule_time + timedelta(seconds=grace_seconds)

    def local_schedule_time(self, time_zone: str | None = None) -> datetime:
        """The schedule time in ``time_zone`` (default: the record's own, else UTC)."""
        return self.schedule_time.astimezone(zoneinfo.ZoneInfo(time_zone or self.time_zone or DEFAULT_TIME_ZONE))

    def to_json(self, time_zone: str | None = None) -> dict[str, Any]:
        """A JSON object with stable field names; times are RFC 3339 (``schedule_time_local`` with its offset)."""
        return {
            "run_id": self.run_id,
            "job_name": self.job_name,
            "schedule_time": rfc3339(self.schedule_time),
            "schedule_time_local": self.local_schedule_time(time_zone).isoformat(),
            "time_zone": time_zone or self.time_zone or DEFAULT_TIME_ZONE,
            "state": self.state,
            "status": self.status,
            "attempts": self.attempts,
            "took_over": self.took_over,
            "attempt_id": self.attempt_id,
            "previous_attempt_id": self.previous_attempt_id,
            "manual": self.manual,
            "claimed_at": rfc3339(self.claimed_at),
            "finished_at": rfc3339(self.finished_at),
            "duration_seconds": None if self.duration_seconds is None else round(self.duration_seconds, 3),
            "result_bytes": self.result_bytes,
            "result_dropped": self.result_dropped,
            "error": self.error,
            "output": self.output,
            "releases": self.releases,
            "execution": self.execution,
            "schedule": self.schedule,
            "schedule_since": rfc3339(self.schedule_since),
            "project": self.project,
            "location": self.location,
        }
