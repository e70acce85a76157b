"""What comparing a schedule's fire times with the run records finds (:class:`Finding`, by kind), and the report of
one comparison (:class:`Report`).
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler_dedup.handler.monitoring.run_view import HistoryRun, rfc3339
from scheduler_dedup.handler.schedule.cron.fire_times import FireTime

#: :attr:`Finding.kind` values. The first three are problems: a check exits non-zero on them.
MISSED, FAILED_RUN, STUCK_RUN = "missed", "failed", "stuck"
LATE, REPEATED, UNEXPECTED = "late", "repeated", "unexpected"
#: A ``released`` run within its grace period: its last attempt failed retryably and Scheduler may retry it. Not a
#: problem yet; once the grace period has passed it is ``failed``.
RETRYING = "retrying"
#: A fire time Cloud Scheduler skipped on purpose: the previous run was still running or being retried
#: ("the next scheduled execution time might be skipped if the retries continue through that time":
#: https://cloud.google.com/scheduler/docs/configuring/retry-jobs). Not a problem.
SKIPPED_BUSY = "skipped"
#: A wall-clock time of the hour repeated when clocks go back, delivered (and run) at both of its instants
#: (Scheduler's cron page warns of "execution anomalies" around DST changes). Not a problem of the handler:
#: ``DEDUP_KEY_LOCAL_TIME=true`` makes the second delivery a duplicate.
DST_REPEATED = "dst_repeated"
#: The fire times of a pause of the job (``DEDUP_PAUSED_SINCE`` until ``DEDUP_RESUMED_AT``, or on), none delivered: one
#: finding per pause, a state and not a problem, so a planned pause pages nothing.
PAUSED = "paused"
#: A pause of the job: ``(since, until)``, aware; ``until`` None while it lasts.
Pause = tuple[datetime, datetime | None]


def in_pause(pause: Pause, instant: datetime) -> bool:
    """True when aware ``instant`` falls in ``pause``: at or after its start, before its end (if it has one). The
    run check reports a fire time in a pause as paused; the handler runs nothing for a delivery in one."""
    return pause[0] <= instant and (pause[1] is None or instant < pause[1])
PROBLEMS = (MISSED, FAILED_RUN, STUCK_RUN)
KINDS = (MISSED, FAILED_RUN, STUCK_RUN, LATE, RETRYING, REPEATED, UNEXPECTED, SKIPPED_BUSY, DST_REPEATED, PAUSED)

#: :attr:`Report.active_since_source` values: what bounded the window's start.
SINCE_SCHEDULE_CHANGE = "schedule_since"  #: the time the job got its schedule (DEDUP_SCHEDULE_SINCE)
SINCE_EARLIEST_RECORD = "earliest_record"  #: nothing known: the job's earliest run record


@dataclass(frozen=True)
class Finding:
    """One thing the expected-versus-actual comparison found.

    Attributes:
        kind: :data:`KINDS`: ``missed`` (a fire time with no record once the grace period passed),
            ``late`` (no record yet, still within the grace period), ``failed`` (recorded failed, or released
            with the grace period over: every attempt failed), ``retrying`` (released within the grace period),
            ``stuck`` (in progress past its lease), ``repeated`` (executed again after a takeover),
            ``unexpected`` (a forced run, or a schedule time that is not a fire time), ``skipped`` (no record
            because Scheduler skipped the fire time while the previous run was still running or retried),
            ``dst_repeated`` (a repeated wall-clock time run at both of its instants), ``paused`` (the fire times
            since the job's pause, one finding for the span).
        schedule_time: the run's schedule time, or for missed/late the fire time's latest candidate
            instant, or for paused the time of the pause; aware UTC.
        detail: why, in words, for a person reading the report.
        fire_time: the fire time concerned, or None for an unexpected run.
        run: the run concerned, or None for missed/late.
    """

    kind: str
    schedule_time: datetime
    detail: str
    fire_time: FireTime | None = None
    run: HistoryRun | None = None

    def to_json(self, time_zone: str) -> dict[str, Any]:
        """A JSON object with stable field names."""
        return {
            "kind": self.kind,
            "schedule_time": rfc3339(self.schedule_time),
            "schedule_time_local": self.schedule_time.astimezone(zoneinfo.ZoneInfo(time_zone)).isoformat(),
            "run_id": self.run.run_id if self.run else None,
            "dst": self.fire_time.dst if self.fire_time else "",
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Report:
    """Expected fire times against recorded runs over a window.

    Attributes:
        job_name, schedule, time_zone: what was checked; ``schedule`` is None when none was known: then
            only the records' own facts (failed, stuck, repeated) are reported, and nothing can be
            missed, late or unexpected (:attr:`missed_checked` is False).
        since, until: the window (aware UTC); fire times with a candidate instant in it count.
        now: the time the check was made at (aware UTC).
        grace_seconds: seconds after a fire time before a missing run is missed.
        expected: required fire times in the window that are due (their first instant <= now).
        recorded: of those, how many have a run record.
        runs: run records seen in the window.
        findings: everything found, newest first.
        active_since: no fire time before this instant was expected (aware UTC), or None when nothing bounded
            the window: the job got its schedule then (:data:`SINCE_SCHEDULE_CHANGE`), or its earliest run
            record is that old (:data:`SINCE_EARLIEST_RECORD`).
        active_since_source: what ``active_since`` comes from (:data:`SINCE_SCHEDULE_CHANGE`,
            :data:`SINCE_EARLIEST_RECORD`), or None.
    """

    job_name: str
    schedule: str | None
    time_zone: str
    since: datetime
    until: datetime
    now: datetime
    grace_seconds: float
    expected: int
    recorded: int
    runs: int
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    active_since: datetime | None = None
    active_since_source: str | None = None

    @property
    def missed_checked(self) -> bool:
        """True when fire times were compared with the records (a schedule was known), so missed runs count."""
        return self.schedule is not None

    def of(self, kind: str) -> list[Finding]:
        """The findings of one kind, newest first."""
        return [f for f in self.findings if f.kind == kind]

    @property
    def problems(self) -> list[Finding]:
        """Missed, failed and stuck runs: what a check fails on."""
        return [f for f in self.findings if f.kind in PROBLEMS]

    @property
    def ok(self) -> bool:
        """True when nothing was missed, failed or stuck."""
        return not self.problems

    def counts(self) -> dict[str, int]:
        """Number of findings per kind, every kind present."""
        return {kind: len(self.of(kind)) for kind in KINDS}

    def to_json(self) -> dict[str, Any]:
        """A JSON object with stable field names (findings included)."""
        return {
            "job_name": self.job_name, "schedule": self.schedule, "time_zone": self.time_zone,
            "since": rfc3339(self.since), "until": rfc3339(self.until), "now": rfc3339(self.now),
            "grace_seconds": self.grace_seconds, "expected": self.expected, "recorded": self.recorded,
            "runs": self.runs, "ok": self.ok, "missed_checked": self.missed_checked, "counts": self.counts(),
            "active_since": rfc3339(self.active_since), "active_since_source": self.active_since_source,
            "findings": [f.to_json(self.time_zone) for f in self.findings],
        }
