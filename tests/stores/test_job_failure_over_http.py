"""A job's own failure is the first thing its user sees, on each store over real HTTP: a handler process runs a user's
job module that prints and raises ``RuntimeError("disk full on /data")`` (or calls ``sys.exit(0)``), and its
exception and the tail of its output come back in the 500 answer, stay in the run record, and are what ``runs show``
and ``runs`` report once Scheduler's retries are over: failed, never missed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.local.servers.handlers import HandlerServer
from scheduler_dedup.local.servers.store_servers import StoreServer

from .conftest import COLLECTION
from .test_backfill import cli
from .test_overlap import JOB, _handler_processes_reach_it, deliver, fire_times, run_id  # noqa: F401 (a fixture)

pytestmark = pytest.mark.processes

#: The user's job module (``--job bad:boom`` / ``bad:quit``): it prints, to stdout and stderr, a line holding a
#: credential, and fails.
BAD_JOB = '''
import sys

def boom(run):
    print("checking /data before the export")
    print("connecting with password=hunter2", file=sys.stderr)
    raise RuntimeError("disk full on /data")

def quit(run):
    print("usage: export [-h]")
    sys.exit(0)

def fixed(run):
    return {"exported": True}

def vanish(run):
    import os, pathlib
    marker = pathlib.Path(__file__).with_name("vanished")
    if not marker.exists():  # the first call ends the worker process, as a segfault or the OOM killer would
        marker.write_text("")
        os._exit(1)
    return {"exported": True}
'''
ERROR = "RuntimeError: disk full on /data"


@pytest.fixture()
def job_source(tmp_path: Path) -> Path:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "bad.py").write_text(BAD_JOB)
    return tmp_path / "mine"


@pytest.fixture()
def start(server: StoreServer, job_source: Path) -> Iterator[Any]:
    started: list[HandlerServer] = []

    def go(job: str) -> HandlerServer:
        handler = HandlerServer({**server.endpoint_env(), "DEDUP_COLLECTION": COLLECTION, "DEDUP_JOB": job,
                                 "PYTHONPATH": str(job_source), "DEDUP_SCHEDULE": "* * * * *",
                                 "DEDUP_LEASE_SECONDS": "10", "DEDUP_STORE_TIMEOUT_SECONDS": "5"}, threads=4)
        started.append(handler)
        return handler.start()

    yield go
    for handler in started:
        handler.stop()


def test_a_failing_jobs_error_and_output_are_in_the_answer_the_record_and_runs_show(
        server: StoreServer, store: Any, start: Any, job_source: Path) -> None:
    handler = start("bad:boom")
    frame = f'File "{job_source / "bad.py"}", line 7, in boom\n    raise RuntimeError("disk full on /data")'
    (when,) = fire_times(1)
    rid = run_id(when, server.project)
    for attempt in range(1, 4):  # Scheduler's first delivery and two retries: each runs the job once and fails
        answer = deliver(handler.url, when)
        body = answer.json()
        assert answer.status_code == 500 and body["status"] == "released", answer.text
        assert body["error"] == ERROR, body
        assert "checking /data before the export" in body["output"], body
        assert "hunter2" not in body["output"] and "password=[redacted]" in body["output"], body
        # the traceback ends the output: the job's own frame (file, line, source) first, then the handler's
        assert frame in body["output"] and body["output"].endswith(ERROR), body
        assert body["output"].index(frame) < body["output"].index("frame(s) of the handler, libraries and Python")
        record = store.get(rid)
        assert record is not None and record.status == "released" and record.releases == attempt, record
        assert record.error == ERROR and record.output == body["output"], record
        assert record.data["attempts"] == attempt, record.data

    shown = cli(server, "runs", "show", rid, "--json")
    assert shown.returncode == 0, shown.stderr
    fields = json.loads(shown.stdout)
    assert fields["state"] == "released" and fields["error"] == ERROR and fields["releases"] == 3, fields
    assert "checking /data before the export" in fields["output"] and not fields["took_over"], fields
    assert frame in fields["output"], fields

    table = cli(server, "runs", "show", rid)
    assert ERROR in table.stdout and "checking /data before the export" in table.stdout, table.stdout
    assert "line 7, in boom" in " ".join(table.stdout.split()), table.stdout

    # Scheduler's retries are over (grace 0): the run failed, with the job's error; nothing was missed.
    report = cli(server, "runs", "--job", JOB, "--since", when, "--until", f"{when[:-3]}59Z", "--grace", "0", "--json")
    assert report.returncode == 1, report.stdout + report.stderr
    lines = [json.loads(line) for line in report.stdout.splitlines()]
    findings = [line for line in lines if line["record"] == "finding"]
    assert [f["kind"] for f in findings] == ["failed"], findings
    assert ERROR in findings[0]["detail"] and "every attempt failed" in findings[0]["detail"], findings
    summary = lines[-1]
    assert summary["counts"]["missed"] == 0 and summary["recorded"] == summary["expected"] == 1, summary

    # Within the grace period the same run is only being retried: no problem yet.
    retrying = cli(server, "runs", "--job", JOB, "--since", when, "--until", f"{when[:-3]}59Z", "--grace", "3600")
    assert retrying.returncode == 0 and "retrying" in retrying.stdout, retrying.stdout + retrying.stderr

    # The job is fixed: backfill lists the released run, and `runs rerun` delivers it as it is, claimed as a retry.
    listed = cli(server, "backfill", "--job", JOB, "--since", when, "--until", f"{when[:-3]}59Z", "--reprocess",
                 "failed", "--dry-run")
    assert listed.returncode == 0 and when in listed.stdout and "released" in listed.stdout, listed.stdout
    plan = cli(server, "runs", "rerun", rid[:12], "--dry-run")
    assert plan.returncode == 0 and "nothing is copied or deleted" in re.sub(r"\s+", " ", plan.stdout), plan.stdout
    fixed = start("bad:fixed")
    rerun = cli(server, "runs", "rerun", rid[:12], "--url", fixed.url)
    assert rerun.returncode == 0 and "delivered again: processed" in rerun.stdout, rerun.stdout + rerun.stderr
    record = store.get(rid)
    assert record is not None and record.status == "completed" and record.result == {"exported": True}, record
    assert record.data["attempts"] == 4 and record.releases == 3 and record.error is None, record.data


def test_a_job_that_calls_sys_exit_is_a_recorded_failure_with_a_clear_reason(server: StoreServer, store: Any,
                                                                             start: Any) -> None:
    handler = start("bad:quit")
    (when,) = fire_times(1)
    answer = deliver(handler.url, when)
    body = answer.json()
    assert answer.status_code == 200 and body["status"] == "failed", answer.text
    assert body["error"].startswith("JobExitedError: the job called sys.exit(0) instead of returning"), body
    assert "main(standalone_mode=False)" in body["error"] and "usage: export [-h]" in body["output"], body
    record = store.get(run_id(when, server.project))
    assert record is not None and record.status == "failed" and record.error == body["error"], record
    assert "usage: export [-h]" in (record.output or ""), record
    again = deliver(handler.url, when)  # not run again: an exit does not say whether the work was done
    assert again.status_code == 200 and again.json()["status"] == "failed", again.text
    assert "usage: export [-h]" in again.json()["output"], again.text
    assert store.get(run_id(when, server.project)).data["attempts"] == 1
    assert handler.proc is not None and handler.proc.poll() is None  # the server keeps serving


def test_a_job_that_ends_its_worker_process_leaves_the_handler_serving(server: StoreServer, start: Any) -> None:
    """gunicorn starts the worker again; that worker serves the next delivery (it once failed to boot, and the
    handler stayed down for every later run)."""
    import requests

    handler = start("bad:vanish")
    first, second = fire_times(2)
    with pytest.raises(requests.ConnectionError):  # the worker died mid-request: no answer
        deliver(handler.url, first)
    deadline = time.monotonic() + 60
    while True:
        try:
            answer = deliver(handler.url, second, timeout=10)
            break
        except requests.ConnectionError:  # gunicorn is starting the worker again
            assert time.monotonic() < deadline and handler.proc is not None and handler.proc.poll() is None, \
                "the handler stopped serving after its worker died"
            time.sleep(0.5)
    assert (answer.status_code, answer.json()["status"]) == (200, "processed"), answer.text
