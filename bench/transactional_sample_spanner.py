"""The transactional dedup pattern on Spanner, for comparison only: claim in one read-write transaction, complete in
another, written as the client library's documentation shows (``database.run_in_transaction``).

The claim reads the row and inserts it when absent; the completion updates it. The library begins each transaction
inline with its first read (a mutation-only transaction with a BeginTransaction), so a first delivery costs read +
commit, then begin + commit; a duplicate read + commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import flask
from google.api_core import exceptions as gexc
from google.cloud import spanner
from google.cloud.spanner_v1.keyset import KeySet

from scheduler_dedup.handler.protocol.job import Job, ScheduledRun
from scheduler_dedup.handler.schedule.run_key import run_key_from_headers


def make_view(database: Any, table: str, job: Job, project: str) -> Callable[[flask.Request], Any]:
    """A view that dedups with two read-write transactions per delivery; 500 when one fails."""

    def view(request: flask.Request) -> Any:
        key = run_key_from_headers(request.headers, default_project=project, server_now=datetime.now(timezone.utc),
                                   manual_tolerance_seconds=5)

        def claim(tx: Any) -> str:
            rows = list(tx.read(table, ["status"], KeySet(keys=[[key.run_id]])))
            if rows:
                return str(rows[0][0])
            tx.insert(table, ["run_id", "status", "update_time", "create_time"],
                      [[key.run_id, "in_progress", spanner.COMMIT_TIMESTAMP, spanner.COMMIT_TIMESTAMP]])
            return "claimed"

        def complete(tx: Any) -> None:
            tx.update(table, ["run_id", "status", "update_time"], [[key.run_id, "completed", spanner.COMMIT_TIMESTAMP]])

        try:
            state = database.run_in_transaction(claim)
            if state != "claimed":
                return flask.jsonify({"status": state}), 200 if state == "completed" else 409
            job(ScheduledRun.of(key, uuid.uuid4().hex))
            database.run_in_transaction(complete)
        except gexc.GoogleAPICallError as exc:
            return flask.jsonify({"status": "error", "error": str(exc)}), 500
        return flask.jsonify({"status": "processed"}), 200

    return view
