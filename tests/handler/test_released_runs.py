"""A released run as run history judges it, from the record's facts alone: retrying within the grace period, failed
after it, never missed and never a takeover; the failure streak counts it once its retries are over. And the
reason a job that exits is given."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from scheduler_dedup.handler.monitoring.comparison import compare
from scheduler_dedup.handler.monitoring.findings import FAILED_RUN, RETRYING
from scheduler_dedup.handler.monitoring.run_alerts import FAILING, run_alerts
from scheduler_dedup.handler.monitoring.run_view import HistoryRun
from scheduler_dedup.handler.protocol.job import JobExitedError, call_job

T = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
ERROR = "RuntimeError: disk full on /data"


def _run(at: datetime, status: str = "released", **changes: object) -> HistoryRun:
    run = HistoryRun(run_id=f"r{at:%d%H}", job_name="j", schedule_time=at, status=status, stuck=False, attempts=3,
                     attempt_id="c" * 32, previous_attempt_id=None, manual=False, claimed_at=at + timedelta(seconds=30),
                     finished_at=at + timedelta(seconds=31), duration_seconds=1.0, result_bytes=None,
                     result_dropped=None, error=ERROR if status != "completed" else None, schedule="0 * * * *",
                     time_zone="Etc/UTC", project="p", location="", output="checking /data", releases=3)
    return replace(run, **changes)  # type: ignore[arg-type]


def _report(runs: list[HistoryRun], now: datetime, grace: float = 600) -> list[tuple[str, str]]:
    report = compare(runs, job_name="j", schedule="0 * * * *", time_zone="Etc/UTC", since=T,
                     until=T + timedelta(hours=1), now=now, grace_seconds=grace)
    return [(f.kind, f.detail) for f in report.findings]


def test_a_released_run_is_retrying_within_its_grace_period_and_failed_after_it() -> None:
    runs = [_run(T)]
    [(kind, detail)] = _report(runs, T + timedelta(minutes=5))
    assert kind == RETRYING and ERROR in detail and "3 attempts so far" in detail, detail
    [(kind, detail)] = _report(runs, T + timedelta(minutes=10))
    assert kind == FAILED_RUN and ERROR in detail and "every attempt failed (3 attempts" in detail, detail


def test_a_retry_after_a_release_is_no_takeover_but_a_crash_before_it_still_is() -> None:
    assert not _run(T).took_over
    assert not _run(T, status="completed", attempts=2, releases=1).took_over
    assert _run(T, status="completed", attempts=3, releases=1).took_over  # one more claim than retries explain
    assert _run(T, previous_attempt_id="a" * 32).took_over


def test_the_failure_streak_counts_a_released_run_once_its_retries_are_over() -> None:
    runs = [_run(T, status="failed", releases=0, attempts=1), _run(T + timedelta(hours=1))]
    later = T + timedelta(hours=1, minutes=10)
    assert run_alerts(runs, since=T, until=later - timedelta(minutes=1), failure_threshold=2, grace_seconds=600) == []
    [alert] = run_alerts(runs, since=T, until=later + timedelta(minutes=1), failure_threshold=2, grace_seconds=600)
    assert alert.kind == FAILING and alert.streak == 2 and alert.at == later and ERROR in alert.detail, alert


@pytest.mark.parametrize("code, shown", [(0, "sys.exit(0)"), (None, "sys.exit()"), (3, "sys.exit(3)"),
                                         ("bad input", "sys.exit('bad input')")])
def test_a_job_that_exits_fails_naming_the_exit_and_the_fix(code: object, shown: str) -> None:
    def job(run: object) -> None:
        raise SystemExit(code)

    with pytest.raises(JobExitedError) as caught:
        call_job(job, None)  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"the job called {shown} instead of returning"), caught.value
    assert "main(standalone_mode=False)" in str(caught.value) and caught.value.code == code
