"""Structured JSON logs in Cloud Logging's format, one object a line on stdout.

Cloud Run forwards stdout to Cloud Logging, which reads ``severity`` and ``message`` and keeps
the other keys as ``jsonPayload`` fields; ``logging.googleapis.com/trace`` links the entry to
the request's trace (https://cloud.google.com/logging/docs/structured-logging).
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

_configured = False


def configure_logging(level: int = logging.INFO) -> logging.Logger:
    """Send the ``scheduler_dedup`` logger's records to stdout as Cloud Logging JSON; idempotent.

    Each record carries ``severity``, ``message``, ``time`` (RFC 3339) and any ``extra`` fields
    (run_id, job_name, schedule_time, attempt_id, outcome, duration_ms...).
    """
    global _configured
    logger = logging.getLogger("scheduler_dedup")
    if not _configured:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(JsonFormatter(
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
