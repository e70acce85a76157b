"""gunicorn's settings for the handler on App Engine: ``gunicorn -c python:scheduler_dedup.handler.service.gunicorn_config``.

App Engine starts the app with ``app.yaml``'s ``entrypoint`` (the deploy archive's:
:data:`scheduler_dedup.infra.job.archive.APP_ENGINE_ENTRYPOINT`), so gunicorn runs from its command line there, not
through functions-framework's ``GunicornApplication`` as on Cloud Run. This module gives it the same server
(:mod:`scheduler_dedup.handler.service.server`): :data:`~scheduler_dedup.handler.service.server.SERVER_SETTINGS` (the header-read
deadline worker, keep-alive, request limits), :data:`~scheduler_dedup.handler.service.server.SERVER_THREADS` threads in one
worker (one worker keeps an F1 instance's 384 MB: https://cloud.google.com/appengine/docs/standard#instance_classes),
and ``timeout`` 0, as functions-framework sets it without ``CLOUD_RUN_TIMEOUT_SECONDS``: gunicorn's timeout is the
worker's heartbeat, and App Engine's own request deadline ends a request. gunicorn reads the module's attributes
named like its settings (https://docs.gunicorn.org/en/stable/configure.html#configuration-file).
"""

from __future__ import annotations

from scheduler_dedup.handler.service.server import SERVER_SETTINGS, SERVER_THREADS

workers = 1
threads = SERVER_THREADS
timeout = 0
worker_class = SERVER_SETTINGS["worker_class"]
keepalive = SERVER_SETTINGS["keepalive"]
limit_request_line = SERVER_SETTINGS["limit_request_line"]
limit_request_fields = SERVER_SETTINGS["limit_request_fields"]
limit_request_field_size = SERVER_SETTINGS["limit_request_field_size"]
