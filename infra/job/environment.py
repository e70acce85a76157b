"""The handler's environment the component sets (the ``DEDUP_*`` runtime contract), and the check of it with the
handler's own start-up checks, so a config the handler would refuse fails ``pulumi preview``."""

from __future__ import annotations

import re
from typing import Any

import pulumi

from scheduler_dedup.handler.callers.app_engine import APP_ENGINE_CALLER_ENV
from scheduler_dedup.handler.config.settings import store_timeout_for
from scheduler_dedup.handler.core.record import TTL_OWNER_ENV
from scheduler_dedup.handler.service.server import SERVER_THREADS
from scheduler_dedup.handler.service.startup import startup_problems
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import Problems
from scheduler_dedup.infra.job.resolved import DedupSettings
from scheduler_dedup.infra.stores.store import STORE_KINDS, piece


def service_resource_name(s: DedupSettings) -> str:
    """``projects/P/locations/R/services/S``: the handler's Cloud Run service (``DEDUP_SERVICE``)."""
    return f"projects/{s.project}/locations/{s.region}/services/{s.service_name}"


def scheduler_job_resource_name(s: DedupSettings) -> str:
    """``projects/P/locations/R/jobs/J``: the Scheduler job the handler serves (``DEDUP_SCHEDULER_JOB``)."""
    return f"projects/{s.project}/locations/{s.region}/jobs/{s.scheduler_job_name}"


def store_environment(s: DedupSettings) -> dict[str, pulumi.Input[str]]:
    """Where the handler's run store is: the store's piece's ``job_environment`` (``DEDUP_DATABASE``, or
    ``DEDUP_STORE`` with the store's own variables)."""
    env: dict[str, pulumi.Input[str]] = piece(s.store_kind).job_environment(s)
    return env


def handler_environment(s: DedupSettings) -> dict[str, pulumi.Input[str]]:
    """The handler's runtime contract: the ``DEDUP_*`` environment of the Cloud Run service or App Engine version.

    On Cloud Run, ``DEDUP_ALLOWED_CALLERS`` (the Scheduler service account email) is added by the component,
    since the email is an output of a child resource. On App Engine the Scheduler target sends no OIDC token:
    ``DEDUP_APP_ENGINE_CALLER=true`` replaces ``DEDUP_OIDC_AUDIENCE``, ``DEDUP_TRUST_CLOUD_RUN_IAM`` and
    ``DEDUP_SERVICE`` (:mod:`scheduler_dedup.handler.callers.app_engine`).
    """
    env: dict[str, pulumi.Input[str]] = {
        "GOOGLE_CLOUD_PROJECT": s.project,
        "DEDUP_COLLECTION": s.collection,
        **store_environment(s),
        "DEDUP_LEASE_SECONDS": str(s.lease_seconds),
        "DEDUP_RETENTION_SECONDS": str(s.retention_seconds),
        "DEDUP_MANUAL_TOLERANCE_SECONDS": str(s.manual_tolerance_seconds),
        # Stored on each run record, so run history and checks know the expected fire times.
        "DEDUP_SCHEDULE": s.schedule,
        "DEDUP_TIME_ZONE": s.time_zone,
        # Firestore and downstream calls must give up well inside the attempt deadline, so a failure
        # is answered (500, released) while Scheduler still listens: a quarter and a half of it.
        "DEDUP_STORE_TIMEOUT_SECONDS": str(store_timeout_for(s.attempt_deadline_seconds)),
        "DEDUP_TARGET_TYPE": s.target_type,
        # One job per handler: deliveries naming another job are refused (403), the run check checks this one.
        "DEDUP_SCHEDULER_JOB": scheduler_job_resource_name(s),
    }
    if s.overlap != "allow":
        env["DEDUP_OVERLAP"] = s.overlap
    if s.catch_up_window_seconds:
        env["DEDUP_CATCH_UP_WINDOW_SECONDS"] = str(s.catch_up_window_seconds)
        # The catch-up spends at most a share of the attempt deadline (handler/schedule/catch_up_budget.py).
        env["DEDUP_ATTEMPT_DEADLINE_SECONDS"] = str(s.attempt_deadline_seconds)
    if s.app_engine is not None:
        # App Engine strips its X-AppEngine-* headers from external requests; Scheduler's App Engine target
        # sets them: the handler admits only requests carrying App Engine's cron proof.
        env[APP_ENGINE_CALLER_ENV] = "true"
    else:
        env["DEDUP_OIDC_AUDIENCE"] = s.oidc_audience
        # Cloud Run IAM is enforced (no public invoker, invoker check on), so Cloud Run verifies the
        # token and forwards it with its signature removed; the handler then checks its claims, after
        # reading its own service's IAM policy to prove the premise (roles/run.viewer on this service).
        env["DEDUP_TRUST_CLOUD_RUN_IAM"] = "true"
        env["DEDUP_SERVICE"] = service_resource_name(s)
        # gunicorn threads = Cloud Run request concurrency (the component sets both from SERVER_THREADS).
        env["THREADS"] = str(SERVER_THREADS)
    if s.store is not None and s.store.ttl_owner is not None:
        # Where the TTL policy of these run records lives, since this stack has none (policy pack: dedup-firestore-ttl).
        env[TTL_OWNER_ENV] = s.store.ttl_owner
    # Names and paths only: the handler reads the values at start-up and scrubs them from all that leaves it.
    if s.job_config.secret_env:
        env["DEDUP_SECRET_ENV"] = ",".join(sorted(s.job_config.secret_env))
    if s.job_config.secret_files:
        env["DEDUP_SECRET_FILES"] = ",".join(f"{f.folder.rstrip('/')}/{f.file_name}" for f in s.job_config.secret_files)
    if s.target_type == "python":
        assert s.job is not None
        env["DEDUP_JOB"] = s.job
    else:
        target = {"workflows": s.workflow, "cloud_run_job": s.cloud_run_job, "cloud_build_trigger": s.cloud_build_trigger,
                  "http": s.http_url}[s.target_type]
        assert target is not None
        env["DEDUP_TARGET"] = target
        if s.http_audience is not None:
            env["DEDUP_TARGET_AUDIENCE"] = s.http_audience
        env["DEDUP_TARGET_TIMEOUT_SECONDS"] = str(max(5, min(30, s.attempt_deadline_seconds // 2)))
    return env


#: The handler's environment variable -> the component input that sets it (with each store's ``ENV_FIELDS``,
#: :func:`env_field`).
ENV_TO_FIELD = {
    "GOOGLE_CLOUD_PROJECT": "project", "DEDUP_DATABASE": "database_id", "DEDUP_COLLECTION": "collection",
    "DEDUP_LEASE_SECONDS": "lease_seconds", "DEDUP_RETENTION_SECONDS": "retention_seconds",
    "DEDUP_MANUAL_TOLERANCE_SECONDS": "manual_tolerance_seconds", "DEDUP_SCHEDULE": "schedule",
    "DEDUP_OVERLAP": "overlap", "DEDUP_CATCH_UP_WINDOW_SECONDS": "catch_up_window_seconds",
    "DEDUP_ATTEMPT_DEADLINE_SECONDS": "attempt_deadline_seconds",
    "DEDUP_TIME_ZONE": "time_zone", "DEDUP_JOB": "job", "DEDUP_OIDC_AUDIENCE": "oidc_audience",
    "DEDUP_ALLOWED_CALLERS": "scheduler_service_account_email", "DEDUP_TARGET_AUDIENCE": "http_target.audience",
    "DEDUP_SERVICE": "name", "DEDUP_SCHEDULER_JOB": "name", "DEDUP_APP_ENGINE_CALLER": "app_engine",
    "DEDUP_STORE": "store_kind",
}


def env_field(variable: str) -> str:
    """The component input that sets the handler's ``variable`` (:data:`ENV_TO_FIELD`, or a store's own variable's,
    its piece's ``ENV_FIELDS``); the variable itself when no input does."""
    fields = dict(ENV_TO_FIELD)
    for kind in STORE_KINDS:
        fields.update(piece(kind).ENV_FIELDS)
    return fields.get(variable, variable)


def check_handler_settings(s: DedupSettings) -> None:
    """Check the environment the component gives the handler with the handler's own start-up checks.

    One function (:func:`scheduler_dedup.handler.service.startup.startup_problems`, also the policy pack's
    ``dedup-handler-settings``) decides, so a config the handler would refuse (and crash every revision on)
    fails at ``pulumi preview`` instead. Values that are outputs of other resources are not known yet and pass.

    Raises:
        DedupConfigError: names the component input, and the handler's message says the fix (one per refusal).
    """
    env: dict[str, Any] = dict(handler_environment(s))
    if s.app_engine is None:  # the component adds the Scheduler identity's email (an output) on Cloud Run
        env["DEDUP_ALLOWED_CALLERS"] = s.scheduler_service_account_email
    unknown = [name for name, value in env.items() if not isinstance(value, str)]
    problems = Problems()
    for problem in startup_problems({k: v for k, v in env.items() if isinstance(v, str)}, unknown):
        variable = re.split(r"[= ]", problem, maxsplit=1)[0]
        problems.add(DedupConfigError(env_field(variable),
                                      f"the handler would refuse it at start-up: {problem}"))
    problems.raise_any()
