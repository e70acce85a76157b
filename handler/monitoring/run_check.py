"""The run check: the watchdog job's ``POST /dedup/run-check``, which compares the handler's own job's expected fire
times with its run records and logs what was missed.

It reads records only. Per expected fire time without a record past its grace it logs one ``missed_run`` line, per
run in progress past its lease one ``stuck_run`` line, once each a ``failure_streak``, ``run_recovered`` or
``long_run`` line (:mod:`.run_alerts`), and per completed check one ``run_check`` line, the heartbeat a
metric-absence policy watches. Consecutive checks one window apart tile time, so each missed run is reported once.
Request, answers and alerts: docs/monitoring.md#the-run-check and docs/reference/http-answers.md#run-check.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import RequestHeaderError, store_config_error, store_failure
from scheduler_dedup.handler.core.misconfiguration import log_store_config_error
from scheduler_dedup.handler.core.logs import LogEvent, LogField
from scheduler_dedup.handler.core.paths import CHECK_PATH
from scheduler_dedup.handler.monitoring.job_state import JobState
from scheduler_dedup.handler.monitoring.comparison import check
from scheduler_dedup.handler.monitoring.findings import MISSED, PAUSED, STUCK_RUN
from scheduler_dedup.handler.monitoring.run_alerts import (
    FAILING,
    LONG_RUN,
    RECOVERED,
    RunAlert,
    recent_runs,
    run_alerts,
)
from scheduler_dedup.handler.monitoring.run_history import JobScope, RunHistory
from scheduler_dedup.handler.monitoring.run_view import rfc3339
from scheduler_dedup.handler.schedule.run_key import (JOB_ID_RE, SCHEDULE_TIME_HEADER, HeaderSource, keyed_location,
                                                     parse_schedule_time)
from scheduler_dedup.handler.core.statuses import RUN_CHECK, code
from scheduler_dedup.handler.stores.base import STORE_ERRORS

log = logging.getLogger("scheduler_dedup")

__all__ = ["CHECK_PATH", "CheckRequest", "CheckRequestError", "RunCheck"]

#: Longest check window and grace period accepted, seconds (a week).
MAX_CHECK_SECONDS = 7 * 86400
#: Largest failure threshold accepted (consecutive failed runs).
MAX_FAILURE_THRESHOLD = 1000

Response = tuple[dict[str, Any], int, dict[str, str]]


class CheckRequestError(ValueError):
    """The run check's request body is not ``{"job_name", "grace_seconds", "window_seconds"}``.

    Attributes:
        field: the offending field (``body`` when the body is not a JSON object).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class CheckRequest:
    """What one run check covers.

    Attributes:
        job_name: the Scheduler job id whose runs are checked (``X-CloudScheduler-JobName`` of its deliveries).
        grace_seconds: seconds after a fire time before a run without a record is missed.
        window_seconds: the watchdog's period; the check covers one window of fire times.
        failure_threshold: consecutive failed runs before one ``failure_streak`` line (optional, default 1).
        max_runtime_seconds: a run still in progress this long after its claim is one ``long_run`` line
            (optional; absent or null: not checked).
    """

    job_name: str
    grace_seconds: float
    window_seconds: float
    failure_threshold: int = 1
    max_runtime_seconds: float | None = None

    @classmethod
    def from_body(cls, body: bytes) -> "CheckRequest":
        """Parse the JSON body.

        Raises:
            CheckRequestError: not a JSON object, or a field missing or out of range (names it).
        """
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            raise CheckRequestError("body", "is not JSON: send {\"job_name\": ..., \"grace_seconds\": ..., "
                                            "\"window_seconds\": ...}") from None
        if not isinstance(data, Mapping):
            raise CheckRequestError("body", f"must be a JSON object, got {type(data).__name__}")
        job_name = data.get("job_name")
        if not isinstance(job_name, str) or not job_name.strip():
            raise CheckRequestError("job_name", "is required: the Scheduler job id whose runs are checked")
        job_name = job_name.strip()
        if not JOB_ID_RE.match(job_name):
            raise CheckRequestError("job_name", f"is {job_name[:80]!r} ({len(job_name)} characters): a Scheduler job "
                                                "id is 1-500 letters, digits, '-' or '_'")
        threshold = data.get("failure_threshold", 1)
        if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= MAX_FAILURE_THRESHOLD:
            raise CheckRequestError("failure_threshold", f"{threshold!r} is not a whole number from 1 to "
                                                         f"{MAX_FAILURE_THRESHOLD}: consecutive failed runs before "
                                                         "the failure alert")
        runtime = None if data.get("max_runtime_seconds") is None else _seconds(data, "max_runtime_seconds", 1)
        return cls(job_name, _seconds(data, "grace_seconds", 0), _seconds(data, "window_seconds", 60), threshold,
                   runtime)


def _seconds(data: Mapping[str, Any], key: str, low: float) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise CheckRequestError(key, f"is required: a number of seconds, got {value!r}")
    if not low <= value <= MAX_CHECK_SECONDS:
        raise CheckRequestError(key, f"{value:g} is out of range: use {low:g} to {MAX_CHECK_SECONDS} seconds")
    return float(value)


class RunCheck:
    """Answers the watchdog's run check.

    Args:
        settings: the handler's settings (``schedule``, ``time_zone``).
        history: a reader of the run records' collection.
        server_now: the store's current time (aware UTC), the check time when the request has none.
        job_state: reads the job's state from the Cloud Scheduler API
            (:class:`~scheduler_dedup.handler.monitoring.job_state.JobStateReader`), or None: only
            ``DEDUP_PAUSED_SINCE`` tells of a pause.
    """

    def __init__(self, settings: Settings, history: RunHistory, server_now: Any,
                 job_state: Callable[[], JobState] | None = None):
        self.settings = settings
        self.history = history
        self.server_now = server_now
        self.job_state = job_state

    def handle(self, headers: HeaderSource, body: bytes) -> Response:
        """Run one check; returns ``(body, status_code, extra_headers)`` (see the module docstring)."""
        schedule = self.settings.schedule
        if schedule is None:
            error = "DEDUP_SCHEDULE is not set: the run check needs the job's schedule (the component sets it)"
            log.error("run check not possible: %s", error, extra={LogField.OUTCOME: "not_configured"})
            return {"status": "not_configured", "error": error}, code(RUN_CHECK, "not_configured"), {}
        try:
            request = CheckRequest.from_body(body)
            now = self._check_time(headers)
        except (CheckRequestError, RequestHeaderError) as exc:
            field = exc.field if isinstance(exc, CheckRequestError) else exc.header
            log.warning("rejected run check: %s", exc, extra={LogField.OUTCOME: "bad_request", LogField.HEADER: field})
            return {"status": "bad_request", "error": str(exc), "field": field}, code(RUN_CHECK, "bad_request"), {}
        except STORE_ERRORS as exc:
            return self._store_error(exc)
        own = self.settings.scheduler_job
        if own is not None and request.job_name != own.rsplit("/", 1)[1]:
            error = (f"job_name {request.job_name!r} is not this handler's job: it checks only {own} "
                     "(DEDUP_SCHEDULER_JOB); ask that job's own handler")
            log.warning("refused run check: %s", error, extra={LogField.OUTCOME: "forbidden",
                                                              LogField.HEADER: "job_name",
                                                              LogField.HTTP_STATUS: code(RUN_CHECK, "forbidden")})
            return ({"status": "forbidden", "error": error, "field": "job_name", "job": own}, code(RUN_CHECK, "forbidden"),
                    {})
        project = location = None
        if own is not None:  # projects/P/locations/L/jobs/J: only this job's runs, not another's of the same id
            _, project, _, location, _, _ = own.split("/")
            location = keyed_location(location, self.settings.run_key_location)  # as its deliveries keyed them
        grace = timedelta(seconds=request.grace_seconds)
        since = now - timedelta(seconds=request.window_seconds) - grace
        until = now - grace
        scope = JobScope(request.job_name, project, location)
        try:
            # the stack's pause (going on, or the last one, over), else a pause made outside the stack, if any
            pause = self.settings.pause
            paused_since = pause[0] if pause is not None and pause[1] is None else self._paused_outside(scope)
            pauses = [p for p in (pause, (paused_since, None) if paused_since else None) if p is not None]
            report = check(self.history, request.job_name, schedule=schedule, time_zone=self.settings.time_zone,
                           since=since, until=until, now=now, grace_seconds=request.grace_seconds,
                           active_since=self.settings.schedule_since, project=project, location=location,
                           pauses=list(dict.fromkeys(pauses)))
            # runs that finished (or outlived the maximum runtime) in the window before the check; the runtime
            # limit and a day of retries bound how old a run still in progress may be
            reach = now - timedelta(seconds=request.window_seconds + (request.max_runtime_seconds or 0) + 86400)
            recent = recent_runs(self.history, scope, since=reach, until=now,
                                 finished_before=request.failure_threshold)
        except STORE_ERRORS as exc:
            return self._store_error(exc)
        alerts = run_alerts(recent, since=now - timedelta(seconds=request.window_seconds), until=now,
                            failure_threshold=request.failure_threshold,
                            max_runtime_seconds=request.max_runtime_seconds, grace_seconds=request.grace_seconds)
        self._log_alerts(request.job_name, alerts)
        missed = sorted(report.of(MISSED), key=lambda f: f.schedule_time)
        stuck = sorted(report.of(STUCK_RUN), key=lambda f: f.schedule_time)
        for finding in missed:
            log.error("missed run of %s at %s: %s", request.job_name, rfc3339(finding.schedule_time), finding.detail,
                      extra={LogField.EVENT: LogEvent.MISSED_RUN, LogField.JOB_NAME: request.job_name,
                             LogField.SCHEDULE_TIME: rfc3339(finding.schedule_time),
                             LogField.GRACE_SECONDS: request.grace_seconds, LogField.ERROR: finding.detail})
        for finding in stuck:
            log.error("stuck run of %s at %s: %s", request.job_name, rfc3339(finding.schedule_time), finding.detail,
                      extra={LogField.EVENT: LogEvent.STUCK_RUN, LogField.JOB_NAME: request.job_name,
                             LogField.SCHEDULE_TIME: rfc3339(finding.schedule_time),
                             LogField.RUN_ID: finding.run.run_id if finding.run else None,
                             LogField.ERROR: finding.detail})
        log.info("run check of %s: %d expected, %d missed, %d stuck", request.job_name, report.expected, len(missed),
                 len(stuck), extra={LogField.EVENT: LogEvent.RUN_CHECK, LogField.JOB_NAME: request.job_name,
                                    LogField.EXPECTED: report.expected, LogField.MISSED: len(missed),
                                    LogField.STUCK: len(stuck), LogField.GRACE_SECONDS: request.grace_seconds})
        summary = report.to_json()
        of = {kind: [rfc3339(a.run.schedule_time) for a in alerts if a.kind == kind]
              for kind in (FAILING, RECOVERED, LONG_RUN)}
        status = ("missed" if missed else "stuck" if stuck else "failing" if of[FAILING] else
                  "long_run" if of[LONG_RUN] else "paused" if report.of(PAUSED) else "ok")
        return {
            "status": status,
            "job_name": request.job_name,
            "since": summary["since"], "until": summary["until"], "now": summary["now"],
            "grace_seconds": request.grace_seconds,
            "expected": report.expected,
            "recorded": report.recorded,
            "missed": [rfc3339(f.schedule_time) for f in missed],
            "stuck": [rfc3339(f.schedule_time) for f in stuck],
            "active_since": summary["active_since"], "active_since_source": summary["active_since_source"],
            "paused_since": rfc3339(paused_since),
            "failing": of[FAILING], "recovered": of[RECOVERED], "long_run": of[LONG_RUN],
            "findings": summary["findings"],
        }, code(RUN_CHECK, status), {}

    def _paused_outside(self, scope: JobScope) -> datetime | None:
        """When the job was paused outside the stack, as the Cloud Scheduler API tells (:mod:`.job_state`): no
        earlier than its last user update nor than its newest run; None when running or not readable (a WARNING).

        Raises:
            the store contract's errors, reading the newest run.
        """
        if self.job_state is None:
            return None
        state = self.job_state()
        if state.error is not None:
            log.warning("run check cannot read the job's state, a pause outside the stack is not recognised: %s",
                        state.error, extra={LogField.OUTCOME: "job_state_unreadable", LogField.ERROR: state.error})
            return None
        if not state.paused:
            return None
        newest = scope.latest(self.history)
        marks = [t for t in (state.updated, newest.schedule_time + timedelta(microseconds=1) if newest else None) if t]
        return max(marks) if marks else None

    @staticmethod
    def _log_alerts(job_name: str, alerts: list[RunAlert]) -> None:
        """One line per alert: ``failure_streak`` and ``long_run`` at ERROR, ``run_recovered`` at INFO (its policy
        notifies; the severity only sorts the log)."""
        events = {FAILING: (logging.ERROR, LogEvent.FAILURE_STREAK), RECOVERED: (logging.INFO, LogEvent.RUN_RECOVERED),
                  LONG_RUN: (logging.ERROR, LogEvent.LONG_RUN)}
        for alert in alerts:
            level, event = events[alert.kind]
            log.log(level, "%s run of %s at %s: %s", alert.kind, job_name, rfc3339(alert.run.schedule_time),
                    alert.detail, extra={LogField.EVENT: event, LogField.JOB_NAME: job_name,
                                         LogField.SCHEDULE_TIME: rfc3339(alert.run.schedule_time),
                                         LogField.RUN_ID: alert.run.run_id, LogField.ERROR: alert.detail})

    def _check_time(self, headers: HeaderSource) -> datetime:
        """The watchdog's schedule time, but never later than the store's clock (a forced run sends the future)."""
        now: datetime = self.server_now()
        sent = [value for name, value in headers.items() if name.lower() == SCHEDULE_TIME_HEADER.lower()]
        if not sent:
            return now
        return min(parse_schedule_time(sent[0]), now)

    @staticmethod
    def _store_error(exc: Exception) -> Response:
        config = store_config_error(exc)
        if config is not None:  # its own answer: the fix, not "retry later"
            log_store_config_error(log, config, "run check", {LogField.OUTCOME: "store_misconfigured",
                                                              LogField.ERROR: config.fix})
            return ({"status": "store_misconfigured", "error": f"{config.store} refuses every call as it is set up "
                     f"({store_failure(exc)[1]}); the check did not run", "fix": config.fix},
                    code(RUN_CHECK, "store_misconfigured"), {})
        store, cause = store_failure(exc)
        log.error("run check failed: %s: %s", store, exc, extra={LogField.OUTCOME: "store_error"})
        return {"status": "store_error",
                "error": f"{store} failed ({cause}); the check did not run, retry later"}, code(RUN_CHECK, "store_error"), {}
