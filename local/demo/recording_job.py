"""The demo's job (also used by the tests): records every start and end, and can be told to fail or dawdle.

Every call appends JSON lines to the file named by ``DEMO_EXECUTIONS_LOG`` (appends of one
short line are atomic on POSIX, so several processes can share it)::

    {"event": "start", "run_id": ..., "attempt_id": ..., "job_name": ..., "pid": ...}
    {"event": "end",   "run_id": ..., "attempt_id": ..., "outcome": "ok" | "retryable" | "permanent"}

Behaviour per job name comes from the JSON file named by ``DEMO_JOB_PLAN`` (read on every call,
so a test can change it while servers run)::

    {"job-a": {"sleep": 2.5, "fail": "retryable", "fail_times": 1},
     "job-a@2026-10-16T12:00:00Z": {"sleep": 0.1}}

A ``job@schedule-time`` key (UTC, seconds) plans one run and wins over the job's own key.

``sleep`` is seconds (default ``DEMO_JOB_SECONDS``, else 0.05); ``fail`` fails the first
``fail_times`` starts of each run (default: every start). ``result`` replaces the returned value with
the given JSON value; ``result_python`` with one of :data:`PYTHON_RESULTS` (values JSON cannot hold as
they are), to test what the handler stores and answers. ``raise_python`` raises one of
:data:`PYTHON_ERRORS` (``SystemExit``, error text UTF-8 cannot encode...) on the first ``fail_times`` starts; ``warn`` issues a ``FutureWarning`` with that text.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable
from typing import Any

from scheduler_dedup.handler import NonRetryableJobError, ScheduledRun


#: Results a plan can ask for by name that a JSON plan file cannot spell.
PYTHON_RESULTS: dict[str, Any] = {
    "set": {"tags": {"a", "b"}},
    "bytes": b"\x00raw",
    "tuple_and_datetime": {"pair": (1, 2), "at": datetime(2026, 10, 16, 12, 0, tzinfo=timezone.utc)},
    "nan": {"ratio": float("nan")},
    "object": object(),
    # str from os.listdir/surrogateescape can hold lone surrogates, which UTF-8 (and Firestore) cannot encode
    "lone_surrogate_value": {"s": "\ud800"},
    "lone_surrogate_key": {"\udc80": 1},
    "colliding_keys": {1: "a", "1": "b"},
}

#: Exceptions a plan can ask the job to raise by name (``raise_python``), for the first ``fail_times`` starts.
PYTHON_ERRORS: dict[str, Callable[[], BaseException]] = {
    "system_exit_0": lambda: SystemExit(0),  # what a click/argparse main() raises on success
    "system_exit_3": lambda: SystemExit(3),  # gunicorn's worker-boot-failure code
    "keyboard_interrupt": KeyboardInterrupt,
    "generator_exit": GeneratorExit,
    "non_retryable_lone_surrogate": lambda: NonRetryableJobError("bad file \udc80name"),
    "retryable_lone_surrogate": lambda: RuntimeError("bad file \udc80name"),
}


def _append(event: dict[str, Any]) -> None:
    path = os.environ.get("DEMO_EXECUTIONS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\n")


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """All events recorded so far in ``path`` (an executions log)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def _starts(path: str | None, run_id: str) -> int:
    """How many executions of ``run_id`` the log holds (lines of other runs are skipped before parsing)."""
    if not path:
        return 0
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if run_id in line and json.loads(line)["event"] == "start"
               and json.loads(line)["run_id"] == run_id)


def _plan(scheduled: ScheduledRun) -> dict[str, Any]:
    path = os.environ.get("DEMO_JOB_PLAN")
    if not path or not os.path.exists(path):
        return {}
    plan: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    per_run = f"{scheduled.job_name}@{scheduled.schedule_time.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    return dict(plan.get(per_run, plan.get(scheduled.job_name, {})))


def run(scheduled: ScheduledRun) -> Any:
    """Record a start, sleep, maybe fail as planned, record an end; return a small result."""
    plan = _plan(scheduled)
    base = {"run_id": scheduled.run_id, "attempt_id": scheduled.attempt_id, "job_name": scheduled.job_name,
            "pid": os.getpid()}
    starts_before = _starts(os.environ.get("DEMO_EXECUTIONS_LOG"), scheduled.run_id)
    _append({"event": "start", **base})
    time.sleep(float(plan.get("sleep", os.environ.get("DEMO_JOB_SECONDS", 0.05))))
    if "print" in plan:  # the job's own output, which a failure's answer must carry
        print(plan["print"], flush=True)
        print(plan["print"], file=sys.stderr, flush=True)
    fail = plan.get("fail")
    if fail and starts_before < int(plan.get("fail_times", 10**9)):
        _append({"event": "end", "outcome": fail, **base})
        if fail == "permanent":
            raise NonRetryableJobError(f"planned permanent failure of {scheduled.job_name}")
        raise RuntimeError(f"planned retryable failure of {scheduled.job_name}")
    if "warn" in plan:  # a warning of the job's own, which the handler's logs must still show
        warnings.warn(plan["warn"], FutureWarning, stacklevel=1)
    raised = plan.get("raise_python")
    if raised and starts_before < int(plan.get("fail_times", 10**9)):
        _append({"event": "end", "outcome": raised, **base})
        raise PYTHON_ERRORS[raised]()
    _append({"event": "end", "outcome": "ok", **base})
    if "result_python" in plan:
        return PYTHON_RESULTS[plan["result_python"]]
    if "result" in plan:
        return plan["result"]
    return {"job": scheduled.job_name, "schedule_time": scheduled.schedule_time.isoformat(), "pid": os.getpid()}
