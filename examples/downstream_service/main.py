"""A downstream service for the dedup handler's HTTP proxy target, as docs/idempotent.md shows it.

Deploy it with functions-framework (``--source main.py --target export``) and point the handler at it
(``DEDUP_TARGET_TYPE=http``, ``DEDUP_TARGET=<its URL>``). The handler POSTs each scheduled run once with
``Idempotency-Key: <run id>``; ``idempotent_endpoint`` runs the export once per key and answers as the
handler expects, even when the handler's call timed out and Scheduler's retry calls again.

``EXPORT_LOG`` (a file) gets one line per execution and ``EXPORT_SECONDS`` makes the export take that
long: the chain test uses both.
"""

from __future__ import annotations

import os
import time
from typing import Any

import flask
import functions_framework

from scheduler_dedup.handler import NonRetryableJobError, idempotent_endpoint


@functions_framework.http
@idempotent_endpoint()
def export(request: flask.Request) -> dict[str, Any]:
    """Export one scheduled run's data; runs once per ``Idempotency-Key``."""
    run = request.get_json(silent=True) or {}
    if "run_id" not in run:
        raise NonRetryableJobError("the body names no run_id: call this through the dedup handler")  # 422
    log = os.environ.get("EXPORT_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{run['run_id']} {os.getpid()}\n")
    time.sleep(float(os.environ.get("EXPORT_SECONDS", "0")))
    return {"exported": run["run_id"], "schedule_time": run.get("schedule_time")}
