"""Cloud Run entry point: ``functions-framework --source handler/main.py --target handle_scheduled_job``.

Wires settings, store and job together at start-up; an invalid setting stops the instance
with a message that names the environment variable.
"""

from __future__ import annotations

import functions_framework
import flask

from scheduler_dedup.handler.app import build_handler_from_env

_handler = build_handler_from_env()


@functions_framework.http
def handle_scheduled_job(request: flask.Request) -> flask.Response:
    """Handle one Cloud Scheduler delivery; see ``scheduler_dedup.handler.scheduler`` for the contract."""
    return _handler(request)
