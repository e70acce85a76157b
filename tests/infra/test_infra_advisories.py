"""Advisories at preview: settings Scheduler accepts but a user would want to know about, warned by the component
(the policy pack's advisory rules give the same messages, from the same functions)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

import pytest

from scheduler_dedup.handler.schedule.cron.gaps import fire_gaps
from scheduler_dedup.handler.schedule.overlap import may_be_delayed_or_skipped, schedule_overlap
from scheduler_dedup.infra.job.component import DedupScheduledJob
from scheduler_dedup.infra.stack.mock_run import run_program
from scheduler_dedup.infra.job.settings import resolve_settings
from tests.paths import HELLO_JOB

HELLO = str(HELLO_JOB)
UTC = timezone.utc


def _settings(**overrides: Any) -> Any:
    # one instance kept, so only the advisory under test is given (a python job with 0 gets the scale-in one); an
    # image, since a job built from source runs on a function and gets the per-request CPU one
    args: dict[str, Any] = {"schedule": "0 * * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p1/r/h:1",
                            "job": "jobs:run", "min_instance_count": 1}
    args.update(overrides)
    return resolve_settings("nightly", {k: v for k, v in args.items() if v is not None}, default_project="p1")


def test_runs_that_reach_the_next_fire_time_are_an_advisory_naming_both_numbers() -> None:
    """The reported input: */5 with a 600 s attempt deadline and the default retries (window 4530 s) passed."""
    s = _settings(schedule="*/5 * * * *", attempt_deadline_seconds=600)
    assert s.retry_window_seconds == 4530
    (advisory,) = [a for a in s.advisories if "fires as little as" in a]
    assert "300 s apart" in advisory and "4530 s" in advisory and "600 s attempt deadline" in advisory
    assert "never runs two executions of a job at once" in advisory and "fire at least 4530 s apart" in advisory


def test_a_schedule_whose_gap_outlasts_the_retry_window_has_no_overlap_advisory() -> None:
    s = _settings(schedule="0 */2 * * *")
    assert s.retry_window_seconds < 7200 and s.advisories == ()
    overlap = schedule_overlap("*/15 * * * *", "Etc/UTC", 180, s.retry_window_seconds)
    assert overlap.retries_overlap and not overlap.slow_attempt_overlaps  # a failing run skips, a slow one does not


def test_the_smallest_gap_counts_daylight_saving_days() -> None:
    # 01:00 and 03:00 in Berlin are one real hour apart on the day clocks go forward
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert fire_gaps("0 1,3 * * *", "Europe/Berlin", start).smallest_seconds == 3600
    assert fire_gaps("0 1,3 * * *", "Etc/UTC", start).smallest_seconds == 7200


def test_run_history_can_tell_a_fire_time_inside_the_previous_run_s_retry_window() -> None:
    previous = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert may_be_delayed_or_skipped(datetime(2026, 3, 1, 12, 5, tzinfo=UTC), previous, 4530)
    assert not may_be_delayed_or_skipped(datetime(2026, 3, 1, 13, 30, tzinfo=UTC), previous, 4530)


def test_the_component_warns_at_preview_with_each_advisory(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    args = {"schedule": "*/5 * * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p1/r/h:1",
            "job": "jobs:run", "attempt_deadline_seconds": 600}
    run_program(lambda: DedupScheduledJob("nightly", args), {"gcp:project": "p1"})  # type: ignore[arg-type]
    assert any("4530 s" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_schedule_form_the_cron_page_does_not_settle_is_an_advisory() -> None:
    (advisory,) = _settings(schedule="0 0 */2 * 1").advisories
    assert "'*/2'" in advisory and "Run history accepts either" in advisory


@pytest.mark.parametrize(("alias", "canonical"), [("UTC", "Etc/UTC"), ("US/Eastern", "America/New_York"),
                                                  ("Asia/Calcutta", "Asia/Kolkata"), ("GMT", "Etc/GMT")])
def test_a_time_zone_alias_passes_with_an_advisory_naming_the_canonical_zone(alias: str, canonical: str) -> None:
    s = _settings(time_zone=alias)
    assert s.time_zone == alias
    (advisory,) = s.advisories
    assert advisory.startswith(f"time_zone {alias!r} is an alias") and f"write {canonical!r}" in advisory
    assert _settings(time_zone=canonical).advisories == ()


@pytest.mark.parametrize(("abbreviation", "meant", "fixed"), [("EST", "America/New_York", "Etc/GMT+5"),
                                                              ("MST", "America/Denver", "Etc/GMT+7"),
                                                              ("HST", "Pacific/Honolulu", "Etc/GMT+10")])
def test_a_fixed_offset_abbreviation_is_refused_naming_both_spellings(abbreviation: str, meant: str, fixed: str) -> None:
    from scheduler_dedup.infra.errors import DedupConfigError

    with pytest.raises(DedupConfigError) as info:
        _settings(time_zone=abbreviation)
    assert info.value.field == "time_zone" and "without daylight saving time" in str(info.value)
    assert meant in str(info.value) and repr(fixed) in str(info.value)


def test_a_python_job_on_a_service_cloud_run_may_scale_in_is_an_advisory_with_the_remedies() -> None:
    (advisory,) = [a for a in _settings(min_instance_count=None).advisories if "scale" in a.lower()]
    assert "minimum instances 0" in advisory and "180 s attempt deadline" in advisory
    assert "removes instances that are not processing requests" in advisory
    assert "min_instance_count=1" in advisory and "cloud_run_job_target" in advisory
    assert not [a for a in _settings(min_instance_count=1).advisories if "scale" in a.lower()]
    proxy = _settings(image=None, job=None, min_instance_count=None,
                      cloud_run_job_target={"job": "projects/p1/locations/us-central1/jobs/report"})
    assert not [a for a in proxy.advisories if "scale" in a.lower()]  # the job runs to completion elsewhere


def test_min_instances_reach_the_service_and_stay_within_the_cap() -> None:
    from scheduler_dedup.infra.errors import DedupConfigError

    args = {"schedule": "0 * * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p1/r/h:1",
            "job": "jobs:run", "min_instance_count": 1}
    resources = run_program(lambda: DedupScheduledJob("nightly", args), {"gcp:project": "p1"})  # type: ignore[arg-type]
    (service,) = [r for r in resources if r.type == "gcp:cloudrunv2/service:Service"]
    assert service.inputs["template"]["scaling"] == {"minInstanceCount": 1, "maxInstanceCount": 3}
    with pytest.raises(DedupConfigError, match="min_instance_count"):
        _settings(min_instance_count=4)


def test_a_python_job_built_from_source_is_told_its_function_has_cpu_per_request() -> None:
    """The component's advisory and the pack's dedup-cpu-always-allocated give the same message."""
    from scheduler_dedup.infra.job.cpu_allocation import function_cpu_advisory

    s = _settings(image=None, job_source=HELLO)
    (advisory,) = [a for a in s.advisories if "Cloud Run function" in a]
    assert advisory == function_cpu_advisory(True) and "give image instead of job_source" in advisory
    assert not [a for a in _settings().advisories if "Cloud Run function" in a], "an image's service keeps its CPU"
    proxy = _settings(image=None, job=None, http_target={"url": "https://example.com/hook"})
    assert not [a for a in proxy.advisories if "Cloud Run function" in a], "a proxy call ends within its request"


@pytest.mark.parametrize("target", [
    {"http_target": {"url": "https://export-abc.a.run.app/run"}},
    {"workflow_target": {"workflow": "projects/p1/locations/us-central1/workflows/nightly"}},
])
def test_a_downstream_target_is_told_at_preview_that_a_lost_lease_cannot_stop_it(target: dict[str, Any]) -> None:
    s = _settings(image=None, job=None, **target)
    assert [a for a in s.advisories if "a lost lease cannot stop a downstream execution" in a], s.advisories
    assert not [a for a in _settings().advisories if "lost lease" in a]
