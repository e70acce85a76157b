"""Run history: one job's run records, newest first, and its expected fire times compared with them.

Every scheduled run leaves one record (document id = run id) holding the job name, the schedule time,
the status, the attempts and, since the handler stores them, the job's schedule and time zone. Two
pieces build on that, both free of any CLI or web framework so the ``scheduler-dedup runs`` command and
the handler's own checks share them:

* :class:`RunHistory` reads one job's records newest first, a page at a time (flat memory), through the
  run-store contract's one history query (:meth:`~scheduler_dedup.handler.stores.base.RunStore.job_run_pages`:
  equality on ``job_name``, range and descending order on ``schedule_time``; on Firestore the composite index
  of :data:`~scheduler_dedup.handler.stores.firestore.schema.RUN_HISTORY_INDEXES`); a status filter is
  applied here, client-side, so no second index is needed.
* :func:`compare` lays the schedule's fire times (:func:`~scheduler_dedup.handler.schedule.cron.fire_times`,
  evaluated in the job's time zone as Cloud Scheduler does) over the records and reports what was
  **missed**, **late**, **failed**, **stuck**, **repeated** and **unexpected** (:class:`Finding`).
"""

from __future__ import annotations

import bisect
import json
import re
import zoneinfo
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from scheduler_dedup.handler.config.settings import SCHEDULER_JOB_RE
from scheduler_dedup.handler.schedule.cron import DEFAULT_TIME_ZONE, FireTime, fire_times, is_fire_time
from scheduler_dedup.handler.core.record import COMPLETED, FAILED, IN_PROGRESS, RunRecord
from scheduler_dedup.handler.stores.base import RunStore

#: Derived run states (:attr:`HistoryRun.state`): the stored status, except that an ``in_progress``
#: record whose lease has expired is ``stuck``.
STUCK = "stuck"
STATES = (COMPLETED, FAILED, IN_PROGRESS, STUCK)

#: :attr:`Finding.kind` values. The first three are problems: a check exits non-zero on them.
MISSED, FAILED_RUN, STUCK_RUN = "missed", "failed", "stuck"
LATE, REPEATED, UNEXPECTED = "late", "repeated", "unexpected"
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
PROBLEMS = (MISSED, FAILED_RUN, STUCK_RUN)
KINDS = (MISSED, FAILED_RUN, STUCK_RUN, LATE, REPEATED, UNEXPECTED, SKIPPED_BUSY, DST_REPEATED, PAUSED)

#: :attr:`Report.active_since_source` values: what bounded the window's start.
SINCE_SCHEDULE_CHANGE = "schedule_since"  #: the time the job got its schedule (DEDUP_SCHEDULE_SINCE)
SINCE_EARLIEST_RECORD = "earliest_record"  #: nothing known: the job's earliest run record

#: Seconds after ``DEDUP_SCHEDULE_SINCE`` in which a fire time without a record is not expected. The component
#: records that time before the Cloud Run service that carries it, then deploys the service (minutes), grants the
#: invoker role (IAM changes "typically 2 minutes, potentially 7 minutes or longer" to take effect:
#: https://cloud.google.com/iam/docs/access-change-propagation) and only then creates or updates the Scheduler job, so
#: the first fire times after it were never due. A run recorded within them counts, and on a fresh deploy the first one
#: ends them: the job exists from then on. After a schedule change only a delivery the old schedule (the newest older
#: record's) cannot explain ends them, and the old schedule's deliveries within them are not unexpected: Scheduler
#: applies a change late, so hourly -> every minute delivers the old 13:00 run before the first new one.
SCHEDULE_SETTLE_SECONDS = 900

#: Default grace period, seconds: how long after a fire time its run may still be recorded before it
#: counts as missed. A run is recorded when a delivery claims it; a run whose first deliveries failed
#: is recorded on a retry, so set the grace to the job's retry window for a strict check.
DEFAULT_GRACE_SECONDS = 600.0
DEFAULT_PAGE_SIZE = 300


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
        status: the stored status: ``completed`` | ``failed`` | ``in_progress``.
        stuck: True for an ``in_progress`` record whose lease expired without renewal (by the store's
            clock: last write + lease <= read time): its holder died and no retry took it over.
        attempts: how many attempts claimed the run (1, plus one per takeover after a crash).
        attempt_id: the attempt that holds or held the run.
        previous_attempt_id: the attempt taken over, when a takeover happened.
        manual: True for a forced run (``gcloud scheduler jobs run``), keyed apart from scheduled runs.
        claimed_at: when the holding attempt claimed (or took over) the run, aware UTC.
        finished_at: when it was recorded completed or failed, aware UTC, or None.
        duration_seconds: ``finished_at - claimed_at``; for a run in progress, the time since its
            claim by the store's clock; None if unknown.
        result_bytes: size of the stored result as JSON, in bytes; None without a result.
        result_dropped: why the result was not stored (too large, not JSON), or None.
        error: the recorded error of a failed run, or None.
        schedule: the job's unix-cron schedule as the handler knew it (``DEDUP_SCHEDULE``), or None.
        time_zone: the schedule's time zone (``DEDUP_TIME_ZONE``), or None.
        schedule_since: when the job got that schedule (``DEDUP_SCHEDULE_SINCE``, aware UTC), or None.
        project: the project id the run is keyed on.
        location: the Scheduler region, or ``""``.
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
        elif claimed_at is not None and record.status == IN_PROGRESS:
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
        )

    @property
    def state(self) -> str:
        """``completed`` | ``failed`` | ``in_progress`` | ``stuck`` (:data:`STATES`)."""
        return STUCK if self.stuck else self.status

    @property
    def took_over(self) -> bool:
        """True if an attempt took the run over after another's lease expired: the job ran again (twice in
        all if the earlier attempt had started it before it died)."""
        return self.previous_attempt_id is not None or self.attempts > 1

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
            "schedule": self.schedule,
            "schedule_since": rfc3339(self.schedule_since),
            "project": self.project,
            "location": self.location,
        }


class RunHistory:
    """Reads run records of one job from a run store, newest first, a page at a time.

    Args:
        store: the run store (any store of :mod:`scheduler_dedup.handler.stores`; on Firestore,
            ``roles/datastore.viewer`` suffices to read).
        page_size: records per page; memory holds one page at a time.
        timeout_seconds: how long one page's call may take, retries of transient errors included.
        first_call_timeout_seconds: the same bound for the reader's first call, until the store has
            answered once: an unreachable endpoint (a wrong emulator variable, a refused connection) fails
            within it instead of retrying for ``timeout_seconds``.

    Methods raise the store contract's errors (:class:`~scheduler_dedup.handler.core.errors.StoreUnavailableError`,
    :class:`~scheduler_dedup.handler.core.errors.StoreRefusedError`, whose ``hint`` says what to check: on real
    Firestore a missing composite index is refused with a link that creates it; the component creates it).
    """

    def __init__(self, store: RunStore, page_size: int = DEFAULT_PAGE_SIZE, timeout_seconds: float = 60.0,
                 first_call_timeout_seconds: float = 10.0):
        if page_size < 1:
            raise ValueError(f"page_size={page_size} must be at least 1")
        self.store = store
        self.page_size = page_size
        self._answered = False
        self._timeouts = (min(first_call_timeout_seconds, timeout_seconds), timeout_seconds)

    @property
    def collection(self) -> str:
        """The run records' collection."""
        return self.store.collection

    @property
    def _timeout(self) -> float:
        """The bound for the next call: short until the store has answered once."""
        return self._timeouts[1] if self._answered else self._timeouts[0]

    def runs(self, job_name: str, *, since: datetime | None = None, until: datetime | None = None,
             states: Iterable[str] | None = None,
             on_page: Callable[[int], None] | None = None) -> Iterator[HistoryRun]:
        """One job's runs with ``since <= schedule_time < until``, newest first.

        Args:
            job_name: the Scheduler job id (``X-CloudScheduler-JobName``).
            since: inclusive lower bound (aware), or None.
            until: exclusive upper bound (aware), or None.
            states: keep only runs in these :data:`STATES` (filtered client-side).
            on_page: called after each page with the number of records scanned so far.

        Raises:
            ValueError: an unknown state.
        """
        wanted = None if states is None else set(states)
        if wanted is not None and wanted - set(STATES):
            raise ValueError(f"unknown state(s) {sorted(wanted - set(STATES))}: use {', '.join(STATES)}")
        scanned = 0
        pages = self.store.job_run_pages(job_name, since=since, until=until, page_size=self.page_size,
                                         timeout_seconds=self._timeout)
        for page in pages:
            self._answered = True
            scanned += len(page)
            for record in page:
                run = HistoryRun.from_record(record)
                if wanted is None or run.state in wanted:
                    yield run
            if on_page is not None:
                on_page(scanned)

    def latest(self, job_name: str) -> HistoryRun | None:
        """The job's newest run record, or None."""
        pages = self.store.job_run_pages(job_name, since=None, until=None, page_size=1, timeout_seconds=self._timeout)
        first = next(iter(pages), [])
        self._answered = True
        return HistoryRun.from_record(first[0]) if first else None

    def record(self, run_id: str) -> RunRecord | None:
        """The raw record with this run id (every stored field, the result included), or None."""
        record = self.store.get(run_id, timeout_seconds=self._timeout)
        self._answered = True
        return record

    def get(self, run_id: str) -> HistoryRun | None:
        """The run with this run id, or None (also None for a record that is not a scheduled run's)."""
        record = self.record(run_id)
        if record is None:
            return None
        try:
            return HistoryRun.from_record(record)
        except ValueError:
            return None

    def with_id_prefix(self, prefix: str, limit: int = 2) -> list[HistoryRun]:
        """Runs whose run id starts with ``prefix`` (lower-case hex, as the report prints the first 12
        characters), at most ``limit``, in run id order, reading at most ``limit`` records however large the
        collection. Ask for 2 to tell a unique prefix from an ambiguous one.

        Raises:
            ValueError: ``prefix`` is not 1 to 64 lower-case hex characters.
        """
        if not re.fullmatch(r"[0-9a-f]{1,64}", prefix):
            raise ValueError(f"{prefix!r} is not a run id or its prefix: run ids are lower-case hex")
        records = self.store.runs_with_id_prefix(prefix, limit, timeout_seconds=self._timeout)
        self._answered = True
        found = []
        for record in records:
            try:
                found.append(HistoryRun.from_record(record))
            except ValueError:
                continue  # not a scheduled run's record
        return found

    def has_runs_before(self, job_name: str, until: datetime) -> bool:
        """True if the job has a run record with a schedule time before ``until`` (one query of one record)."""
        pages = self.store.job_run_pages(job_name, since=None, until=until, page_size=1, timeout_seconds=self._timeout)
        first = next(iter(pages), [])
        self._answered = True
        return bool(first)

    def at(self, job_name: str, schedule_time: datetime) -> list[HistoryRun]:
        """The job's runs whose schedule time is ``schedule_time`` (a scheduled run, a forced run, or
        runs keyed on other projects or regions), newest first."""
        return list(self.runs(job_name, since=schedule_time, until=schedule_time + timedelta(microseconds=1)))


@dataclass(frozen=True)
class Finding:
    """One thing the expected-versus-actual comparison found.

    Attributes:
        kind: :data:`KINDS`: ``missed`` (a fire time with no record once the grace period passed),
            ``late`` (no record yet, still within the grace period), ``failed`` (recorded failed),
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


_PREFERENCE = {"": 0, "repeated": 1, "skipped": 2}  # a run counts for an ordinary fire time first


def compare(runs: Iterable[HistoryRun], *, job_name: str, schedule: str | None, time_zone: str, since: datetime,
            until: datetime, now: datetime | None = None, grace_seconds: float = DEFAULT_GRACE_SECONDS,
            active_since: datetime | None = None, runs_before_window: bool | None = None,
            paused_since: datetime | None = None, pauses: Sequence[Pause] = ()) -> Report:
    """Compare a schedule's fire times in ``[since, until)`` with the runs recorded for them.

    Args:
        runs: the job's runs (any order; a stream is consumed once). Runs outside the window only serve to
            satisfy fire times at its edges, to bound the window and to tell skipped fire times.
        job_name: the job checked (for the report).
        schedule: the job's unix-cron schedule, or None if unknown: then no fire times are expected and
            only failed, stuck and repeated runs are found (they are facts of the records alone).
        time_zone: the schedule's tz database time zone.
        since, until: the window, aware.
        now: the check's time, aware (default: this machine's clock). Fire times after it are not
            expected yet (a run recorded for one is not unexpected either).
        grace_seconds: how long after a fire time's last candidate instant a run may still appear.
        active_since: when the job got its schedule (``DEDUP_SCHEDULE_SINCE``), aware; None: the newest run's
            stored ``schedule_since``, else (unless ``runs_before_window``) the earliest run's schedule time.
            No fire time before it is expected: a job is not missing runs from before it existed. After a schedule
            change time, nor is one without a record within :data:`SCHEDULE_SETTLE_SECONDS` (the deploy that
            recorded it creates the Scheduler job minutes later).
        runs_before_window: True if the job has records older than every run given (its history starts before
            the scan), so the earliest run given bounds nothing; None or False: the runs given reach back to
            the job's first record.
        paused_since: when the job was paused (``DEDUP_PAUSED_SINCE``) if it still is, aware, or None: the pause
            ``(paused_since, None)``.
        pauses: the job's pauses as ``(since, until)``, aware, until None while one lasts: the fire times of each
            without a record are one ``paused`` finding (with their number, first and last), neither expected nor
            missed; a run recorded for one still counts. A fire time before a pause or after it is expected as
            ever (a pause never hides a run missed before it).

    Returns:
        A :class:`Report`. A fire time that did not exist on the wall clock (clocks went forward) is
        never missed; one that occurred twice (clocks went back) is satisfied by a run at either
        instant (:class:`~scheduler_dedup.handler.schedule.cron.FireTime`), and run at both is ``dst_repeated``. A fire
        time without a record while the previous run was still running or retried is ``skipped``, not missed.
        For a schedule whose form Cloud Scheduler's cron page does not settle (``0 0 */2 * 1``, ``0 22-2 * * *``:
        :func:`~scheduler_dedup.handler.schedule.cron.unsettled_cron_forms`), either reading is accepted: a fire time of
        every reading is expected, one of only some readings (``FireTime.ambiguous``) is neither missed when
        absent nor unexpected when run.

    Raises:
        ValueError: invalid schedule, time zone or naive bounds.
    """
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    since, until = since.astimezone(timezone.utc), until.astimezone(timezone.utc)
    fires = [] if schedule is None else list(fire_times(schedule, time_zone, since, until))
    slots: dict[datetime, list[int]] = {}
    for i, fire in enumerate(fires):
        for instant in fire.candidates:
            slots.setdefault(instant, []).append(i)
    for indices in slots.values():
        indices.sort(key=lambda i: _PREFERENCE[fires[i].dst])
    recorded: list[set[datetime]] = [set() for _ in fires]
    findings: list[Finding] = []
    unmatched: list[HistoryRun] = []  # not a fire time: unexpected, unless from before the job had its schedule
    busy: list[tuple[datetime, datetime, datetime]] = []  # (schedule time, busy from, when it stopped occupying Scheduler)
    newest: HistoryRun | None = None
    earliest: datetime | None = None
    seen = 0
    kept: list[HistoryRun] = []  # scheduled runs that carry the schedule they ran under (_schedule_before)
    for run in runs:
        in_window = since <= run.schedule_time < until
        seen += in_window
        if not run.manual:
            kept.append(run)
            earliest = run.schedule_time if earliest is None else min(earliest, run.schedule_time)
            if newest is None or run.schedule_time > newest.schedule_time:
                newest = run
            end = run.finished_at or (now if run.state == IN_PROGRESS else None)
            if end is not None and run.claimed_at is not None:
                busy.append((run.schedule_time, _busy_from(run, grace_seconds), end))
        match = None if run.manual else next(iter(slots.get(run.schedule_time, ())), None)
        if match is not None:
            recorded[match].add(run.schedule_time)
        elif not in_window:
            continue
        elif run.manual:
            findings.append(Finding(UNEXPECTED, run.schedule_time, "forced run (gcloud scheduler jobs run or "
                                    "'Force run'), keyed apart from the scheduled run", run=run))
        elif schedule is not None:  # without a schedule there are no fire times to hold the run against
            unmatched.append(run)
        matched = fires[match] if match is not None else None
        if run.status == FAILED:
            findings.append(Finding(FAILED_RUN, run.schedule_time, f"recorded failed: {run.error or 'no error text'}",
                                    matched, run))
        if run.stuck:
            since_claim = f" since {rfc3339(run.claimed_at)}" if run.claimed_at else ""
            findings.append(Finding(STUCK_RUN, run.schedule_time,
                                    f"in progress{since_claim} but its lease expired: the attempt died and no retry "
                                    "took it over", matched, run))
        if run.took_over:
            previous = (run.previous_attempt_id or "?")[:8]
            findings.append(Finding(REPEATED, run.schedule_time,
                                    f"attempt {run.attempt_id[:8]} took over from {previous} "
                                    "after its lease expired: the job ran again (twice, if the earlier attempt had "
                                    "started it)", matched, run))
    bound, source = _active_since(active_since, newest, earliest, runs_before_window)
    settled = None
    if source == SINCE_SCHEDULE_CHANGE and bound is not None:  # until the job's first run since then, at the latest
        delivered = sorted(instant for instants in recorded for instant in instants if instant >= bound)
        settled = _settled(bound, delivered, *_schedule_before(kept, bound), (schedule, time_zone))
    for run in unmatched:
        if settled is not None and bound is not None and bound <= run.schedule_time < settled:
            continue  # the old schedule's delivery while Scheduler had not applied the change yet
        if bound is None or run.schedule_time >= bound:
            findings.append(Finding(UNEXPECTED, run.schedule_time,
                                    f"not a fire time of {schedule!r} in {time_zone}", run=run))
    busy.sort()
    expected = hits = 0
    windows = [*pauses, *([(paused_since, None)] if paused_since is not None else [])]
    paused: dict[Pause, list[FireTime]] = {}
    for fire, instants in zip(fires, recorded):
        if not fire.required or fire.first > now or (bound is not None and fire.due < bound):
            continue
        if not instants and settled is not None and fire.due < settled:
            continue  # the job may not have existed yet, or not been allowed to call (SCHEDULE_SETTLE_SECONDS)
        pause = next((w for w in windows if w[0] <= fire.first and (w[1] is None or fire.first < w[1])), None)
        if not instants and pause is not None:
            paused.setdefault(pause, []).append(fire)
            continue
        expected += 1
        if instants:
            hits += 1
            if fire.dst == "repeated" and len(instants) > 1:
                findings.append(Finding(DST_REPEATED, fire.due, "the wall-clock time occurred twice (clocks went "
                                        "back) and Scheduler delivered both instants, so the job ran twice; "
                                        "DEDUP_KEY_LOCAL_TIME=true keys runs on the wall clock and runs it once",
                                        fire))
            continue
        busy_run = _running_at(busy, fire.first)
        if busy_run is not None:
            findings.append(Finding(SKIPPED_BUSY, fire.due, f"no record: Scheduler skipped it while the run of "
                                    f"{rfc3339(busy_run[0])} was still running or retried (from "
                                    f"{rfc3339(busy_run[1])} until {rfc3339(busy_run[2])}); Scheduler runs one "
                                    "execution of a job at a time", fire))
        elif now >= fire.due + timedelta(seconds=grace_seconds):
            findings.append(Finding(MISSED, fire.due, _missed_detail(fire, bound is None and earliest is None), fire))
        else:
            findings.append(Finding(LATE, fire.due, f"no record yet; within the {grace_seconds:g} s grace period",
                                    fire))
    for (start, end), spanned in paused.items():
        state = f"is paused since {rfc3339(start)}" if end is None else \
            f"was paused from {rfc3339(start)} until {rfc3339(end)}"
        findings.append(Finding(PAUSED, start.astimezone(timezone.utc),
                                f"the job {state}: {len(spanned)} fire time(s) from {rfc3339(spanned[0].due)} to "
                                f"{rfc3339(spanned[-1].due)} were not delivered, as a paused job's are; not missed",
                                spanned[0]))
    findings.sort(key=lambda f: (f.schedule_time, KINDS.index(f.kind)), reverse=True)
    return Report(job_name=job_name, schedule=schedule, time_zone=time_zone, since=since, until=until, now=now,
                  grace_seconds=grace_seconds, expected=expected, recorded=hits, runs=seen,
                  findings=tuple(findings), active_since=bound, active_since_source=source)


def _active_since(given: datetime | None, newest: HistoryRun | None, earliest: datetime | None,
                  runs_before_window: bool | None) -> tuple[datetime | None, str | None]:
    """The start of the job's current schedule, and what says so (see :func:`compare`)."""
    if given is not None:
        return given.astimezone(timezone.utc), SINCE_SCHEDULE_CHANGE
    if newest is not None and newest.schedule_since is not None:
        return newest.schedule_since, SINCE_SCHEDULE_CHANGE
    if earliest is not None and not runs_before_window:
        return earliest, SINCE_EARLIEST_RECORD
    return None, None


def _schedule_before(runs: list[HistoryRun], bound: datetime) -> tuple[bool, tuple[str, str] | None]:
    """What the job ran under before ``bound``: (False, None) when no run is older (a fresh deploy); else (True,
    (schedule, time zone)) of the newest older run that stored its schedule, or (True, None) when none did."""
    older = sorted((run for run in runs if run.schedule_time < bound), key=lambda r: r.schedule_time, reverse=True)
    stored = next((run for run in older if run.schedule), None)
    return bool(older), (stored.schedule or "", stored.time_zone or DEFAULT_TIME_ZONE) if stored else None


def _settled(bound: datetime, delivered: list[datetime], changed: bool, old: tuple[str, str] | None,
             new: tuple[str | None, str]) -> datetime:
    """When the job's schedule since ``bound`` took effect (:data:`SCHEDULE_SETTLE_SECONDS` after it at the latest).

    A fresh deploy (``changed`` False: no run before ``bound``): at its first delivery, the job exists from then on.
    A schedule change: at the first delivery the ``old`` schedule cannot explain, since Scheduler applies a change
    late and the old schedule's delivery at a time both share proves nothing (oss-fuzz #7670); never before the
    settle time when the old schedule is not known (``old`` None)."""
    latest = bound + timedelta(seconds=SCHEDULE_SETTLE_SECONDS)
    if not changed or old == new:
        return min([latest, *delivered])
    if old is None:
        return latest
    return next((t for t in delivered if t < latest and not is_fire_time(old[0], old[1], t)), latest)


def _busy_from(run: HistoryRun, grace_seconds: float) -> datetime:
    """When Scheduler began the run: at its schedule time, when it sent the first attempt, if the record was claimed
    within the grace period (the retry window, in which deliveries that failed before claiming, released, leave no
    trace but the later claim: Scheduler skips fire times while it retries them, Retry jobs page); else (a delivery
    replayed long after its time) at its claim."""
    assert run.claimed_at is not None
    if run.schedule_time <= run.claimed_at <= run.schedule_time + timedelta(seconds=grace_seconds):
        return run.schedule_time
    return run.claimed_at


def _running_at(busy: list[tuple[datetime, datetime, datetime]],
                instant: datetime) -> tuple[datetime, datetime, datetime] | None:
    """The run scheduled last before ``instant``, if it was still running (or recorded later, after retries) at it:
    Scheduler was busy with it then (from :func:`_busy_from`). It ends when the run was recorded finished, so a job that outlived its attempt deadline and whose last 409-answered retry came later counts as less busy
    than Scheduler was (erring towards "missed")."""
    index = bisect.bisect_left(busy, (instant,)) - 1
    if index >= 0 and busy[index][1] <= instant < busy[index][2]:
        return busy[index]
    return None


def _missed_detail(fire: FireTime, no_records: bool) -> str:
    text = ("no record: Scheduler did not deliver it (job paused or deleted, handler down, caller refused) "
            "or every attempt failed before claiming or released its claim")
    if fire.dst == "repeated":
        text += "; the wall-clock time occurred twice (clocks went back) and neither instant has a record"
    if no_records:
        text += ("; the job has no run record at all, so when it was created is unknown (the component sets "
                 "DEDUP_SCHEDULE_SINCE; give --since after its creation)")
    return text


@dataclass(frozen=True)
class JobScope:
    """Which run records are one job's: records are keyed and queried by the job's short id, and jobs with one id in
    two projects or Scheduler regions may share a store, so a job known by its full name
    (``projects/P/locations/L/jobs/J``) owns only the records of its project and region.

    Attributes:
        job_id: the short id (``X-CloudScheduler-JobName``'s last part), what the history queries by.
        project, location: the job's project and region, or None where not known (every record of ``job_id``).
    """

    job_id: str
    project: str | None = None
    location: str | None = None

    @classmethod
    def parse(cls, job: str) -> "JobScope":
        """A short id (every record of it) or a full name ``projects/P/locations/L/jobs/J`` (only P's, in L)."""
        match = SCHEDULER_JOB_RE.match(job)
        return cls(match["job"], match["project"], match["location"]) if match else cls(job)

    @property
    def narrowed(self) -> bool:
        return self.project is not None or self.location is not None

    def owns(self, run: HistoryRun) -> bool:
        return (self.project is None or run.project == self.project) and \
            (self.location is None or run.location == self.location)

    def runs(self, history: RunHistory, *, since: datetime | None = None, until: datetime | None = None,
             on_page: Callable[[int], None] | None = None) -> Iterator[HistoryRun]:
        """This job's runs, newest first (:meth:`RunHistory.runs` filtered by :meth:`owns`)."""
        return (run for run in history.runs(self.job_id, since=since, until=until, on_page=on_page) if self.owns(run))

    def latest(self, history: RunHistory) -> HistoryRun | None:
        """This job's newest run, or None."""
        return history.latest(self.job_id) if not self.narrowed else next(self.runs(history), None)

    def has_runs_before(self, history: RunHistory, until: datetime) -> bool:
        """True if this job has a run with a schedule time before ``until``."""
        if not self.narrowed:
            return history.has_runs_before(self.job_id, until)
        return next(self.runs(history, until=until), None) is not None


def check(history: RunHistory, job_name: str, *, schedule: str, time_zone: str, since: datetime,
          until: datetime, now: datetime | None = None, grace_seconds: float = DEFAULT_GRACE_SECONDS,
          active_since: datetime | None = None, on_page: Callable[[int], None] | None = None,
          project: str | None = None, location: str | None = None, paused_since: datetime | None = None,
          pauses: Sequence[Pause] = ()) -> Report:
    """Read the job's runs around ``[since, until)`` and :func:`compare` them with the schedule.

    The query reaches a day beyond both ends, so a fire time whose instants straddle an edge (a
    repeated wall-clock hour) still finds its run. Without ``active_since``, one more query tells whether the job's
    history starts before that (then its earliest record bounds nothing).

    Args:
        project, location: keep only runs keyed on this project and this Scheduler region (a handler's own job,
            ``DEDUP_SCHEDULER_JOB``); None: every run of ``job_name``. Records are queried by the job's short id,
            and jobs with one id in two projects or regions may share a store: without these, one job's records
            would count as the other's runs (hiding its missed runs, and answering its failure texts).
    """
    scope = JobScope(job_name, project, location)
    start = since - timedelta(days=1)
    older: bool | None = None
    if active_since is None:
        older = scope.has_runs_before(history, start)
    runs = scope.runs(history, since=start, until=until + timedelta(days=1), on_page=on_page)
    return compare(runs, job_name=job_name, schedule=schedule, time_zone=time_zone, since=since, until=until,
                   now=now, grace_seconds=grace_seconds, active_since=active_since, runs_before_window=older,
                   paused_since=paused_since, pauses=pauses)


#: :attr:`RunAlert.kind` values: what the run check finds in the records besides missed and stuck runs.
FAILING, RECOVERED, LONG_RUN = "failing", "recovered", "long_run"


@dataclass(frozen=True)
class RunAlert:
    """One alert-worthy change the records show, at the moment it happened.

    Attributes:
        kind: ``failing`` (this run's failure made ``streak`` consecutive failed runs, reaching the failure
            threshold), ``recovered`` (this run completed after ``streak`` consecutive failures that reached it) or
            ``long_run`` (this run is still in progress ``max_runtime_seconds`` after its claim, renewals or not).
        run: the run concerned.
        at: when it happened, aware UTC: the run's ``finished_at``, or its claim plus the maximum runtime.
        streak: the consecutive failed runs (0 for ``long_run``).
        detail: why, in words.
    """

    kind: str
    run: HistoryRun
    at: datetime
    streak: int
    detail: str


def run_alerts(runs: Iterable[HistoryRun], *, since: datetime, until: datetime, failure_threshold: int = 1,
               max_runtime_seconds: float | None = None) -> list[RunAlert]:
    """The :class:`RunAlert` values that happened in ``[since, until)``, oldest first.

    A failure streak counts finished scheduled runs (``completed`` or ``failed``) in schedule-time order; a forced run
    or one in progress neither extends nor breaks it. ``failing`` is reported once per streak, by the run that brings
    it to ``failure_threshold``; ``recovered`` by the first completed run after it. Consecutive checks whose windows
    tile time report each once. The run check reads runs scheduled up to a day (plus the maximum runtime) before it,
    so a run delivered more than a day after its schedule time (a backfill of old fire times) is not counted. ``runs`` must reach back past the window by at least ``failure_threshold`` finished
    runs (:func:`recent_runs`), or a streak begun before them counts short.

    Raises:
        ValueError: ``failure_threshold`` below 1 or ``max_runtime_seconds`` not positive.
    """
    if failure_threshold < 1:
        raise ValueError(f"failure_threshold={failure_threshold} must be at least 1")
    if max_runtime_seconds is not None and max_runtime_seconds <= 0:
        raise ValueError(f"max_runtime_seconds={max_runtime_seconds} must be positive")
    found: list[RunAlert] = []
    streak = 0
    for run in sorted((r for r in runs if not r.manual), key=lambda r: r.schedule_time):
        if run.state == IN_PROGRESS and max_runtime_seconds is not None and run.claimed_at is not None:
            limit = run.claimed_at + timedelta(seconds=max_runtime_seconds)
            if since <= limit < until:
                found.append(RunAlert(LONG_RUN, run, limit, 0, f"still in progress {max_runtime_seconds:g} s after "
                                      f"its claim at {rfc3339(run.claimed_at)} (max_runtime_seconds), whether or not "
                                      "its lease is renewed: the job may hang"))
        if run.status not in (COMPLETED, FAILED) or run.finished_at is None:
            continue
        inside = since <= run.finished_at < until
        if run.status == FAILED:
            streak += 1
            if streak == failure_threshold and inside:
                found.append(RunAlert(FAILING, run, run.finished_at, streak,
                                      f"{streak} consecutive run(s) failed, the last: {run.error or 'no error text'}"))
        else:
            if streak >= failure_threshold and inside:
                found.append(RunAlert(RECOVERED, run, run.finished_at, streak,
                                      f"completed after {streak} consecutive failed run(s)"))
            streak = 0
    found.sort(key=lambda a: a.at)
    return found


def recent_runs(history: RunHistory, scope: JobScope, *, since: datetime, until: datetime,
                finished_before: int) -> list[HistoryRun]:
    """The job's runs with ``since <= schedule_time < until``, plus the ``finished_before`` newest finished runs older
    than ``since`` (what :func:`run_alerts` needs to count a streak begun before the window), newest first. Reads
    page by page and stops as soon as it has them."""
    found: list[HistoryRun] = []
    older = 0
    for run in scope.runs(history, until=until):
        if run.schedule_time < since:
            if older >= finished_before:
                break
            older += run.status in (COMPLETED, FAILED) and not run.manual
        found.append(run)
    return found
