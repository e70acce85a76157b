"""What the run check alerts on besides missed and stuck runs: a failure streak reaching its threshold, the
recovery after it, and a run in progress past its maximum runtime (:func:`run_alerts`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_dedup.handler.core.record import COMPLETED, EXECUTING_STATUSES, FAILED, RELEASED, RUNNING_DOWNSTREAM
from scheduler_dedup.handler.monitoring.run_history import JobScope, RunHistory
from scheduler_dedup.handler.monitoring.run_view import HistoryRun, rfc3339

#: :attr:`RunAlert.kind` values: what the run check finds in the records besides missed and stuck runs.
FAILING, RECOVERED, LONG_RUN = "failing", "recovered", "long_run"


@dataclass(frozen=True)
class RunAlert:
    """One alert-worthy change the records show, at the moment it happened.

    Attributes:
        kind: ``failing`` (this run's failure made ``streak`` consecutive failed runs, reaching the failure
            threshold), ``recovered`` (this run completed after ``streak`` consecutive failures that reached it) or
            ``long_run`` (this run is still in progress, or its downstream execution still runs,
            ``max_runtime_seconds`` after its claim, renewals or not).
        run: the run concerned.
        at: when it happened, aware UTC: when the run's outcome was recorded (a released run's: when its retries were
            over, :func:`finished`), or its claim plus the maximum runtime.
        streak: the consecutive failed runs (0 for ``long_run``).
        detail: why, in words.
    """

    kind: str
    run: HistoryRun
    at: datetime
    streak: int
    detail: str


def finished(run: HistoryRun, grace_seconds: float) -> tuple[str, datetime] | None:
    """``(completed | failed, when)`` of a run that is over, else None: a completed or failed run when its outcome was
    recorded, ``finished_at`` or, for a run settled from its downstream execution, ``settled_at`` (its execution may
    have ended checks before the settle; a ``settled_at`` left by an earlier attempt is before ``finished_at``); a
    released run as failed once its retries are over, at its last release or the end of its grace
    period, whichever is later; a run in progress (or running downstream), skipped, cancelled or still retried is not
    over."""
    if run.finished_at is None:
        return None
    if run.status in (COMPLETED, FAILED):
        return run.status, max(run.finished_at, run.settled_at or run.finished_at)
    if run.status == RELEASED:
        return FAILED, max(run.finished_at, run.schedule_time + timedelta(seconds=grace_seconds))
    return None


def run_alerts(runs: Iterable[HistoryRun], *, since: datetime, until: datetime, failure_threshold: int = 1,
               max_runtime_seconds: float | None = None, grace_seconds: float = 0.0) -> list[RunAlert]:
    """The :class:`RunAlert` values that happened in ``[since, until)``, oldest first.

    A failure streak counts finished scheduled runs (``completed`` or ``failed``, and ``released`` ones whose
    ``grace_seconds``, the job's retry window, are over by ``until``: every attempt failed, :func:`finished`) in
    schedule-time order; a forced run or one in progress (or still retried) neither extends nor breaks it. ``failing`` is reported once per streak, by the run that brings
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
        if run.state in EXECUTING_STATUSES and max_runtime_seconds is not None and run.claimed_at is not None:
            limit = run.claimed_at + timedelta(seconds=max_runtime_seconds)
            if since <= limit < until:
                what = (f"its downstream execution {run.execution} still runs" if run.state == RUNNING_DOWNSTREAM
                        else "still in progress")
                found.append(RunAlert(LONG_RUN, run, limit, 0, f"{what} {max_runtime_seconds:g} s after "
                                      f"its claim at {rfc3339(run.claimed_at)} (max_runtime_seconds), whether or not "
                                      "its lease is renewed: the job may hang"))
        over = finished(run, grace_seconds)
        if over is None or (run.status == RELEASED and over[1] >= until):
            continue  # a released run still retried at the check's time: not over yet
        status, at = over
        inside = since <= at < until
        if status == FAILED:
            streak += 1
            if streak == failure_threshold and inside:
                found.append(RunAlert(FAILING, run, at, streak,
                                      f"{streak} consecutive run(s) failed, the last: {run.error or 'no error text'}"))
        else:
            if streak >= failure_threshold and inside:
                found.append(RunAlert(RECOVERED, run, at, streak,
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
            older += run.status in (COMPLETED, FAILED, RELEASED) and not run.manual
        found.append(run)
    return found
