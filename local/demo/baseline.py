"""A handler without dedup, for side-by-side comparison in the demo and the benchmark.

``functions-framework --source local/demo/baseline.py --target handle_without_dedup``: it runs
``DEDUP_JOB`` on every delivery, as a Scheduler target without scheduler-dedup would.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone

import flask
import functions_framework

from scheduler_dedup.handler.protocol.job import ScheduledRun, load_job
from scheduler_dedup.handler.schedule.run_key import run_key_from_headers

_job = load_job(os.environ.get("DEDUP_JOB"))


@functions_framework.http
def handle_without_dedup(request: flask.Request) -> flask.Response:
    """Run the job for every delivery: 200 with its result, 500 if it raised."""
    key = run_key_from_headers(request.headers, default_project=os.environ.get("GOOGLE_CLOUD_PROJECT", "demo"),
                               server_now=datetime.now(timezone.utc), manual_tolerance_seconds=5)
    try:
        result = _job(ScheduledRun.of(key, uuid.uuid4().hex))
    except Exception as exc:  # the baseline reports any failure as retryable
        return flask.make_response(flask.jsonify({"status": "error", "error": str(exc)}), 500)
    return flask.jsonify({"status": "processed", "run_id": key.run_id, "result": result})
