"""Secret values never leave the handler, on each store over real HTTP: a job prints the values of its secret
variables and mounted secret file (none of a credential's shape) and fails; the answer, the stored record, the
handler's log and ``runs show`` carry none of them."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import requests

from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION
from .test_backfill import cli
from .test_overlap import _handler_processes_reach_it, fire_times  # noqa: F401

pytestmark = pytest.mark.processes

LISTED, BY_NAME, IN_FILE = "plain-value-Q7x9", "zz-webhook-93817", "file-secret-5521"

LEAKY_JOB = '''
import base64, os

from scheduler_dedup.handler import NonRetryableJobError


def run(run):
    print("connecting to", os.environ["JOB_DSN"], "as", base64.b64encode(os.environ["JOB_DSN"].encode()).decode())
    print("webhook", os.environ["SLACK_WEBHOOK_TOKEN"], flush=True)
    with open(os.environ["JOB_KEY_FILE"]) as f:
        print("key", f.read(), flush=True)
    raise NonRetryableJobError(f"could not connect with {os.environ['JOB_DSN']} / {os.environ['SLACK_WEBHOOK_TOKEN']}")
'''


def _leaks(text: str) -> list[str]:
    encoded = base64.b64encode(LISTED.encode()).decode().rstrip("=")
    return [v for v in (LISTED, BY_NAME, IN_FILE, encoded) if v in text]


def test_a_failing_job_that_prints_its_secret_values_leaks_none(server: StoreServer, store: Any,
                                                                tmp_path: Path) -> None:
    (tmp_path / "leaky_job.py").write_text(LEAKY_JOB)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text(IN_FILE + "\n")
    env = {**server.endpoint_env(), "DEDUP_COLLECTION": COLLECTION, "DEDUP_JOB": "leaky_job:run",
           "PYTHONPATH": str(tmp_path), "JOB_DSN": LISTED, "SLACK_WEBHOOK_TOKEN": BY_NAME,
           "JOB_KEY_FILE": str(tmp_path / "secrets" / "key"), "DEDUP_SECRET_ENV": "JOB_DSN",
           "DEDUP_SECRET_FILES": str(tmp_path / "secrets" / "key")}
    [t] = fire_times(1)
    with HandlerServer(env) as handler:
        answer = requests.post(handler.url, headers={"X-CloudScheduler-JobName": "leaky",
                                                     "X-CloudScheduler-ScheduleTime": t,
                                                     "User-Agent": "Google-Cloud-Scheduler"}, timeout=60)
        log = handler.log()
    body = answer.json()
    assert body["status"] == "failed" and "[redacted]" in body["output"] and "connecting to" in body["output"], body
    assert _leaks(answer.text) == []
    rid = body["run_id"]
    record = store.get(rid)
    assert record is not None and record.status == "failed"
    assert _leaks(json.dumps(record.data, default=str)) == [], record.data
    assert "connecting to" in log and _leaks(log) == []
    shown = cli(server, "runs", "show", rid[:12], "--json")
    assert shown.returncode == 0 and rid in shown.stdout, shown.stdout + shown.stderr
    assert _leaks(shown.stdout) == []
