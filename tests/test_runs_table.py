"""The runs table shows every status a run record can have in full, and ``runs --status`` takes each of them."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner
from rich.console import Console

from scheduler_dedup.handler.core.record import (CANCELLED, COMPLETED, FAILED, IN_PROGRESS, RELEASED,
                                                 RUNNING_DOWNSTREAM, SKIPPED_OVERLAP)
from scheduler_dedup.handler.monitoring.run_view import HistoryRun
from scheduler_dedup.local.commands.runs import RUN_ID_CHARS, add_run_row, runs, runs_table

pytestmark = pytest.mark.unit  # tests/costs.py

T = datetime(2026, 12, 7, 15, 0, tzinfo=timezone.utc)
STATUSES = (COMPLETED, FAILED, IN_PROGRESS, RELEASED, RUNNING_DOWNSTREAM, CANCELLED, SKIPPED_OVERLAP)


def _run(status: str, manual: bool = False) -> HistoryRun:
    return HistoryRun(run_id="ab" * 32, job_name="j", schedule_time=T, status=status, stuck=False, attempts=1,
                      attempt_id="c" * 32, previous_attempt_id=None, manual=manual, claimed_at=T,
                      finished_at=T + timedelta(seconds=1), duration_seconds=1.0, result_bytes=None,
                      result_dropped=None, error=None, schedule="0 * * * *", time_zone="Etc/UTC", project="p",
                      location="", output=None, releases=0)


@pytest.mark.parametrize("status", STATUSES)
def test_each_status_is_shown_whole_in_the_runs_table(status: str) -> None:
    console = Console(width=200, record=True, color_system=None)
    table = runs_table()
    add_run_row(table, _run(status), "Etc/UTC")
    add_run_row(table, _run(status, manual=True), "Etc/UTC")
    console.print(table)
    text = " ".join(console.export_text().split())
    assert f" {status} " in text and "…" not in text, text
    assert "(forced)" in text, text


@pytest.mark.parametrize("status", STATUSES)
def test_runs_takes_each_status_as_a_filter(status: str) -> None:
    out = CliRunner().invoke(runs, ["--job", "j", "--status", status, "--store", "bigtable"])
    assert "Invalid value for '--status'" not in out.output, out.output


def test_a_run_id_in_the_error_column_is_the_short_id_runs_show_accepts() -> None:
    holder = "0123456789abcdef" * 4
    error = f"overlap policy skip: run {holder} (scheduled 2026-12-07T14:55:00.000000Z) of this job was still executing"
    console = Console(width=200, record=True, color_system=None)
    table = runs_table()
    add_run_row(table, replace(_run(SKIPPED_OVERLAP), error=error), "Etc/UTC")
    console.print(table)
    text = " ".join(console.export_text().split())
    assert f"run {holder[:RUN_ID_CHARS]} (scheduled" in text and holder not in text, text
