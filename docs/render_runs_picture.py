"""Render docs/runs-table.svg, the monitoring page's picture of the run history table, from a real local run.

``python docs/render_runs_picture.py`` runs ``scheduler-dedup run-local`` on a small job (one run fails,
one result is too large to store, one instance is killed mid-job, one fire time is skipped) and saves
what it printed as SVG with rich's exporter.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.terminal_theme import MONOKAI

from scheduler_dedup.local.commands.run_local import run_local

JOB = '''
import time
from scheduler_dedup.handler import NonRetryableJobError

def run(scheduled):
    minute = scheduled.schedule_time.minute
    time.sleep(1.0)
    if minute == 30:
        raise NonRetryableJobError("upstream report API answered 403 Forbidden")
    if minute == 50:
        return {"rows": ["x" * 100] * 6000}
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
