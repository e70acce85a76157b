"""Cloud Run entry point: ``functions-framework --source handler/main.py --target handle_scheduled_job``.

Wires settings, store and job together at start-up; an invalid setting stops the instance
with a message that names the environment variable.
"""

from __future__ import annotations

from scheduler_dedup.handler.logs import ignore_python_version_warning

ignore_python_version_warning()  # before anything imports google.api_core

import flask  # noqa: E402  (after the warning filter)
import functions_framework  # noqa: E402

from scheduler_dedup.handler.app import build_handler_from_env  # noqa: E402
from scheduler_dedup.handler.server import bound_server  # noqa: E402

bound_server()  # before functions-framework builds its server: header deadline, keep-alive, request limits
_handler = build_handler_from_env()


@functions_framework.http
def handle_scheduled_job(request: flask.Request) -> flask.Response:
    """Handle one Cloud Scheduler delivery; see ``scheduler_dedup.handler.scheduler`` for the contract."""
    return _handler(request)
