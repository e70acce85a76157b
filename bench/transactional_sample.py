"""Google's sample dedup pattern, for comparison only: claim in one transaction, complete in another.

Served by functions-framework (``--target handle``) with ``DEDUP_JOB`` as the job. Each
delivery spends begin + get + commit to claim and again to complete: 6 RPCs; a duplicate 3.
Transactions are created per call (no shared ``@firestore.transactional`` object across threads).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import flask
import functions_framework
from google.api_core import exceptions as gexc
from google.cloud import firestore

from scheduler_dedup.handler.protocol.job import Job, ScheduledRun, load_job
from scheduler_dedup.handler.schedule.run_key import run_key_from_headers



def make_view(client: firestore.Client, collection: str, job: Job, project: str) -> Callable[[flask.Request], Any]:
    """A view that dedups with two transactions per delivery; 500 when a transaction fails."""

    def view(request: flask.Request) -> Any:
        key = run_key_from_headers(request.headers, default_project=project, server_now=datetime.now(timezone.utc),
                                   manual_tolerance_seconds=5)
        ref = client.collection(collection).document(key.run_id)

        @firestore.transactional
        def claim(tx: firestore.Transaction) -> str:
            snap = ref.get(transaction=tx)
            if snap.exists:
                return str(snap.get("status"))
            tx.set(ref, {"status": "in_progress"})
            return "claimed"

        @firestore.transactional
        def complete(tx: firestore.Transaction) -> None:
            ref.get(transaction=tx)
            tx.update(ref, {"status": "completed"})

        try:
            state = claim(client.transaction())
            if state != "claimed":
                return flask.jsonify({"status": state}), 200 if state == "completed" else 409
            job(ScheduledRun.of(key, uuid.uuid4().hex))
            complete(client.transaction())
        except (gexc.GoogleAPICallError, ValueError) as exc:  # ValueError: "Failed to commit transaction in 5 attempts"
            return flask.jsonify({"status": "error", "error": str(exc)}), 500
        return flask.jsonify({"status": "processed"}), 200

    return view


if os.environ.get("DEDUP_JOB"):  # served by functions-framework
    _project = os.environ["GOOGLE_CLOUD_PROJECT"]
    handle = functions_framework.http(make_view(firestore.Client(project=_project),
                                                os.environ.get("DEDUP_COLLECTION", "transactional_runs"),
                                                load_job(os.environ.get("DEDUP_JOB")), _project))
