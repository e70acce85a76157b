"""The demo, as a new user runs it: exactly once with dedup, then the run history and the missed fire time."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.campaign  # tests/costs.py


def test_demo_ends_with_the_history_and_reports_the_skipped_fire_time_missed_without_warnings() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "COLUMNS")}
    result = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "demo", "--runs", "6",
                             "--keep-emulator"], capture_output=True, text=True, env=env, timeout=900, check=False)
    out = result.stdout
    kept = re.search(r"\(pid (\d+);", out)
    try:
        _check_demo_output(result, out)
        _check_the_printed_runs_command(out, env)
    finally:
        if kept:
            os.kill(int(kept.group(1)), signal.SIGTERM)  # the emulator this test's demo left running


def _check_the_printed_runs_command(out: str, env: dict[str, str]) -> None:
    # The command the demo prints reads its records over its own window: exactly the skipped fire time missed.
    skipped = re.search(r"the one at (\d\d:\d\d) UTC skipped on purpose", out)
    (command,) = [line.strip() for line in out.splitlines() if "scheduler-dedup runs --job" in line]
    assignments = dict(word.split("=", 1) for word in command.split() if "=" in word and not word.startswith("-"))
    args = command[command.index("scheduler-dedup runs") + len("scheduler-dedup runs"):].split()
    runs = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "runs", *args, "--json"],
                          capture_output=True, text=True, env={**env, **assignments}, timeout=120, check=False)
    objects = [json.loads(line) for line in runs.stdout.splitlines()]
    missed = [o["schedule_time"] for o in objects if o.get("kind") == "missed"]
    assert skipped and len(missed) == 1 and missed[0][11:16] == skipped.group(1), runs.stdout + runs.stderr
    assert objects[-1]["record"] == "summary" and objects[-1]["expected"] == 7 and runs.returncode == 1


def _check_demo_output(result: subprocess.CompletedProcess[str], out: str) -> None:
    assert result.returncode == 0, out + result.stderr
    assert "warning" not in (out + result.stderr).lower()
    skipped = re.search(r"the one at (\d\d:\d\d) UTC skipped on purpose", out)
    assert skipped, out
    history = out[out.index("Run history of nightly-report"):]
    rows = [line for line in history.splitlines() if re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line)]
    assert len(rows) == 6 and all("completed" in row for row in rows), history
    assert not any(f" {skipped.group(1)}:00Z" in row for row in rows)
    (missed,) = [line for line in history.splitlines() if line.startswith("missed")]
    assert f" {skipped.group(1)}:00Z" in missed
    assert "1 missed" in history and "repeated" in history  # the crash fault ends in a takeover
    assert max(len(line) for line in out.splitlines()) > 100  # tables keep their width in a pipe
