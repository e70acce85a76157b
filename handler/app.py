"""Build the request handler from the environment (the one place environment variables are read)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import flask

from scheduler_dedup.handler.config import Settings
from scheduler_dedup.handler.idempotency import Idempotency
from scheduler_dedup.handler.job import load_job
from scheduler_dedup.handler.logs import configure_logging
from scheduler_dedup.handler.scheduler import SchedulerHandler
from scheduler_dedup.handler.store import FirestoreRunStore


def build_handler_from_env(environ: Mapping[str, str] | None = None) -> Callable[[flask.Request], flask.Response]:
    """Return a Flask view for functions-framework, configured from ``environ`` (default ``os.environ``).

    Raises:
        ConfigError: a ``DEDUP_*`` variable or ``GOOGLE_CLOUD_PROJECT`` is invalid.
    """
    env = os.environ if environ is None else environ
    configure_logging()
    settings = Settings.from_env(env)
    job = load_job(env.get("DEDUP_JOB"))
    store = FirestoreRunStore.connect(settings.project, settings.database, settings.collection)
    handler = SchedulerHandler(settings, Idempotency(store, settings.lease_seconds, settings.retention_seconds), job)

    def view(request: flask.Request) -> flask.Response:
        body, status, headers = handler.handle(request.headers)
        response = flask.jsonify(body)
        response.status_code = status
        response.headers.update(headers)
        return response

    return view
