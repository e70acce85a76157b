"""The demo, as a new user runs it: exactly once with dedup, then the run history and the missed fire time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def test_demo_ends_with_the_history_and_reports_the_skipped_fire_time_missed_without_warnings() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "COLUMNS")}
    result = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "demo", "--runs", "6"],
                            capture_output=True, text=True, env=env, timeout=900, check=False)
    out = result.stdout
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
