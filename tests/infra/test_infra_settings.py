"""Config validation of DedupScheduledJob: each misconfiguration fails before any child, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.handler.schedule.retry_windows import RetryPolicy, retry_window_seconds
from scheduler_dedup.infra.job.settings import resolve_settings
from tests.paths import HELLO_JOB

HELLO = str(HELLO_JOB)


def _args(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"schedule": "*/15 * * * *", "region": "us-central1", "job_source": HELLO, "job": "jobs:run"}
    args.update(overrides)
    return {k: v for k, v in args.items() if v is not None}


def _fails(field: str, fix: str, name: str = "nightly", **overrides: Any) -> DedupConfigError:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings(name, _args(**overrides), default_project="p1")
    assert info.value.field == field, str(info.value)
    assert fix in str(info.value)
    return info.value


def test_defaults_are_the_documented_ones() -> None:
    s = resolve_settings("nightly", _args(), default_project="p1")
    # the request timeout leaves the advisory margin over the deadline; five retries span 1.5 x the lease
    assert (s.attempt_deadline_seconds, s.request_timeout_seconds, s.lease_seconds) == (180, 195, 300)
    assert (s.retention_seconds, s.manual_tolerance_seconds, s.collection) == (604800, 5, "scheduler_runs")
    assert s.time_zone == "Etc/UTC" and s.target_type == "python" and s.deletion_protection is False
    assert s.retry == RetryPolicy(5, 0, 15, 3600, 5)
    assert s.database_id == "nightly-dedup" and s.database_location == "us-central1"
    assert s.oidc_audience == "https://scheduler-dedup.invalid/projects/p1/locations/us-central1/services/nightly"


@pytest.mark.parametrize("deadline", [14, 1801, 0])
def test_attempt_deadline_out_of_range(deadline: int) -> None:
    _fails("attempt_deadline_seconds", "use 15 to 1800 seconds", attempt_deadline_seconds=deadline)


@pytest.mark.parametrize("deadline", [15, 1800])
def test_attempt_deadline_bounds_are_accepted(deadline: int) -> None:
    s = resolve_settings("nightly", _args(attempt_deadline_seconds=deadline, lease_seconds=1815), default_project="p")
    assert s.attempt_deadline_seconds == deadline


def test_request_timeout_shorter_than_attempt_deadline() -> None:
    _fails("request_timeout_seconds", "raise it to at least 300", attempt_deadline_seconds=300, request_timeout_seconds=200)


def test_lease_shorter_than_request_timeout() -> None:
    _fails("lease_seconds", "raise it to at least 600", request_timeout_seconds=600, lease_seconds=400)


def test_lease_shorter_than_attempt_deadline() -> None:
    _fails("lease_seconds", "raise it to at least 915", attempt_deadline_seconds=900, lease_seconds=600)


def test_lease_default_follows_a_long_request_timeout() -> None:
    s = resolve_settings("nightly", _args(attempt_deadline_seconds=900), default_project="p")
    assert s.request_timeout_seconds == 915 and s.lease_seconds == 915


def test_retention_shorter_than_max_retry_duration() -> None:
    err = _fails("retention_seconds", "raise it to at least 7380", retention_seconds=3600,
                 retry={"retry_count": 1, "max_retry_duration_seconds": 7200})
    assert "retry window (7380 s" in str(err)


def test_retention_shorter_than_what_retry_count_and_backoff_imply() -> None:
    # 3 retries, backoff 600 s, 1200 s, 1800 s(capped) ; 4 attempts x 180 s
    retry = {"retry_count": 3, "min_backoff_seconds": 600, "max_backoff_seconds": 1800, "max_doublings": 5}
    _fails("retention_seconds", "at least 4320", retention_seconds=4000, retry=retry)
    ok = resolve_settings("nightly", _args(retention_seconds=4320, retry=retry), default_project="p")
    assert ok.retry_window_seconds == 4320


def test_retry_window_follows_schedulers_backoff_rule() -> None:
    # Scheduler's doc example: min 10 s, max 300 s, doublings 3 -> 10, 20, 40, 80, 160, 240, 300, 300
    policy = RetryPolicy(retry_count=5, max_retry_duration_seconds=0, min_backoff_seconds=10,
                         max_backoff_seconds=300, max_doublings=3)
    assert [policy.backoff_seconds(i) for i in range(8)] == [10, 20, 40, 80, 160, 240, 300, 300]
    assert retry_window_seconds(policy, 60) == 6 * 60 + 10 + 20 + 40 + 80 + 160


@pytest.mark.parametrize("count", [-1, 6])
def test_retry_count_out_of_range(count: int) -> None:
    _fails("retry.retry_count", "use 0 to 5", retry={"retry_count": count})


@pytest.mark.parametrize("schedule", ["every 5 minutes", "0 */5 * * * *", "61 * * * *", "@hourly", "* * *"])
def test_invalid_or_groc_schedule(schedule: str) -> None:
    _fails("schedule", "unix-cron", schedule=schedule)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "UTC+2", "../etc/passwd"])
def test_invalid_time_zone(zone: str) -> None:
    _fails("time_zone", "Etc/UTC", time_zone=zone)


def test_neither_source_nor_image_nor_target() -> None:
    _fails("job_source", "neither job_source nor image nor a proxy target", job_source=None, job=None)


def test_job_required_with_source_and_module_must_exist() -> None:
    _fails("job", "module:function", job=None)
    _fails("job", "expected reports.py", job="reports:run")


def test_two_proxy_targets_are_refused() -> None:
    _fails("workflow_target", "only one proxy target", job_source=None, job=None,
           cloud_run_job_target={"job": "projects/p/locations/r/jobs/j"},
           workflow_target={"workflow": "projects/p/locations/r/workflows/w"})


def test_proxy_target_with_job_source_is_refused() -> None:
    _fails("workflow_target", "runs no user code", workflow_target={"workflow": "projects/p/locations/r/workflows/w"})


def test_proxy_target_names_must_be_full_resource_names() -> None:
    _fails("cloud_run_job_target.job", "projects/P/locations/L/jobs/NAME", job_source=None, job=None,
           cloud_run_job_target={"job": "nightly"})
    _fails("http_target.url", "https://", job_source=None, job=None, http_target={"url": "http://x"})


def test_unknown_input_is_refused() -> None:
    _fails("shedule", "unknown input", shedule="* * * * *")


def test_component_name_must_fit_gcp_ids() -> None:
    _fails("name", "lowercase letters", name="Nightly_Report")



@pytest.mark.parametrize(("field", "overrides"), [
    ("retention_seconds", {"retention_seconds": 10_000_000_000}),
    ("lease_seconds", {"lease_seconds": 200_000}),
    ("manual_tolerance_seconds", {"manual_tolerance_seconds": 100_000}),
    ("retention_seconds", {"retention_seconds": 500, "lease_seconds": 3600, "attempt_deadline_seconds": 300,
                           "request_timeout_seconds": 300, "retry": {"retry_count": 0}}),
    ("collection", {"collection": "__x__"}),
    ("project", {"project": "My_Project!"}),
])
def test_values_the_handler_would_refuse_fail_at_preview(field: str, overrides: dict[str, Any]) -> None:
    """The component checks the handler's settings with the handler's own rules, so no revision crash-loops."""
    _fails(field, "the handler would refuse it at start-up", **overrides)


def test_long_component_names_get_distinct_valid_service_account_ids() -> None:
    import re

    from scheduler_dedup.infra.job.job_names import account_id as _account_id

    ids = {_account_id(name, suffix) for name in ("nightly-report-europe-west1", "nightly-report-europe-east1")
           for suffix in ("sched", "runtime", "build")}
    assert len(ids) == 6
    assert all(re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", i) for i in ids), ids
    assert _account_id("hello", "runtime") == "hello-runtime"


def test_an_image_with_a_proxy_target_is_refused() -> None:
    _fails("workflow_target", "remove job_source, job and image", job_source=None, job=None,
           image="us-docker.pkg.dev/p/r/handler:1", workflow_target={"workflow": "projects/p1/locations/us-central1/workflows/w"})


@pytest.mark.parametrize(("field", "overrides"), [
    ("collection", {"collection": "runs/sub"}),
    ("database_id", {"database_id": "Bad_Name"}),
    ("database_id", {"database_id": "ab"}),
])
def test_collection_and_database_ids_are_checked_by_the_handlers_rules(field: str, overrides: dict[str, Any]) -> None:
    _fails(field, "the handler would refuse it at start-up", **overrides)


def test_a_misspelt_http_target_audience_fails_at_preview() -> None:
    fn = "https://us-central1-my-proj.cloudfunctions.net/export-report"
    _fails("http_target.audience", f"use {fn!r}", job_source=None, job=None,
           http_target={"url": fn, "audience": "https://us-central1-my-proj.cloudfunctions.net"})
    _fails("http_target.url", "names no function", job_source=None, job=None,
           http_target={"url": "https://us-central1-my-proj.cloudfunctions.net/"})
    _fails("http_target.audience", "non-empty", job_source=None, job=None,
           http_target={"url": fn, "audience": " "})


def test_defaults_recover_a_crashed_attempt() -> None:
    """The retries must outlast a crashed attempt's lease, or every retry gets 409 and the run never completes."""
    from scheduler_dedup.handler.schedule.retry_windows import crash_recovery_seconds, recovers_crash

    for overrides in ({}, {"attempt_deadline_seconds": 1800}, {"request_timeout_seconds": 3600},
                      {"retry": {"retry_count": 2}}, {"retry": {"max_doublings": 0}}):
        s = resolve_settings("nightly", _args(**overrides), default_project="p1")
        assert recovers_crash(s.retry, s.lease_seconds, s.attempt_deadline_seconds), overrides
        assert (crash_recovery_seconds(s.retry, s.attempt_deadline_seconds)
                >= 1.5 * s.lease_seconds - s.retry.min_backoff_seconds), overrides


@pytest.mark.parametrize(("retry", "field", "fix"), [
    # the field case: retries at +5, +10, +20 s against a 300 s lease
    ({"retry_count": 3, "min_backoff_seconds": 5}, "retry.retry_count", "retry.min_backoff_seconds to at least 43"),
    ({"retry_count": 0}, "retry.retry_count", "retry.retry_count to at least 1"),
    ({"retry_count": 2, "max_backoff_seconds": 100}, "retry.retry_count", "raise retry.retry_count"),
    # retries kept by the duration alone: 5, 10, 20, 40 s apart within 255 s of a 180 s attempt, the last at 75 s
    ({"retry_count": 0, "max_retry_duration_seconds": 255}, "retry.retry_count",
     "retry.max_retry_duration_seconds to at least 495"),
])
def test_retries_that_end_before_the_lease_fail_at_preview(retry: dict[str, int], field: str, fix: str) -> None:
    err = _fails(field, fix, retry=retry)
    # with no retry at all, nothing gets 409: the message says no retry comes (never both)
    never = retry.get("retry_count") == 0 and not retry.get("max_retry_duration_seconds")
    assert ("no retry would come" if never else "every retry would get 409") in str(err), err
    assert ("409" in str(err)) is not never and "lease_seconds (300 s)" in str(err), err


def test_retry_count_0_with_a_max_retry_duration_retries_until_both_limits_are_reached() -> None:
    """Retry jobs page: a job is not retried only when retryCount is 0 *and* maxRetryDuration is 0; with both set it is
    "retried until both limits are reached". An hour of retries outlasts the 300 s lease of a crashed attempt."""
    from scheduler_dedup.handler.schedule.retry_windows import crash_recovery_seconds, retries_described, surely_sent_retries

    s = resolve_settings("nightly", _args(retry={"retry_count": 0, "max_retry_duration_seconds": 3600}),
                         default_project="p1")
    starts = surely_sent_retries(s.retry, s.attempt_deadline_seconds)
    assert len(starts) > 5 and starts[-1] + s.attempt_deadline_seconds <= 3600
    assert crash_recovery_seconds(s.retry, s.attempt_deadline_seconds) == starts[-1] >= s.lease_seconds
    assert "until both limits are reached" in retries_described(s.retry, s.attempt_deadline_seconds)
    err = _fails("retry.retry_count", "never retries a failed attempt", retry={"retry_count": 0})
    assert "maxRetryDuration is also 0" in str(err)


def test_a_job_entry_point_missing_from_job_source_fails_at_preview(tmp_path: Path) -> None:
    """jobs:nonexistent is refused at preview, naming what the module defines, not by every revision at start-up."""
    err = _fails("job", "defines no 'nonexistent'", job="jobs:nonexistent")
    assert "it defines" in str(err) and "run" in str(err)
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "__init__.py").write_text(
        "import os\nif os.environ.get('X'):\n    def run(r):\n        return 1\nelse:\n    run = None\n"
        "try:\n    from json import dumps as export\nexcept ImportError:\n    pass\n")
    (source / "star.py").write_text("from os.path import *\n")
    (source / "broken.py").write_text("def run(:\n")
    for ok in ("pkg:run", "pkg:export", "star:anything"):
        assert resolve_settings("nightly", _args(job_source=str(source), job=ok), default_project="p1").job == ok
    _fails("job", "cannot be parsed", job_source=str(source), job="broken:run")


@pytest.mark.parametrize("schedule", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_schedule_that_never_fires_fails_at_preview(schedule: str) -> None:
    _fails("schedule", "never fires", schedule=schedule)


@pytest.mark.parametrize("schedule", ["0 0 29 2 *", "0 0 31 2 1", "0 0 31 * *"])
def test_rare_schedules_that_do_fire_pass(schedule: str) -> None:
    assert resolve_settings("nightly", _args(schedule=schedule), default_project="p1").schedule == schedule


def test_every_mistake_of_a_config_is_reported_at_once() -> None:
    """Four mistakes are reported in one round of preview, each naming its field."""
    from scheduler_dedup.infra.errors import DedupConfigErrors

    with pytest.raises(DedupConfigErrors) as info:
        resolve_settings("nightly", _args(schedule="every 5 minutes", time_zone="Mars/Olympus",
                                          attempt_deadline_seconds=10, max_instance_count=0), default_project="p1")
    assert [e.field for e in info.value.errors] == ["schedule", "time_zone", "attempt_deadline_seconds",
                                                    "max_instance_count"]
    assert str(info.value).startswith("4 problems:") and "'*/5 * * * *'" in str(info.value)
    # a check that needs an invalid input is skipped, not reported against a default
    with pytest.raises(DedupConfigError) as one:
        resolve_settings("nightly", _args(attempt_deadline_seconds=10, request_timeout_seconds=20), default_project="p")
    assert not isinstance(one.value, DedupConfigErrors) and one.value.field == "attempt_deadline_seconds"


def test_every_mistake_of_a_retry_config_is_reported_at_once_naming_its_field() -> None:
    """retry_count 7, max_retry_duration -5, max_doublings -2, min_backoff -1 took four rounds of preview (and the
    negative ones were all reported against ``retry``, naming no field)."""
    from scheduler_dedup.infra.errors import DedupConfigErrors

    with pytest.raises(DedupConfigErrors) as info:
        resolve_settings("nightly", _args(retry={"retry_count": 7, "max_retry_duration_seconds": -5,
                                                 "max_doublings": -2, "min_backoff_seconds": -1}), default_project="p1")
    assert [e.field for e in info.value.errors] == ["retry.retry_count", "retry.max_retry_duration_seconds",
                                                    "retry.max_doublings", "retry.min_backoff_seconds"]
    assert "use 0 to 5" in str(info.value) and "0 means unlimited" in str(info.value)
    # the pair check still runs beside another field's mistake
    with pytest.raises(DedupConfigErrors) as pair:
        resolve_settings("nightly", _args(retry={"retry_count": 9, "min_backoff_seconds": 600,
                                                 "max_backoff_seconds": 60}), default_project="p1")
    assert [e.field for e in pair.value.errors] == ["retry.retry_count", "retry.min_backoff_seconds"]


def test_a_scheduler_account_of_another_project_is_refused_at_preview() -> None:
    """OidcToken: "The service account must be within the same project as the job": preview refuses another's."""
    err = _fails("scheduler_service_account_email", "within the same project as the job",
                 scheduler_service_account_email="dedup-scheduler@other-proj.iam.gserviceaccount.com")
    assert "'other-proj'" in str(err) and "'p1'" in str(err)
    for same in ("dedup-scheduler@p1.iam.gserviceaccount.com", "p1@appspot.gserviceaccount.com",
                 "123456789-compute@developer.gserviceaccount.com"):  # a project number cannot be compared: passes
        assert resolve_settings("nightly", _args(scheduler_service_account_email=same),
                                default_project="p1").scheduler_service_account_email == same


def test_the_project_of_a_service_account_email() -> None:
    from scheduler_dedup.infra.job.oidc_account import service_account_project

    assert service_account_project("a@my-proj.iam.gserviceaccount.com") == "my-proj"
    assert service_account_project("a@proj.example.com.iam.gserviceaccount.com") == "example.com:proj"
    assert service_account_project("service-1@gcp-sa-cloudscheduler.iam.gserviceaccount.com") is None


@pytest.mark.parametrize(("field", "overrides", "needles"), [
    ("region", {"region": "europe-west99"}, ["not a location of Cloud Scheduler or Cloud Run", "'europe-west9'"]),
    ("region", {"region": "us-centrl1"}, ["did you mean 'us-central1'?"]),
    ("region", {"region": "asia-southeast3"}, ["Cloud Run is not offered in 'asia-southeast3'"]),
    ("database_location", {"database_location": "eur4"}, ["not a location of Firestore", "'eur3'"]),
])
def test_a_region_a_service_lacks_is_refused_naming_the_service_and_the_nearest_spelling(
        field: str, overrides: dict[str, str], needles: list[str]) -> None:
    err = _fails(field, "published locations as of", **overrides)
    for needle in needles:
        assert needle in str(err)


def test_published_regions_and_multi_regions_pass() -> None:
    for overrides in ({"region": "europe-west1"}, {"region": "me-central2"}, {"database_location": "nam5"},
                      {"database_location": "eur3", "region": "europe-west1"}):
        assert resolve_settings("nightly", _args(**overrides), default_project="p1")
    # an adopted database's location is not the component's to check
    assert resolve_settings("nightly", _args(create_database=False, database_location="somewhere1"),
                            default_project="p1")
