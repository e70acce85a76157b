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
], ids=["certs-http", "certs-not-google", "run-api-not-google", "workflows-api-http", "auth-none-remote"])
def test_a_test_only_setting_is_refused_unless_tests_opt_in(change: dict[str, str], named: str) -> None:
    env = {**BASE, **change}
    problems = startup_problems(env)
    assert any(named in p for p in problems), problems
    assert all("DEDUP_ALLOW_TEST_ENDPOINTS=1" in p for p in problems if named in p)
    assert not any(named in p for p in startup_problems({**env, "DEDUP_ALLOW_TEST_ENDPOINTS": "1"}))


@pytest.mark.parametrize("change", [
    {"DEDUP_RUN_API": "https://europe-west1-run.googleapis.com", **TRUST},
    {"DEDUP_OIDC_CERTS_URL": "https://www.googleapis.com/oauth2/v1/certs", **TRUST},
    {"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "http://127.0.0.1:8080/run", "DEDUP_TARGET_AUTH": "none",
     "DEDUP_JOB": ""},
])
def test_google_hosts_and_loopback_need_no_opt_in(change: dict[str, str]) -> None:
    assert startup_problems({**BASE, **change}) == []


def test_a_server_without_the_opt_in_does_not_start(harness) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError, match="DEDUP_OIDC_CERTS_URL points at http://127.0.0.1"):
        harness.server(DEDUP_ALLOW_TEST_ENDPOINTS="", DEDUP_OIDC_CERTS_URL="http://127.0.0.1:9/certs", **TRUST)
