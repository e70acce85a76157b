"""``scheduler-dedup demo --overlap``: a job slower than its interval, allow and skip side by side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_dedup.local.commands.demo_overlap import most_at_once


@pytest.mark.campaign
def test_overlap_demo_shows_skip_running_one_at_a_time_and_allow_several() -> None:
    result = subprocess.run([str(Path(sys.executable).parent / "scheduler-dedup"), "demo", "--overlap"],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "160"})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "skipped_overlap" in out and "most at once" in out and "OK" in out


def test_most_at_once_counts_overlapping_executions() -> None:
    start, end = {"event": "start"}, {"event": "end"}
    assert most_at_once([start, end, start, end]) == 1
    assert most_at_once([start, start, end, start, end, end]) == 2
