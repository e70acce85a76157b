"""The HTTP adapter: a Cloud Scheduler delivery in, a JSON response out.

Every answer and its status code is a row of :data:`~scheduler_dedup.handler.core.statuses.DELIVERY`. In short:
- 200 ``processed`` / ``duplicate`` / ``failed`` / ``skipped_overlap`` (the job's overlap policy kept it from
  running beside another run, :mod:`~scheduler_dedup.handler.protocol.overlap_lease`): Scheduler stops on 2xx.
- 409 ``in_progress`` / ``fenced``: another attempt holds the run; a non-2xx lets Scheduler's
  retry config try again later. Never 503: App Engine-style front ends retry 503 outside the
  job's retry count.
- 400: a missing or malformed Scheduler header; nothing is written.
- 200 ``paused``: the stack pauses the job (``DEDUP_PAUSED_SINCE``); nothing runs or is written.
- 403 ``forbidden``: the delivery names another job than the handler's own (``DEDUP_SCHEDULER_JOB``); nothing
  is read or written.
- 200 ``failed`` also for a job that raised ``SystemExit`` (:class:`~scheduler_dedup.handler.protocol.job.JobExitedError`).
- 500: a retryable job failure, after the run was released (recorded ``released`` with the same ``error``, the
  exception's type and message, and ``output``, the tail of what the job printed, which the answer carries too); or
  the run store failed (``store_error``,
  which says whether the job ran and what the next delivery will do), or refuses every call as it is set up
  (``store_misconfigured``, with the ``fix``; logged as ERROR once per process, WARNING after).

The bodies are :mod:`scheduler_dedup.handler.service.answers`' JSON contract.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from scheduler_dedup.handler.service.answers import outcome_answer, store_error_body, store_misconfigured_body
from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import (OtherJobError, RequestHeaderError, StoreConfigError, StoreError,
                                                 store_config_error)
from scheduler_dedup.handler.core.downstream import ExecutionControl
from scheduler_dedup.handler.core.misconfiguration import log_store_config_error, store_answered
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome, RunOutcome
from scheduler_dedup.handler.protocol.job import Job, OutputTail, ScheduledRun, call_job, captured_output
from scheduler_dedup.handler.protocol.catch_up import CATCH_UP_LEFT_FIELD, CatchUpBounds, missed_keys
from scheduler_dedup.handler.schedule.catch_up_budget import catch_up_budget_seconds
from scheduler_dedup.handler.schedule.cron.previous import previous_fire_time
from scheduler_dedup.handler.protocol.overlap_lease import OverlapGuard
from scheduler_dedup.handler.stores.base import STORE_ERRORS
from scheduler_dedup.handler.core.logs import LogEvent, LogField
from scheduler_dedup.handler.schedule.run_key import HeaderSource, RunKey, run_key_from_headers
from scheduler_dedup.handler.core.statuses import DELIVERY, code
from scheduler_dedup.handler.monitoring.findings import Pause, in_pause
from scheduler_dedup.handler.monitoring.run_view import rfc3339

log = logging.getLogger("scheduler_dedup")

Response = tuple[dict[str, Any], int, dict[str, str]]

#: Status code per outcome, from the delivery answer table (:data:`~scheduler_dedup.handler.core.statuses.DELIVERY`).
_STATUS_CODES = {outcome: code(DELIVERY, outcome.value) for outcome in Outcome}


class SchedulerHandler:
    """Deduplicates Cloud Scheduler deliveries and runs ``job`` once per scheduled run.

    Args:
        settings: the handler's settings.
        idempotency: the claim/lease/fence/complete machinery on the run store.
        job: the callable run once per run, with a :class:`ScheduledRun`.
        executions: reads and cancels the downstream executions a proxy target starts, or None (a python job): the
            overlap policy asks it whether the previous run still executes.
    """

    def __init__(self, settings: Settings, idempotency: Idempotency, job: Job,
                 executions: ExecutionControl | None = None):
        self.settings = settings
        self.idempotency = idempotency
        self.job = job
        self.overlap = OverlapGuard(idempotency.store, settings.overlap, idempotency.lease_seconds,
                                    downstream=executions, retention_seconds=idempotency.retention_seconds,
                                    on_lease_lost=idempotency.on_lease_lost)

    def handle(self, headers: HeaderSource) -> Response:
        """Handle one delivery given its request headers.

        Returns:
            ``(body, status_code, extra_headers)``; body is a JSON object with ``status`` and
            ``run_id`` (except for 400, which has ``error`` and no run id).

        A store failure gives 500 ``store_error`` (Scheduler retries); its body says whether the
        job ran and what the next delivery will do.
        """
        started = time.monotonic()
        server_now = self.idempotency.store.server_now()
        try:
            key = run_key_from_headers(
                headers,
                default_project=self.settings.project,
                server_now=server_now,
                manual_tolerance_seconds=self.settings.manual_tolerance_seconds,
                wall_clock_zone=self.settings.time_zone if self.settings.key_local_time else None,
                own_job=self.settings.scheduler_job, key_location=self.settings.run_key_location,
            )
        except OtherJobError as exc:
            log.warning("refused delivery for another job: %s", exc, extra={
                LogField.EVENT: LogEvent.DELIVERY, LogField.OUTCOME: "forbidden", LogField.HEADER: exc.header,
                LogField.HTTP_STATUS: code(DELIVERY, "forbidden")})
            return ({"status": "forbidden", "error": str(exc), "header": exc.header, "job": exc.own_job},
                    code(DELIVERY, "forbidden"), {})
        except RequestHeaderError as exc:
            log.warning("rejected delivery: %s", exc, extra={
                LogField.EVENT: LogEvent.DELIVERY, LogField.OUTCOME: "bad_request", LogField.HEADER: exc.header,
                LogField.HTTP_STATUS: code(DELIVERY, "bad_request")})
            return {"status": "bad_request", "error": str(exc), "header": exc.header}, code(DELIVERY, "bad_request"), {}

        pause = self.settings.pause
        if pause is not None and (in_pause(pause, server_now) or in_pause(pause, key.schedule_time)):
            return self._paused(key, pause)
        try:
            caught_up, left = self._catch_up(key, started)
            outcome = self._run(key, None if left is None else left.schedule_time)
        except StoreError as exc:
            config = store_config_error(exc.__cause__)
            if config is not None:
                return self._misconfigured(key, exc, config)
            body = store_error_body(exc, self.idempotency.lease_seconds)
            log.error("%s failed: %s", self.idempotency.store.display_name, exc.__cause__, extra={
                LogField.EVENT: LogEvent.DELIVERY, LogField.RUN_ID: key.run_id, LogField.JOB_NAME: key.job_name,
                LogField.ATTEMPT_ID: exc.attempt_id, LogField.OUTCOME: "store_error", LogField.STEP: exc.step,
                LogField.EXECUTED: exc.executed, LogField.HTTP_STATUS: code(DELIVERY, "store_error"),
                LogField.ERROR: body["error"]})
            return body, code(DELIVERY, "store_error"), {}
        store_answered()
        body, status, extra = _response(outcome)
        if caught_up:
            body["caught_up"] = caught_up
        if left is not None:
            body[CATCH_UP_LEFT_FIELD] = left.schedule_time_rfc3339
        _log_outcome(key, outcome, status, time.monotonic() - started)
        return body, status, extra

    def _paused(self, key: RunKey, pause: Pause) -> Response:
        """200 ``paused``: the delivery came during the stack's pause, or its fire time is in it. Nothing runs and
        nothing is written, so run history reports the fire time in the pause as paused, as it reports one that
        Scheduler never delivered."""
        since, until = (rfc3339(t) for t in pause)
        error = (f"the job is paused by its stack since {since}" + (f" until {until}" if until else "")
                 + ": nothing ran (the component's `paused` input; DEDUP_PAUSED_SINCE / DEDUP_RESUMED_AT)")
        status = code(DELIVERY, "paused")
        log.info("delivery %s: paused", key.job_name, extra={
            LogField.EVENT: LogEvent.DELIVERY, LogField.RUN_ID: key.run_id, LogField.JOB_NAME: key.job_name,
            LogField.SCHEDULE_TIME: key.schedule_time_rfc3339, LogField.OUTCOME: "paused",
            LogField.EXECUTED: False, LogField.HTTP_STATUS: status})
        return {"status": "paused", "run_id": key.run_id, "error": error}, status, {}

    def _misconfigured(self, key: RunKey, exc: StoreError, config: StoreConfigError) -> Response:
        """500 ``store_misconfigured``; the cause and its fix logged as ERROR once per process, WARNING after."""
        body = store_misconfigured_body(exc, config, self.idempotency.lease_seconds)
        status = code(DELIVERY, "store_misconfigured")
        log_store_config_error(log, config, f"delivery {key.job_name}", {
            LogField.EVENT: LogEvent.DELIVERY, LogField.RUN_ID: key.run_id, LogField.JOB_NAME: key.job_name,
            LogField.ATTEMPT_ID: exc.attempt_id, LogField.OUTCOME: "store_misconfigured", LogField.STEP: exc.step,
            LogField.EXECUTED: exc.executed, LogField.HTTP_STATUS: status, LogField.ERROR: config.fix})
        return body, status, {}

    def _run(self, key: RunKey, catch_up_left: datetime | None = None) -> RunOutcome:
        """Execute one run of ``key`` through the claim, under the job's overlap policy; the tail of what the job
        prints goes into the record and the answer of a failed or released run. ``catch_up_left``: the oldest fire
        time this delivery's catch-up left unrun, recorded so that the next delivery goes on with it."""
        tail = OutputTail()
        previous = None if key.manual or self.settings.schedule is None else \
            previous_fire_time(self.settings.schedule, self.settings.time_zone, key.schedule_time)

        def work(attempt_id: str) -> Any:
            # Under the job's overlap policy: RunSkipped (recorded skipped_overlap) when another run executes.
            with captured_output(tail):
                return self.overlap.run(project=key.project, location=key.location, job_name=key.job_name,
                                        run_id=key.run_id, schedule_time=key.schedule_time_rfc3339,
                                        attempt_id=attempt_id,
                                        work=lambda: call_job(self.job, ScheduledRun.of(key, attempt_id, previous)))

        fields = _record_fields(key, self.settings)
        if catch_up_left is not None:
            fields[CATCH_UP_LEFT_FIELD] = catch_up_left
        return self.idempotency.execute(key.run_id, work, fields, output=lambda: tail.text)

    def _catch_up(self, key: RunKey, started: float) -> tuple[list[dict[str, Any]], RunKey | None]:
        """Run the missed fire times of the catch-up window, oldest first (:mod:`~scheduler_dedup.handler.protocol.catch_up`),
        within the catch-up's share of the attempt deadline since the delivery ``started`` (monotonic seconds).

        Returns one ``{"schedule_time", "run_id", "status"}`` per fire time run, and the oldest fire time's key left unrun
        when the next run would not fit the share (its expected length: the longest run so far), else None. A store
        failure stops the catch-up (logged) and leaves the delivery's own run to go on.
        """
        settings = self.settings
        if not settings.catch_up_window_seconds or settings.schedule is None:
            return [], None
        budget = catch_up_budget_seconds(settings.attempt_deadline_seconds)
        bounds = CatchUpBounds(settings.catch_up_window_seconds, settings.retention_seconds, settings.schedule_since,
                               [settings.pause] if settings.pause else [])
        done: list[dict[str, Any]] = []
        longest = 0.0
        try:
            for missed in missed_keys(self.idempotency.store, key, schedule=settings.schedule,
                                      time_zone=settings.time_zone, bounds=bounds,
                                      wall_clock_zone=settings.time_zone if settings.key_local_time else None):
                if time.monotonic() - started + longest > budget:
                    log.warning("catch-up left fire times from %s for the next delivery: its %g s of the attempt "
                                "deadline are spent", missed.schedule_time_rfc3339, budget, extra={
                                    LogField.JOB_NAME: key.job_name, LogField.SCHEDULE_TIME: key.schedule_time_rfc3339})
                    return done, missed
                run_started = time.monotonic()
                outcome = self._run(missed)
                took = time.monotonic() - run_started
                longest = max(longest, took)
                _log_outcome(missed, outcome, _STATUS_CODES[outcome.outcome], took)
                done.append({"schedule_time": missed.schedule_time_rfc3339, "run_id": missed.run_id,
                             "status": outcome.outcome.value})
        except STORE_ERRORS + (StoreError,) as exc:
            log.error("catch-up stopped: %s", exc, extra={LogField.EVENT: LogEvent.DELIVERY,
                                                          LogField.JOB_NAME: key.job_name})
        return done, None


def _record_fields(key: RunKey, settings: Settings) -> dict[str, Any]:
    # schedule and time_zone let run history compare expected fire times with records by itself.
    return {
        "job_name": key.job_name,
        "schedule_time": key.schedule_time,
        "project": key.project,
        "location": key.location,
        "manual": key.manual,
        "schedule": settings.schedule,
        "time_zone": settings.time_zone,
        # since when the job has had this schedule: run history expects no fire time before it
        "schedule_since": settings.schedule_since,
    }


def _response(outcome: RunOutcome) -> Response:
    body, headers = outcome_answer(outcome)
    return body, _STATUS_CODES[outcome.outcome], headers


def _log_outcome(key: RunKey, outcome: RunOutcome, status: int, seconds: float) -> None:
    severity = logging.INFO
    if outcome.outcome in (Outcome.RELEASED, Outcome.FENCED) or (outcome.outcome is Outcome.FAILED and outcome.executed):
        severity = logging.ERROR
    log.log(severity, "delivery %s: %s", key.job_name, outcome.outcome.value, extra={
        LogField.EVENT: LogEvent.DELIVERY,
        LogField.RUN_ID: outcome.run_id,
        LogField.JOB_NAME: key.job_name,
        LogField.SCHEDULE_TIME: key.schedule_time_rfc3339,
        LogField.PROJECT: key.project,
        LogField.LOCATION: key.location,
        LogField.MANUAL: key.manual,
        LogField.ATTEMPT_ID: outcome.attempt_id,
        LogField.OUTCOME: outcome.outcome.value,
        LogField.EXECUTED: outcome.executed,
        LogField.TOOK_OVER: outcome.took_over,
        LogField.HTTP_STATUS: status,
        LogField.ERROR: outcome.error,
        LogField.DURATION_MS: round(seconds * 1000, 1),
    })
