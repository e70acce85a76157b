"""A tiny example job: ``DEDUP_JOB=jobs:run``.

It prints the run and, when ``HELLO_JOB_LOG`` names a file, appends one line per execution to it
(the archive test counts those lines to prove the job ran exactly once).
"""

from __future__ import annotations

import os
from typing import Any


def run(run: Any) -> dict[str, str]:
    """Do the scheduled work once; ``run`` is a ``scheduler_dedup.handler`` ScheduledRun."""
    line = f"{run.run_id} {run.job_name} {run.schedule_time.isoformat()}"
    log = os.environ.get("HELLO_JOB_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    print(f"hello from the scheduled job: {line}")
    return {"greeting": "hello", "run_id": run.run_id}
