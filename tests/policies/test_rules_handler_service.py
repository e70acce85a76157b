"""The rules on the service running the dedup handler (policies/rules/handler_service.py) on engine-shaped
(camelCase) properties: compliant, violating, missing/unknown, and config override."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_dedup.policies.reading.model import UNKNOWN, Resource

from .conftest import JOB, RUN_URL, SERVICE, good_stack, job, res, run, service, ttl_field


# ------------------------------------------------------------------ dedup-target-audience

def test_the_handlers_downstream_audience_must_be_one_the_target_accepts() -> None:
    fn = "https://us-central1-my-proj.cloudfunctions.net/export-report"
    base = {"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": fn}
    assert run("dedup-target-audience", [service(env=base)]) == []
    assert run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET_AUDIENCE": fn})]) == []
    [finding] = run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET_AUDIENCE":
                                                              "https://us-central1-my-proj.cloudfunctions.net"})])
    assert "DEDUP_TARGET_AUDIENCE" in finding.message and f"use {fn!r}" in finding.message
    [bare] = run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET": "https://r-p.cloudfunctions.net"})])
    assert "names no function" in bare.message
    assert run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET_AUDIENCE": UNKNOWN})]) == []


# ------------------------------------------------------------------ dedup-handler-settings

HANDLER_ENV = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run"}


def test_handler_settings_pass_a_complete_env_and_judge_only_dedup_services() -> None:
    both = {**HANDLER_ENV, "DEDUP_OIDC_AUDIENCE": RUN_URL, "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com"}
    assert run("dedup-handler-settings", [service(HANDLER_ENV), job()]) == []
    assert run("dedup-handler-settings", [service(both)]) == []
    # a service without DEDUP_* variables is not the handler, even when a job calls it
    assert run("dedup-handler-settings", [service({"PORT": "8080"}), job()]) == []


@pytest.mark.parametrize(("env", "named"), [
    ({"DEDUP_OIDC_AUDIENCE": RUN_URL}, "DEDUP_ALLOWED_CALLERS"),
    ({"DEDUP_LEASE_SECONDS": "0"}, "DEDUP_LEASE_SECONDS"),
    ({"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "http://plain.example.com"}, "DEDUP_TARGET"),
    # replace cancels a downstream execution: a python job inside the handler has none that can be cancelled
    ({"DEDUP_OVERLAP": "replace"}, "DEDUP_TARGET_TYPE=python"),
])
def test_handler_settings_report_the_handlers_refusal(env: dict[str, str], named: str) -> None:
    findings = run("dedup-handler-settings", [service({**HANDLER_ENV, **env})])
    assert len(findings) == 1 and findings[0].level == "mandatory"
    assert named in findings[0].message and "would refuse to start" in findings[0].message


def test_handler_settings_unknown_values_pass() -> None:
    """Preview: a value that is an output of another resource (or the whole list) is not judged."""
    partner_unknown = {**HANDLER_ENV, "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com",
                       "DEDUP_OIDC_AUDIENCE": UNKNOWN}
    target_type_unknown = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_TARGET_TYPE": UNKNOWN, "DEDUP_TARGET": UNKNOWN}
    whole = res(SERVICE, "svc", {"uri": RUN_URL, "template": {"containers": [{"image": "i", "envs": UNKNOWN}]}})
    assert run("dedup-handler-settings", [service(partner_unknown)]) == []  # type: ignore[arg-type]
    assert run("dedup-handler-settings", [service(target_type_unknown)]) == []  # type: ignore[arg-type]
    assert run("dedup-handler-settings", [whole]) == []
    # an unknown value hides no refusal of a known one
    lease_zero = {**partner_unknown, "DEDUP_LEASE_SECONDS": "0"}
    assert [f.rule for f in run("dedup-handler-settings", [service(lease_zero)])] == ["dedup-handler-settings"]  # type: ignore[arg-type]


# ------------------------------------------------------------------ dedup-lease-covers-deadline

def test_lease_covers_deadline() -> None:
    assert run("dedup-lease-covers-deadline", good_stack()) == []
    short_lease = run("dedup-lease-covers-deadline", [job(), service(env={"DEDUP_LEASE_SECONDS": "60"}), ttl_field()])
    assert len(short_lease) == 1 and "DEDUP_LEASE_SECONDS to at least 300" in short_lease[0].message
    long_deadline = run("dedup-lease-covers-deadline", [job(attemptDeadline="600s"), service(env={"DEDUP_LEASE_SECONDS": "900"})])
    assert len(long_deadline) == 1 and "template.timeout to at least \"600s\"" in long_deadline[0].message
    bad_number = run("dedup-lease-covers-deadline", [service(env={"DEDUP_LEASE_SECONDS": "five"})])
    assert len(bad_number) == 1 and "not a number of seconds" in bad_number[0].message


def test_lease_defaults_and_unknowns() -> None:
    bare_service = res(SERVICE, "svc", {"uri": RUN_URL, "template": {"containers": [{"envs": [{"name": "DEDUP_X", "value": "1"}]}]}})
    bare_job = res(JOB, "job", {"httpTarget": {"uri": RUN_URL}})
    assert run("dedup-lease-covers-deadline", [bare_job, bare_service]) == []  # 300 >= 300 >= 180
    assert run("dedup-lease-covers-deadline", [job(attemptDeadline="600s"),
                                               service(env={"DEDUP_LEASE_SECONDS": "900"}, timeout=UNKNOWN)]) == []
    short = run("dedup-lease-covers-deadline", [job(attemptDeadline="600s"), service(timeout=UNKNOWN)])
    assert len(short) == 1 and "DEDUP_LEASE_SECONDS to at least 600" in short[0].message
    assert run("dedup-lease-covers-deadline", [job(), service(env={"DEDUP_LEASE_SECONDS": UNKNOWN})]) == []  # type: ignore[dict-item]


def test_lease_config_margin() -> None:
    assert run("dedup-lease-covers-deadline", good_stack(), {"leaseMarginSeconds": 30})


def test_pairing_by_property_dependency_with_two_services() -> None:
    pending = res(JOB, "job", {"attemptDeadline": "600s", "httpTarget": {"uri": UNKNOWN}},
                  deps={"httpTarget": ["urn:pulumi:s::p::gcp:cloudrunv2/service:Service::svc"]})
    other = res(SERVICE, "other", {"template": {"timeout": "900s"}})
    findings = run("dedup-lease-covers-deadline", [pending, other, service(uri=UNKNOWN)])
    assert len(findings) == 1 and "service svc" in findings[0].message and "only Cloud Run service" not in findings[0].message


FUNCTION_URL = "https://nightly-abc.a.run.app"


def gen2_function(env: dict[str, str], timeout_seconds: int | None = 540) -> Resource:
    config: dict[str, Any] = {"environmentVariables": env, "uri": FUNCTION_URL}
    if timeout_seconds is not None:
        config["timeoutSeconds"] = timeout_seconds
    return res("gcp:cloudfunctionsv2/function:Function", "fn", {"url": FUNCTION_URL, "serviceConfig": config})


def v1_service(env: dict[str, str], timeout_seconds: int = 900) -> Resource:
    return res("gcp:cloudrun/service:Service", "v1", {
        "template": {"spec": {"timeoutSeconds": timeout_seconds, "containers": [
            {"image": "sidecar", "envs": [{"name": "OTHER", "value": "x"}]},
            {"image": "handler", "envs": [{"name": k, "value": v} for k, v in env.items()]}]}},
        "statuses": [{"url": FUNCTION_URL}]})


@pytest.mark.parametrize("make", [gen2_function, v1_service])
def test_stack_rules_see_the_handler_on_cloud_functions_gen2_and_cloud_run_v1(make: Any) -> None:
    """The handler is a functions-framework target: deployed as a gen2 function or a v1 service, the same mistakes count."""
    bad = make({"DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "60", "DEDUP_RETENTION_SECONDS": "60"})
    scheduler = job(httpTarget={"uri": FUNCTION_URL, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com"}},
                    retryConfig={"retryCount": 5})
    stack = [scheduler, bad]
    assert run("dedup-lease-covers-deadline", stack), "lease 60 s < request timeout"
    assert run("dedup-firestore-ttl", stack), "no TTL field for scheduler_runs"
    assert run("dedup-retention-covers-retries", stack), "retention 60 s < retry window"
    good = make({"DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "900", "DEDUP_RETENTION_SECONDS": "604800"})
    fine = [scheduler, good, ttl_field()]
    for rule in ("dedup-lease-covers-deadline", "dedup-firestore-ttl", "dedup-retention-covers-retries"):
        assert run(rule, fine) == [], rule


def test_gen2_function_default_timeout_is_60_seconds() -> None:
    fn = gen2_function({"DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "300"}, timeout_seconds=None)
    scheduler = job(httpTarget={"uri": FUNCTION_URL, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com"}})
    messages = [f.message for f in run("dedup-lease-covers-deadline", [scheduler, fn])]
    assert any("60" in m for m in messages), messages  # 60 s timeout < 180 s attempt deadline


# ------------------------------------------------------------------ crash recovery

def test_retries_that_end_before_a_crashed_attempts_lease_are_a_mandatory_finding() -> None:
    """retryCount 3 with Scheduler's backoff defaults retries at +5, +10, +20 s; a 300 s lease answers 409 to all."""
    crashed = job(retryConfig={"retryCount": 3})
    [finding] = run("dedup-retries-outlast-lease", [crashed, service()])
    assert finding.level == "mandatory"
    assert "Scheduler sends 3 retries, 5, 10, 20 s apart: the last starts 35 s after a failed attempt" in finding.message
    assert "DEDUP_LEASE_SECONDS=300 (the handler's default)" in finding.message and "409" in finding.message
    assert 'minBackoffDuration to at least "43s"' in finding.message
    [none] = run("dedup-retries-outlast-lease", [job(), service()])
    assert "retryCount 0 (Scheduler's default), maxRetryDuration 0s" in none.message
    assert "Scheduler never retries a failed attempt" in none.message
    # retryCount 0 with a retry duration: retried "until both limits are reached" (Retry jobs page), past the lease
    kept = job(retryConfig={"retryCount": 0, "maxRetryDuration": "3600s"})
    assert run("dedup-retries-outlast-lease", [kept, service()]) == []
    [short] = run("dedup-retries-outlast-lease", [job(retryConfig={"retryCount": 0, "maxRetryDuration": "255s"}),
                                                  service()])
    assert "until both limits are reached" in short.message and 'maxRetryDuration to at least "495s"' in short.message
    spanning = job(retryConfig={"retryCount": 5, "minBackoffDuration": "15s"})
    assert run("dedup-retries-outlast-lease", [spanning, service()]) == []
    unreadable = job(retryConfig={"retryCount": 5, "minBackoffDuration": "15 seconds"})
    [bad] = run("dedup-retries-outlast-lease", [unreadable, service()])
    assert "'15 seconds'" in bad.message and "cannot be checked" in bad.message
    assert run("dedup-retries-outlast-lease", [job(retryConfig=UNKNOWN), service()]) == []


# ------------------------------------------------------------------ dedup-cpu-always-allocated

def _with_cpu(resources: Any) -> Resource:
    envs = [{"name": "DEDUP_COLLECTION", "value": "scheduler_runs"}]
    container: dict[str, Any] = {"image": "i", "envs": envs}
    if resources is not None:
        container["resources"] = resources
    return res(SERVICE, "svc", {"uri": RUN_URL, "template": {"timeout": "300s", "containers": [container]}})


@pytest.mark.parametrize(("resources", "flagged"), [
    (None, True),  # Cloud Run's default: CPU only during requests
    ({"cpuIdle": True}, True),
    ({"startupCpuBoost": True}, True),  # resources set, cpuIdle unset: pulumi-gcp defaults it to true
    ({"cpuIdle": False}, False),
    ({"cpuIdle": UNKNOWN}, False),  # preview: cannot tell yet
])
def test_a_dedup_service_without_cpu_always_allocated_is_flagged_advisory(resources: Any, flagged: bool) -> None:
    findings = run("dedup-cpu-always-allocated", [job(), _with_cpu(resources)])
    assert bool(findings) is flagged, findings
    if flagged:
        assert findings[0].level == "advisory" and "cpuAlwaysAllocated" in findings[0].message
    other = res(SERVICE, "web", {"uri": "https://web-x.a.run.app", "template": {"containers": [{"image": "i"}]}})
    assert run("dedup-cpu-always-allocated", [other]) == [], "a service that is not the handler is not checked"


# ------------------------------------------------------------------ dedup-scale-in, cloud-run-service-location

def test_a_python_job_on_a_service_that_keeps_no_instance_is_a_scale_in_advisory() -> None:
    python = {"DEDUP_COLLECTION": "scheduler_runs", "DEDUP_JOB": "jobs:run"}
    [bad] = run("dedup-scale-in", [job(), service(env=python)])
    assert bad.level == "advisory" and "minimum instances 0" in bad.message and "cloud_run_job_target" in bad.message
    kept = service(env=python, template={"timeout": "300s", "scaling": {"minInstanceCount": 1},
                                         "containers": [{"image": "i", "envs": [{"name": "DEDUP_JOB",
                                                                                 "value": "jobs:run"}]}]})
    assert run("dedup-scale-in", [job(), kept]) == []
    proxy = {"DEDUP_TARGET_TYPE": "cloud_run_job", "DEDUP_TARGET": "projects/p/locations/l/jobs/j"}
    assert run("dedup-scale-in", [job(), service(env=proxy)]) == []  # the job runs to completion elsewhere


def test_a_service_location_cloud_run_lacks_is_mandatory() -> None:
    [bad] = run("cloud-run-service-location", [service(location="us-centrl1")])
    assert bad.level == "mandatory" and "did you mean 'us-central1'?" in bad.message
    assert run("cloud-run-service-location", [service(location="us-central1"), service()]) == []


def test_replace_passes_for_a_target_whose_executions_can_be_cancelled() -> None:
    env = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_OVERLAP": "replace", "DEDUP_TARGET_TYPE": "cloud_run_job",
           "DEDUP_TARGET": "projects/p/locations/us-central1/jobs/nightly"}
    assert run("dedup-handler-settings", [service(env)]) == []


def test_a_gen2_function_redirecting_the_handler_by_a_secret_is_named() -> None:
    """A gen2 function's secret variables are read by name, as the pack's reading layer extracts every handler env."""
    fn = gen2_function({"DEDUP_JOB": "jobs:run"})
    fn.props["serviceConfig"]["secretEnvironmentVariables"] = [
        {"key": "GCE_METADATA_HOST", "projectId": "p", "secret": "meta", "version": "latest"}]
    findings = run("dedup-handler-environment", [fn])
    assert len(findings) == 1 and "'GCE_METADATA_HOST' redirects the metadata server" in findings[0].message
    assert run("dedup-handler-environment", [gen2_function({"DEDUP_JOB": "jobs:run"})]) == []


def test_a_flag_from_a_secret_on_a_gen2_function_counts_as_set() -> None:
    fn = gen2_function({"DEDUP_JOB": "jobs:run", "GOOGLE_CLOUD_PROJECT": "p"})
    fn.props["serviceConfig"]["secretEnvironmentVariables"] = [
        {"key": "DEDUP_ALLOW_TEST_ENDPOINTS", "projectId": "p", "secret": "flag", "version": "latest"}]
    findings = run("dedup-handler-settings", [fn])
    assert any("counts as set" in f.message for f in findings), findings


# ------------------------------------------------------------------ dedup-catch-up-budget

def test_a_catch_up_window_a_delivery_cannot_catch_up_at_once_is_an_advisory() -> None:
    told = {"DEDUP_JOB": "jobs:run", "DEDUP_CATCH_UP_WINDOW_SECONDS": "3600", "DEDUP_ATTEMPT_DEADLINE_SECONDS": "60"}
    every_minute = job(schedule="* * * * *", attemptDeadline="60s")
    [finding] = run("dedup-catch-up-budget", [every_minute, service(env=told)])
    assert finding.level == "advisory" and "60 fire times" in finding.message
    assert "raise attemptDeadline to at least 120" in finding.message
    assert run("dedup-catch-up-budget", [job(schedule="0 * * * *", attemptDeadline="60s"), service(env=told)]) == []
    assert run("dedup-catch-up-budget", [every_minute, service(env={"DEDUP_JOB": "jobs:run"})]) == []  # no window


def test_a_handler_that_budgets_on_another_deadline_than_its_jobs_is_named() -> None:
    untold = {"DEDUP_JOB": "jobs:run", "DEDUP_CATCH_UP_WINDOW_SECONDS": "3600"}
    [finding] = run("dedup-catch-up-budget", [job(schedule="0 * * * *", attemptDeadline="60s"), service(env=untold)])
    assert "DEDUP_ATTEMPT_DEADLINE_SECONDS=180 (the handler's default)" in finding.message
    assert "set it to 60" in finding.message
