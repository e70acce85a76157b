"""The handler's entry point on Cloud Run and on App Engine standard.

* Cloud Run: ``functions-framework --source main.py --target handle_scheduled_job`` (the build config's function
  target).
* App Engine: ``gunicorn main:app`` (the ``entrypoint`` in ``app.yaml``), where ``app`` is functions-framework's
  own WSGI app for ``handle_scheduled_job`` (:func:`scheduler_dedup.handler.service.app.wsgi_app`): the same app,
  served the way App Engine's Python 3 runtime serves one
  (https://cloud.google.com/appengine/docs/standard/python3/runtime#application_startup).

Wires settings and job together at import, and the store in the process that serves (never before gunicorn forks
its worker: :class:`~scheduler_dedup.handler.core.per_process.PerProcess`); an invalid setting stops the instance with a
message that names the environment variable.
"""

from __future__ import annotations

from scheduler_dedup.handler.core.logs import ignore_python_version_warning

ignore_python_version_warning()  # before anything imports google.api_core

from typing import Any  # noqa: E402

import flask  # noqa: E402
import functions_framework  # noqa: E402

from scheduler_dedup.handler.service.app import process_handler, start_serving, wsgi_app  # noqa: E402
from scheduler_dedup.handler.service.server import bound_server  # noqa: E402

bound_server(start_serving)  # before functions-framework builds its server: header deadline, keep-alive, limits
_handler = process_handler()


@functions_framework.http
def handle_scheduled_job(request: flask.Request) -> flask.Response:
    """Handle one Cloud Scheduler delivery; see ``scheduler_dedup.handler.service.delivery`` for the contract."""
    return _handler(request)


app: flask.Flask  # declared only: the first access builds it (__getattr__ below), never an import of main.py


def __getattr__(name: str) -> Any:
    """``app``: App Engine's WSGI object (``gunicorn main:app``), built on first access (:func:`wsgi_app`)."""
    if name == "app":
        global app
        app = wsgi_app(__file__)
        start_serving()  # gunicorn loads main:app in its worker (no --preload): the store is this process's
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
