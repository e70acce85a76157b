"""``scheduler-dedup demo --downstream``: runs forwarded to a Cloud Run job whose executions outlast the interval,
skip and replace side by side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.campaign
def test_downstream_demo_shows_one_execution_at_a_time_under_skip_and_replace() -> None:
    result = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "demo", "--downstream"],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "160"})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "skipped_overlap" in out and "cancelled" in out and "most at once" in out and "OK" in out
