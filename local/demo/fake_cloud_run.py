"""A local stand-in for the Cloud Run Admin API v2 of one job, for the demo (``scheduler-dedup demo --downstream``):
``jobs.run`` starts an execution that succeeds ``seconds`` later, and ``executions.list``, ``executions.get`` and
``executions.cancel`` answer as the API does
(https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs.executions). It keeps each execution's
start and end, so the demo can count how many ran at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from typing import Any

from scheduler_dedup.local.servers.loopback_http import serve_loopback


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LocalExecution:
    """One execution: its name, the run id it carries, when it started and ended (epoch seconds), how."""

    name: str
    run_id: str
    started: float
    ends: float
    cancelled: bool = False

    def resource(self, now: float) -> dict[str, Any]:
        """The Execution as ``executions.get`` answers it at ``now``."""
        body: dict[str, Any] = {"name": self.name, "startTime": _rfc3339(self.started),
                                "template": {"containers": [{"env": [{"name": "DEDUP_RUN_ID", "value": self.run_id}]}]}}
        if now >= self.ends:
            body.update({"completionTime": _rfc3339(self.ends), "cancelledCount": int(self.cancelled),
                         "succeededCount": int(not self.cancelled),
                         "conditions": [{"type": "Completed", "state": "CONDITION_SUCCEEDED" if not self.cancelled
                                         else "CONDITION_FAILED", "reason": "Cancelled" if self.cancelled else ""}]})
        return body


@dataclass
class LocalCloudRun:
    """The API of one Cloud Run job (``projects/P/locations/L/jobs/J``) whose executions take ``seconds``."""

    job: str
    seconds: float
    executions: list[LocalExecution] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "LocalCloudRun":
        self.server, self.url = serve_loopback(self._serve)
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def most_at_once(self) -> int:
        """The most executions running at once (a cancelled one ends when its cancel was accepted)."""
        with self.lock:
            edges = sorted([(e.started, 1) for e in self.executions] + [(e.ends, -1) for e in self.executions])
        running = most = 0
        for _, step in edges:
            running += step
            most = max(most, running)
        return most

    def _serve(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length)) if length else {}
        status, answer = self._route(method, h.path.split("?", 1)[0], body)
        data = json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        now = time.time()
        with self.lock:
            if method == "POST" and path == f"/v2/{self.job}:run":
                env = [e for c in body.get("overrides", {}).get("containerOverrides", []) for e in c.get("env", [])]
                run_id = next((e["value"] for e in env if e.get("name") == "DEDUP_RUN_ID"), "")
                execution = LocalExecution(f"{self.job}/executions/e-{len(self.executions) + 1}", run_id, now,
                                           now + self.seconds)
                self.executions.append(execution)
                return 200, {"name": f"{self.job}/operations/op-{len(self.executions)}",
                             "metadata": execution.resource(now)}
            if method == "GET" and path == f"/v2/{self.job}/executions":
                return 200, {"executions": [e.resource(now) for e in self.executions[::-1]]}
            m = re.fullmatch(rf"/v2/({re.escape(self.job)}/executions/[^/:]+)(:cancel)?", path)
            found = next((e for e in self.executions if m and e.name == m.group(1)), None)
            if found is None:
                return 404, {"error": {"code": 404, "status": "NOT_FOUND", "message": f"{path} not found"}}
            if method == "POST" and m and m.group(2):
                if now >= found.ends:
                    return 400, {"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "it ended"}}
                found.cancelled, found.ends = True, now
            return 200, found.resource(now)
