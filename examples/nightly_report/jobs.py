"""A job that looks like a real one: ``DEDUP_JOB=jobs:run``.

It reads ``REPORT_BUCKET`` (a plain environment variable) and ``DB_PASSWORD`` (a Secret Manager secret, given as
``secret_env``; locally ``run-local --secret-file DB_PASSWORD=path`` stands in for Secret Manager), builds the night's
report in memory (the reason for ``memory: 2Gi``) and, when ``REPORT_DIR`` names a folder (run-local), writes it
there as ``<run id>.csv``: one file per scheduled run, whatever the retries. The password is never printed or returned.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

ROWS = 10_000


def run(run: Any) -> dict[str, Any]:
    """Build and store one report; ``run`` is a ``scheduler_dedup.handler`` ScheduledRun.

    Raises:
        KeyError: ``REPORT_BUCKET`` or ``DB_PASSWORD`` is not set (the stack config or run-local lacks it).
    """
    bucket = os.environ["REPORT_BUCKET"]
    password = os.environ["DB_PASSWORD"]
    if not password.strip():
        raise ValueError("DB_PASSWORD is empty: check the secret's version")
    # Stands in for the query: rows derived from the run, so a repeated run would write the same report.
    seed = hashlib.sha256(run.run_id.encode()).digest()
    rows = [f"{i},{(seed[i % 32] * (i + 1)) % 997}" for i in range(ROWS)]
    target = f"gs://{bucket}/reports/{run.run_id}.csv"
    folder = os.environ.get("REPORT_DIR")
    if folder:
        path = Path(folder) / f"{run.run_id}.csv"
        path.write_text("row,value\n" + "\n".join(rows) + "\n", encoding="utf-8")
        target = str(path)
    print(f"nightly report of {run.schedule_time.isoformat()}: {len(rows)} rows to {target}")
    return {"rows": len(rows), "report": target}
