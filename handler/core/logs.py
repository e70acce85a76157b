"""Structured JSON logs in Cloud Logging's format, one object a line on stdout.

Cloud Run forwards stdout to Cloud Logging, which reads ``severity`` and ``message`` and keeps
the other keys as ``jsonPayload`` fields; ``logging.googleapis.com/trace`` links the entry to
the request's trace (https://cloud.google.com/logging/docs/structured-logging).
"""

from __future__ import annotations

import logging
import sys
import warnings
from enum import StrEnum
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from scheduler_dedup.handler.core.safe_text import scrub_secrets

_configured = False


def ignore_python_version_warning() -> None:
    """Hide google-api-core's import-time ``FutureWarning`` that its Python 3.11 support ends in 2027.

    This project supports 3.11 on purpose, and the warning would clutter every command's output and every
    instance's logs. Only that warning, from that module, is hidden. Call it before anything imports
    ``google.api_core`` (the CLI's and the handler's entry points do).
    """
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\._python_version_support")


class LogField(StrEnum):
    """Names of the fields the handler logs (``jsonPayload.<name>`` in Cloud Logging).

    The one source of these names: the handler's log calls use them, and the component's log-based
    metrics and alert filters (:mod:`scheduler_dedup.infra.job.alerts`) are built from them, so a renamed
    field changes both.
    """

    EVENT = "event"  #: what the line reports, a :class:`LogEvent`
    RUN_ID = "run_id"
    JOB_NAME = "job_name"  #: the Scheduler job id (X-CloudScheduler-JobName)
    SCHEDULE_TIME = "schedule_time"  #: RFC 3339, UTC
    PROJECT = "project"
    LOCATION = "location"
    MANUAL = "manual"
    ATTEMPT_ID = "attempt_id"
    PREVIOUS_ATTEMPT_ID = "previous_attempt_id"  #: a takeover: the attempt whose lease expired
    #: a claim that landed after its attempt gave up on it (that attempt never ran the job), claimed afresh
    ABANDONED_ATTEMPT_ID = "abandoned_attempt_id"
    HOLDER_ATTEMPT_ID = "holder_attempt_id"  #: fenced or lease lost: the attempt that holds the run now
    EXECUTION = "execution"  #: proxy targets: the downstream execution's resource name
    #: deliveries: processed | duplicate | failed | in_progress | fenced | released | bad_request | store_error;
    #: refused callers and errors: unauthorized | forbidden | auth_unavailable | internal_error ...
    OUTCOME = "outcome"
    EXECUTED = "executed"  #: true when this delivery ran the job
    STEP = "step"  #: store_error: the step the store failed at (claim, complete, record_failure, release)
    TOOK_OVER = "took_over"  #: true when this attempt took the run over from an expired lease (a crashed holder)
    HTTP_STATUS = "http_status"
    ERROR = "error"
    HEADER = "header"
    DURATION_MS = "duration_ms"  #: handling time of the delivery, milliseconds
    MISSED = "missed"  #: run check: how many expected runs have no record
    STUCK = "stuck"  #: run check: how many runs are in progress past their lease
    EXPECTED = "expected"  #: run check: how many fire times it compared
    GRACE_SECONDS = "grace_seconds"


class LogEvent(StrEnum):
    """Values of :attr:`LogField.EVENT`."""

    DELIVERY = "delivery"  #: one Scheduler delivery handled (any outcome)
    RUN_CHECK = "run_check"  #: the watchdog's check of expected against recorded runs completed (the heartbeat)
    MISSED_RUN = "missed_run"  #: an expected run has no record after its grace period (severity ERROR)
    STUCK_RUN = "stuck_run"  #: a run is in progress past its lease: its attempt died and no retry took it over (ERROR)
    FAILURE_STREAK = "failure_streak"  #: run check: consecutive failed runs reached the failure threshold (ERROR)
    RUN_RECOVERED = "run_recovered"  #: run check: a run completed after a failure streak that reached it (NOTICE)
    LONG_RUN = "long_run"  #: run check: a run is still in progress past the maximum runtime, renewed or not (ERROR)


class _ScrubbingJsonFormatter(JsonFormatter):
    """Cloud Logging JSON, every string in the line (message, extra fields, a traceback) passed through
    :func:`~scheduler_dedup.handler.core.safe_text.scrub_secrets`: the one place no log line bypasses."""

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return {key: _scrubbed(value) for key, value in super().process_log_record(log_data).items()}


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return scrub_secrets(value)
    if isinstance(value, dict):
        return {key: _scrubbed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrubbed(item) for item in value]
    return value


def configure_logging(level: int = logging.INFO) -> logging.Logger:
    """Send the ``scheduler_dedup`` logger's records to stdout as Cloud Logging JSON; idempotent.

    Each record carries ``severity``, ``message``, ``time`` (RFC 3339) and any ``extra`` fields
    (run_id, job_name, schedule_time, attempt_id, outcome, duration_ms...), every string scrubbed of credentials
    (:func:`~scheduler_dedup.handler.core.safe_text.scrub_secrets`), a traceback's included.
    """
    global _configured
    logger = logging.getLogger("scheduler_dedup")
    if not _configured:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(_ScrubbingJsonFormatter(
            "{levelname}{message}{asctime}",
            style="{",
            rename_fields={"levelname": "severity", "asctime": "time"},
            datefmt="%Y-%m-%dT%H:%M:%S%z",
        ))
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
        _configured = True
    return logger
