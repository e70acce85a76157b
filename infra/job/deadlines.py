"""The attempt deadline, request timeout, lease, retention and manual tolerance, each checked against the
others that are valid.

* Scheduler attempt deadline: HTTP targets 15 s to 30 min, App Engine targets 15 s to 24 h, default 3 min here —
  https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.attempt_deadline
  (:data:`~scheduler_dedup.handler.schedule.retry_windows.ATTEMPT_DEADLINES`, which the policy pack reads too)
* Cloud Run request timeout, at most 60 min — https://cloud.google.com/run/docs/configuring/request-timeout
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.config.settings import DEFAULT_LEASE_SECONDS, DEFAULT_MANUAL_TOLERANCE_SECONDS, DEFAULT_RETENTION_SECONDS
from scheduler_dedup.handler.schedule.retry_windows import APP_ENGINE_TARGET, ATTEMPT_DEADLINES, HTTP_TARGET, REQUEST_TIMEOUT_MARGIN_SECONDS
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.app_engine import AppEngineSettings
from scheduler_dedup.infra.job.inputs import read_int

DEFAULT_ATTEMPT_DEADLINE_SECONDS = 180
REQUEST_TIMEOUT_MAX_SECONDS = 3600


def as_written(args: Mapping[str, Any], key: str, low: int, high: int | None = None) -> int | None:
    """``args[key]`` when it is a whole number from ``low`` to ``high``, else None: the value a later check uses
    after this one refused it for how it relates to another setting."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        return None
    return value


def resolve_attempt_deadline(args: Mapping[str, Any], app_engine: AppEngineSettings | None) -> int:
    attempt_deadline = read_int(args, "attempt_deadline_seconds", DEFAULT_ATTEMPT_DEADLINE_SECONDS)
    # Scheduler: HTTP targets [15 s, 30 min], App Engine targets [15 s, 24 h] (ATTEMPT_DEADLINES cites the page).
    kind = APP_ENGINE_TARGET if app_engine is not None else HTTP_TARGET
    deadlines = ATTEMPT_DEADLINES[kind]
    if attempt_deadline == 0 or deadlines.problem(attempt_deadline):
        raise DedupConfigError(
            "attempt_deadline_seconds",
            f"{attempt_deadline} s is outside Cloud Scheduler's range for {kind.replace('_', ' ')} targets; "
            f"use {deadlines.min_seconds:g} to {deadlines.max_seconds:g} seconds",
        )
    if app_engine is not None and attempt_deadline > app_engine.request_timeout_seconds:
        # App Engine ends a request at the service's deadline; Scheduler must not wait longer than that.
        where = "the deployed version's (automatic scaling)" if app_engine.deploy else "app_engine.request_timeout_seconds"
        raise DedupConfigError(
            "attempt_deadline_seconds",
            f"{attempt_deadline} s is longer than the App Engine request deadline, {where} "
            f"{app_engine.request_timeout_seconds} s: App Engine would end a request Scheduler still waits for; "
            f"lower it to at most {app_engine.request_timeout_seconds}",
        )
    return attempt_deadline


def resolve_request_timeout(args: Mapping[str, Any], attempt_deadline: int | None, app_engine: AppEngineSettings | None) -> int:
    if app_engine is not None:  # the App Engine service's request deadline (resolve_app_engine checked it)
        return app_engine.request_timeout_seconds
    # Default: the attempt deadline plus a margin, so Scheduler's cut-off and Cloud Run's do not race
    # (the pack's advisory scheduler-attempt-deadline-margin checks the same margin).
    deadline = attempt_deadline or DEFAULT_ATTEMPT_DEADLINE_SECONDS
    request_timeout = read_int(args, "request_timeout_seconds",
                           min(deadline + REQUEST_TIMEOUT_MARGIN_SECONDS, REQUEST_TIMEOUT_MAX_SECONDS))
    # Cloud Run: request timeout up to 60 minutes. https://cloud.google.com/run/docs/configuring/request-timeout
    if not 1 <= request_timeout <= REQUEST_TIMEOUT_MAX_SECONDS:
        raise DedupConfigError(
            "request_timeout_seconds", f"{request_timeout} s is outside Cloud Run's range; use 1 to {REQUEST_TIMEOUT_MAX_SECONDS}"
        )
    if attempt_deadline is not None and request_timeout < attempt_deadline:
        raise DedupConfigError(
            "request_timeout_seconds",
            f"{request_timeout} s is shorter than attempt_deadline_seconds ({attempt_deadline} s): Cloud Run would cut "
            f"a job that Scheduler still waits for; raise it to at least {attempt_deadline}",
        )
    return request_timeout


def resolve_lease(args: Mapping[str, Any], request_timeout: int | None, attempt_deadline: int | None) -> int:
    lease = read_int(args, "lease_seconds", max(DEFAULT_LEASE_SECONDS, request_timeout or 0))
    if request_timeout is not None and attempt_deadline is not None and (
            lease < request_timeout or lease < attempt_deadline):
        longest = max(request_timeout, attempt_deadline)
        raise DedupConfigError(
            "lease_seconds",
            f"{lease} s is shorter than the request timeout ({request_timeout} s) or the attempt deadline "
            f"({attempt_deadline} s): a retry could take over a claim whose job is still running; "
            f"raise it to at least {longest}",
        )
    return lease


def resolve_retention(args: Mapping[str, Any], window: int | None) -> int:
    retention = read_int(args, "retention_seconds", DEFAULT_RETENTION_SECONDS)
    if window is not None and retention < window:
        raise DedupConfigError(
            "retention_seconds",
            f"{retention} s is shorter than the retry window ({window} s, from the attempt deadline and the retry "
            f"config): a late retry would find no record and run the job again; raise it to at least {window} "
            "or shorten the retry config",
        )
    return retention


def resolve_tolerance(args: Mapping[str, Any]) -> int:
    tolerance = read_int(args, "manual_tolerance_seconds", DEFAULT_MANUAL_TOLERANCE_SECONDS)
    if tolerance < 0:
        raise DedupConfigError("manual_tolerance_seconds", "must be >= 0")
    return tolerance
