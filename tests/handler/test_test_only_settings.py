"""Settings meant for tests stop a deployed handler at start-up, unless DEDUP_ALLOW_TEST_ENDPOINTS opts in; over real
HTTP, a server started without the opt-in does not serve."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler.service.startup import startup_problems

BASE = {"GOOGLE_CLOUD_PROJECT": "p1", "DEDUP_JOB": "jobs:run"}
TRUST = {"DEDUP_OIDC_AUDIENCE": "https://a.example", "DEDUP_ALLOWED_CALLERS": "s@p1.iam.gserviceaccount.com",
         "DEDUP_TRUST_CLOUD_RUN_IAM": "true", "DEDUP_SERVICE": "projects/p1/locations/r/services/s"}


@pytest.mark.parametrize(("change", "named"), [
    ({"DEDUP_OIDC_CERTS_URL": "http://127.0.0.1:9/certs", **TRUST}, "DEDUP_OIDC_CERTS_URL points at http://127.0.0.1"),
    ({"DEDUP_OIDC_CERTS_URL": "https://certs.example.com/certs", **TRUST}, "signs tokens the handler accepts"),
    ({"DEDUP_RUN_API": "https://run.example.com", **TRUST}, "DEDUP_RUN_API points at https://run.example.com"),
    ({"DEDUP_WORKFLOWS_API": "http://workflowexecutions.googleapis.com"}, "DEDUP_WORKFLOWS_API points at http://"),
    ({"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "http://hooks.example.com/run", "DEDUP_TARGET_AUTH": "none",
      "DEDUP_JOB": ""}, "DEDUP_TARGET_AUTH=none sends the run to hooks.example.com"),
    # a Google front end is not Google's API: anyone's public object answers on these
    ({"DEDUP_OIDC_CERTS_URL": "https://storage.googleapis.com/bucket/certs.json", **TRUST},
     "DEDUP_OIDC_CERTS_URL points at https://storage.googleapis.com/bucket/certs.json, not "
     "https://www.googleapis.com/oauth2/v1/certs"),
    ({"DEDUP_OIDC_CERTS_URL": "https://www.googleapis.com/storage/v1/b/bucket/o/certs?alt=media", **TRUST},
     "DEDUP_OIDC_CERTS_URL points at https://www.googleapis.com/storage/v1/b/bucket/o/certs"),
    ({"DEDUP_RUN_API": "https://storage.googleapis.com/bucket", **TRUST},
     "DEDUP_RUN_API points at https://storage.googleapis.com/bucket, not https://run.googleapis.com"),
    ({"DEDUP_SCHEDULER_API": "https://storage.googleapis.com", "DEDUP_SCHEDULER_JOB": "projects/p1/locations/r/jobs/j"},
     "DEDUP_SCHEDULER_API points at https://storage.googleapis.com"),
    ({"DEDUP_CLOUD_BUILD_API": "https://cloudbuild.googleapis.com.evil.example"},
     "DEDUP_CLOUD_BUILD_API points at https://cloudbuild.googleapis.com.evil.example"),
    ({"DEDUP_WORKFLOWS_API": "https://user@workflowexecutions.googleapis.com:8443"}, "DEDUP_WORKFLOWS_API points at https://workflowexecutions.googleapis.com:8443"),
], ids=["certs-http", "certs-not-google", "run-api-not-google", "workflows-api-http", "auth-none-remote",
        "certs-on-storage", "certs-on-www-storage", "run-api-on-storage", "scheduler-api-on-storage",
        "build-api-suffix", "workflows-api-user-port"])
def test_a_test_only_setting_is_refused_unless_tests_opt_in(change: dict[str, str], named: str) -> None:
    env = {**BASE, **change}
    problems = startup_problems(env)
    assert any(named in p for p in problems), problems
    assert all("DEDUP_ALLOW_TEST_ENDPOINTS=1" in p for p in problems if named in p)
    assert not any(named in p for p in startup_problems({**env, "DEDUP_ALLOW_TEST_ENDPOINTS": "1"}))


@pytest.mark.parametrize("change", [
    {"DEDUP_RUN_API": "https://run.googleapis.com/", **TRUST},
    {"DEDUP_OIDC_CERTS_URL": "https://www.googleapis.com/oauth2/v1/certs", **TRUST},
    {"DEDUP_SCHEDULER_API": "https://cloudscheduler.googleapis.com", "DEDUP_SCHEDULER_JOB": "projects/p1/locations/r/jobs/j"},
    {"DEDUP_WORKFLOWS_API": "https://WorkflowExecutions.googleapis.com:443"},
    {"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "http://127.0.0.1:8080/run", "DEDUP_TARGET_AUTH": "none",
     "DEDUP_JOB": ""},
])
def test_google_hosts_and_loopback_need_no_opt_in(change: dict[str, str]) -> None:
    assert startup_problems({**BASE, **change}) == []


def test_a_server_without_the_opt_in_does_not_start(harness) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError, match="DEDUP_OIDC_CERTS_URL points at http://127.0.0.1"):
        harness.server(DEDUP_ALLOW_TEST_ENDPOINTS="", DEDUP_OIDC_CERTS_URL="http://127.0.0.1:9/certs", **TRUST)


def test_a_server_with_certs_on_a_storage_bucket_does_not_start(harness) -> None:  # type: ignore[no-untyped-def]
    """``storage.googleapis.com`` is a Google host, but whoever owns the bucket writes the "certificates"."""
    with pytest.raises(RuntimeError, match="DEDUP_OIDC_CERTS_URL points at https://storage.googleapis.com/b/certs.json"):
        harness.server(DEDUP_ALLOW_TEST_ENDPOINTS="", DEDUP_OIDC_CERTS_URL="https://storage.googleapis.com/b/certs.json",
                       **TRUST)
