"""Render docs/runs-table.svg, the monitoring page's picture of the run history table, from a real local run.

``python docs/render_runs_picture.py`` runs ``scheduler-dedup run-local`` on a small job (its second run fails, one
instance is killed mid-job, one answer is lost, one fire time is skipped) and saves what it printed as SVG with rich's
exporter. Which run fails is counted by run, not read from the clock, so every render shows the same story.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.terminal_theme import MONOKAI

from scheduler_dedup.local.commands.run_local import run_local

JOB = '''
import json
import pathlib
import time
from scheduler_dedup.handler import NonRetryableJobError

SEEN = pathlib.Path(__file__).with_name("seen.json")

def run(scheduled):
    seen = json.loads(SEEN.read_text()) if SEEN.exists() else []
    if scheduled.run_id not in seen:
        seen.append(scheduled.run_id)
        SEEN.write_text(json.dumps(seen))
    time.sleep(1.0)
    if seen.index(scheduled.run_id) == 1:
        raise NonRetryableJobError("upstream report API answered 403 Forbidden")
    return {"rows": 1284, "file": f"gs://reports/{scheduled.run_id[:8]}.csv"}
'''


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "reports.py").write_text(JOB)
        console = Console(record=True, width=170, force_terminal=True)
        quiet = Console(file=open("/dev/null", "w"))
        run_local(Path(tmp), "reports:run", "*/10 * * * *", time_zone="Europe/Berlin", runs=7, speed=600,
                  job_name="nightly-report", lease_seconds=2, attempt_deadline=5,
                  delivery_faults=("clean", "clean", "crash", "lost_response", "skipped", "clean", "concurrent"),
                  console=console, status=quiet)
    target = Path(__file__).with_name("runs-table.svg")
    console.save_svg(str(target), title="scheduler-dedup run-local / runs", theme=MONOKAI)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
