"""Expected against recorded: lay a schedule's fire times (evaluated in the job's time zone, as Cloud Scheduler does)
over the run records and report what was missed, late, failed, retrying, stuck, repeated or unexpected
(:func:`compare`), or read the records around a window first (:func:`check`). A run whose every attempt failed
retryably is ``failed`` once its grace period (the job's retry window) has passed, with the last attempt's error: its
record is ``released``, never absent, so it is never missed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta, timezone

from scheduler_dedup.handler.core.record import FAILED, IN_PROGRESS, RELEASED
from scheduler_dedup.handler.monitoring.findings import (
    DST_REPEATED,
    FAILED_RUN,
    KINDS,
    LATE,
    MISSED,
    PAUSED,
    REPEATED,
    RETRYING,
    SINCE_EARLIEST_RECORD,
    SINCE_SCHEDULE_CHANGE,
    SKIPPED_BUSY,
    STUCK_RUN,
    UNEXPECTED,
    Finding,
    Pause,
    Report,
    in_pause,
)
from scheduler_dedup.handler.monitoring.run_history import JobScope, RunHistory
from scheduler_dedup.handler.monitoring.run_view import HistoryRun, rfc3339
from scheduler_dedup.handler.schedule.cron.fire_times import FireTime, fire_times, is_fire_time
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE

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
        instant (:class:`~scheduler_dedup.handler.schedule.cron.fire_times.FireTime`), and run at both is ``dst_repeated``. A fire
        time without a record while the previous run was still running or retried is ``skipped``, not missed.
        For a schedule whose form Cloud Scheduler's cron page does not settle (``0 0 */2 * 1``, ``0 22-2 * * *``:
        :func:`~scheduler_dedup.handler.schedule.cron.readings.unsettled_cron_forms`), either reading is accepted: a fire time of
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
            retrying = run.status == RELEASED and not run.retries_over(now, grace_seconds)
            end = now if retrying else run.finished_at or (now if run.state == IN_PROGRESS else None)
            if run.execution is not None and not retrying:
                end = run.claimed_at  # its delivery only started a downstream execution: Scheduler was free after it
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
        elif run.status == RELEASED:
            findings.append(_released_finding(run, matched, now, grace_seconds))
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
        pause = next((w for w in windows if in_pause(w, fire.first)), None)
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
    late and the old schedule's delivery at a time both share proves nothing; never before the
    settle time when the old schedule is not known (``old`` None)."""
    latest = bound + timedelta(seconds=SCHEDULE_SETTLE_SECONDS)
    if not changed or old == new:
        return min([latest, *delivered])
    if old is None:
        return latest
    return next((t for t in delivered if t < latest and not is_fire_time(old[0], old[1], t)), latest)


def _busy_from(run: HistoryRun, grace_seconds: float) -> datetime:
    """When Scheduler began the run: at its schedule time, when it sent the first attempt, if the record was claimed
    within the grace period (the retry window, in which deliveries that failed before claiming leave no
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


def _released_finding(run: HistoryRun, fire: FireTime | None, now: datetime, grace_seconds: float) -> Finding:
    """``failed`` for a released run whose retries are over (:meth:`HistoryRun.retries_over`), else ``retrying``."""
    error = run.error or "no error text"
    tries = f"{run.releases} attempt{'s' if run.releases != 1 else ''}" if run.releases else "its attempts"
    if run.retries_over(now, grace_seconds):
        return Finding(FAILED_RUN, run.schedule_time, f"every attempt failed ({tries} failed retryably and Scheduler's "
                       f"retries are over: the {grace_seconds:g} s grace period has passed); the last: {error}",
                       fire, run)
    return Finding(RETRYING, run.schedule_time, f"the last attempt failed retryably ({tries} so far), so Scheduler "
                   f"retries it within the {grace_seconds:g} s grace period: {error}", fire, run)


def _missed_detail(fire: FireTime, no_records: bool) -> str:
    text = ("no record: Scheduler did not deliver it (job paused or deleted, handler down, caller refused) "
            "or every attempt failed before claiming it")
    if fire.dst == "repeated":
        text += "; the wall-clock time occurred twice (clocks went back) and neither instant has a record"
    if no_records:
        text += ("; the job has no run record at all, so when it was created is unknown (the component sets "
                 "DEDUP_SCHEDULE_SINCE; give --since after its creation)")
    return text


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
