"""The handler's trust boundary over real HTTP: which header carries the identity, what trust mode proves first,
which job a handler serves, what never leaves in an answer, and how much input it reads.

Tokens are signed by a local key and served from a local certificate endpoint; the Cloud Run Admin API is the
local fake (:mod:`tests.handler.fake_google`).
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
import requests

from scheduler_dedup.handler.core.paths import CHECK_PATH
from scheduler_dedup.handler.schedule.run_key import RunKey, run_key_from_headers

from .conftest import Harness, deliver, scheduler_headers
from .fake_google import FakeGoogle, LocalSigner

T = "2026-10-16T12:00:00Z"
AUDIENCE = "https://dedup-handler-abc123-uc.a.run.app"
SCHEDULER = "scheduler@p1.iam.gserviceaccount.com"
INTRUDER = "someone-with-invoker@p1.iam.gserviceaccount.com"
SERVICE = "projects/p1/locations/us-central1/services/dedup-handler"
JOB_A = "projects/demo-project/locations/us-central1/jobs/job-a"


@pytest.fixture()
def fake(google: FakeGoogle) -> FakeGoogle:
    return google


def trust_env(fake: FakeGoogle, **extra: str) -> dict[str, str]:
    return {"DEDUP_OIDC_AUDIENCE": AUDIENCE, "DEDUP_ALLOWED_CALLERS": SCHEDULER,
            "DEDUP_OIDC_CERTS_URL": f"{fake.url}/certs", "DEDUP_TRUST_CLOUD_RUN_IAM": "true",
            "DEDUP_SERVICE": SERVICE, "DEDUP_RUN_API": fake.url, "DEDUP_TARGET_AUTH": "none", **extra}


def stripped(token: str) -> str:
    """The token as Cloud Run forwards it after verifying it: signature replaced."""
    header, payload, _ = token.split(".")
    return f"{header}.{payload}.SIGNATURE_REMOVED_BY_GOOGLE"


def b64(data: Any) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def forged(header: Any, **claims: Any) -> str:
    """A hand-made token in the form Cloud Run forwards, claiming whatever the caller likes."""
    now = int(time.time())
    base = {"iss": "https://accounts.google.com", "aud": AUDIENCE, "email": SCHEDULER, "email_verified": True,
            "iat": now, "exp": now + 600}
    base.update(claims)
    return f"{b64(header)}.{b64({k: v for k, v in base.items() if v is not None})}.SIGNATURE_REMOVED_BY_GOOGLE"


# -- identity: the header Cloud Run verified -------------------------------------------------------


def test_identity_comes_from_x_serverless_authorization_not_from_authorization(
        harness: Harness, fake: FakeGoogle, signer: LocalSigner) -> None:
    """A principal with run.invoker sends its own valid token where Cloud Run checks it, and a forged token
    claiming the Scheduler account in Authorization: it was answered 200 processed."""
    fake.private_service(SERVICE)
    server = harness.server(**trust_env(fake))
    own = stripped(signer.token(audience=AUDIENCE, email=INTRUDER))
    claiming_scheduler = forged({"alg": "RS256", "kid": signer.kid, "typ": "JWT"})
    response = deliver(server.url, scheduler_headers("guarded", T, **{
        "X-Serverless-Authorization": f"Bearer {own}", "Authorization": f"Bearer {claiming_scheduler}"}))
    assert response.status_code == 403, response.text
    assert INTRUDER in response.json()["error"]
    assert harness.records() == {} and harness.starts() == []
    # The Scheduler's own token in X-Serverless-Authorization passes, whatever Authorization holds.
    ok = deliver(server.url, scheduler_headers("guarded", T, **{
        "X-Serverless-Authorization": f"Bearer {stripped(signer.token(audience=AUDIENCE, email=SCHEDULER))}",
        "Authorization": "Bearer garbage"}))
    assert ok.status_code == 200 and ok.json()["status"] == "processed", ok.text


@pytest.mark.parametrize("name, token", [
    ("header xxx", f"xxx.{b64({'aud': AUDIENCE, 'email': SCHEDULER})}.SIGNATURE_REMOVED_BY_GOOGLE"),
    ("alg none", forged({"alg": "none", "typ": "JWT"})),
    ("no kid", forged({"alg": "RS256", "typ": "JWT"})),
    ("exp in year 9999", forged({"alg": "RS256", "kid": "k"}, exp=253402300799)),
    ("no iat", forged({"alg": "RS256", "kid": "k"}, iat=None)),
    ("no exp", forged({"alg": "RS256", "kid": "k"}, exp=None)),
    ("iat in the future", forged({"alg": "RS256", "kid": "k"}, iat=int(time.time()) + 900,
                                 exp=int(time.time()) + 1200)),
    ("expired", forged({"alg": "RS256", "kid": "k"}, iat=int(time.time()) - 4000, exp=int(time.time()) - 400)),
])
def test_trust_mode_refuses_tokens_google_never_mints(harness: Harness, fake: FakeGoogle, name: str,
                                                      token: str) -> None:
    fake.private_service(SERVICE)
    server = harness.server(**trust_env(fake))
    response = deliver(server.url, scheduler_headers("guarded", T, Authorization=f"Bearer {token}"))
    assert response.status_code == 401, (name, response.text)
    assert harness.records() == {} and harness.starts() == []


# -- trust mode proves its premise ---------------------------------------------------------------------


@pytest.mark.parametrize("state, cause", [
    ("public", "allUsers"),
    ("all authenticated", "allAuthenticatedUsers"),
    ("invoker check off", "invokerIamDisabled"),
    ("policy unreadable", "HTTP 403"),
    ("service unknown", "HTTP 404"),
])
def test_trust_mode_on_a_service_it_cannot_prove_private_refuses_every_delivery(
        harness: Harness, fake: FakeGoogle, signer: LocalSigner, state: str, cause: str) -> None:
    """The README promised a forged request 'is refused even if the service is left public': under the component's
    trust setting an unsigned token was accepted there."""
    fake.private_service(SERVICE)
    if state == "public":
        fake.services[SERVICE]["bindings"].append({"role": "roles/run.invoker", "members": ["allUsers"]})
    elif state == "all authenticated":
        fake.services[SERVICE]["bindings"].append({"role": "roles/run.invoker",
                                                   "members": ["allAuthenticatedUsers"]})
    elif state == "invoker check off":
        fake.services[SERVICE]["invokerIamDisabled"] = True
    elif state == "policy unreadable":
        fake.policy_status = 403
    else:
        del fake.services[SERVICE]
    server = harness.server(**trust_env(fake))
    unsigned = forged({"alg": "RS256", "kid": signer.kid, "typ": "JWT"})
    for token in (unsigned, signer.token(audience=AUDIENCE, email=SCHEDULER)):
        response = deliver(server.url, scheduler_headers("guarded", T, Authorization=f"Bearer {token}"))
        assert response.status_code == 401, (state, response.text)
        assert cause in response.json()["error"] and "DEDUP_TRUST_CLOUD_RUN_IAM" in response.json()["error"]
    assert harness.records() == {} and harness.starts() == []
    errors = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    assert any(e.get("severity") == "ERROR" and e.get("outcome") == "trust_premise_failed" and cause in e["message"]
               for e in errors), server.log()[-2000:]


def test_the_premise_is_read_again_after_the_recheck_interval(fake: FakeGoogle) -> None:
    """A service made public after start-up is refused from the next check on; fixed, it is served again."""
    from scheduler_dedup.handler.callers.trust_premise import RECHECK_SECONDS, ServicePremise

    fake.private_service(SERVICE)
    now = [0.0]
    premise = ServicePremise(SERVICE, requests.Session(), fake.url, clock=lambda: now[0])
    assert premise.refusal_reason() is None
    fake.services[SERVICE]["bindings"].append({"role": "roles/run.invoker", "members": ["allUsers"]})
    now[0] = RECHECK_SECONDS - 1
    assert premise.refusal_reason() is None, "no re-check before the interval"
    now[0] = RECHECK_SECONDS + 1
    premise.refusal_reason()  # starts the background re-check
    deadline = time.monotonic() + 10
    while premise.refusal_reason() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "allUsers" in (premise.refusal_reason() or "")
    fake.services[SERVICE]["bindings"].pop()
    assert premise.check() is None and premise.refusal_reason() is None


def test_a_policy_unreadable_at_start_up_is_read_again_within_seconds_not_minutes(
        harness: Harness, fake: FakeGoogle, signer: LocalSigner) -> None:
    """The runtime account's roles/run.viewer grant had not reached IAM yet when the instance started (or the API
    hiccuped): that one failed read refused every delivery for RECHECK_SECONDS (5 minutes), longer than a short
    retry config retries, so the run was lost."""
    from scheduler_dedup.handler.callers.trust_premise import RECHECK_SECONDS

    fake.private_service(SERVICE)
    fake.policy_status = 403
    server = harness.server(**trust_env(fake))
    fake.policy_status = None  # the grant arrives
    token = stripped(signer.token(audience=AUDIENCE, email=SCHEDULER))
    started = time.monotonic()
    response = deliver(server.url, scheduler_headers("guarded", T, Authorization=f"Bearer {token}"))
    while response.status_code == 401 and time.monotonic() - started < 60:
        time.sleep(1)
        response = deliver(server.url, scheduler_headers("guarded", T, Authorization=f"Bearer {token}"))
    assert response.status_code == 200 and response.json()["status"] == "processed", response.text
    assert time.monotonic() - started < RECHECK_SECONDS / 5


def test_trust_mode_without_its_own_service_name_does_not_start(harness: Harness, fake: FakeGoogle) -> None:
    env = trust_env(fake)
    del env["DEDUP_SERVICE"]
    with pytest.raises(RuntimeError, match="DEDUP_TRUST_CLOUD_RUN_IAM=true needs DEDUP_SERVICE"):
        harness.server(**env)


# -- one job per handler ---------------------------------------------------------------------------


def test_a_handler_serves_only_its_own_job(harness: Harness) -> None:
    """Job A's handler, called with job A's valid credentials but job B's headers, answered B's stored result
    (duplicate) and ran A's job under B's run id, so that B's own delivery got duplicate and B never ran."""
    b_headers = scheduler_headers("job-b", T, **{"X-Dedup-Project": "demo-project", "X-Dedup-Location": "europe-west1"})
    b_server = harness.server()
    first_b = deliver(b_server.url, b_headers)
    assert first_b.json()["status"] == "processed"
    a_server = harness.server(DEDUP_SCHEDULER_JOB=JOB_A)
    for headers in (b_headers, scheduler_headers("job-b", "2026-10-16T13:00:00Z"),
                    scheduler_headers("projects/demo-project/locations/us-central1/jobs/job-b", T),
                    scheduler_headers("job-a", T, **{"X-Dedup-Location": "europe-west1"}),
                    scheduler_headers("job-a", T, **{"X-Dedup-Project": "other-project"})):
        response = deliver(a_server.url, headers)
        assert response.status_code == 403, (headers, response.text)
        body = response.json()
        assert body["status"] == "forbidden" and body["job"] == JOB_A and JOB_A in body["error"]
        assert "result" not in body and "run_id" not in body
    assert len(harness.records()) == 1 and len(harness.starts()) == 1
    own = deliver(a_server.url, scheduler_headers("job-a", T))
    assert own.status_code == 200 and own.json()["status"] == "processed", own.text


def test_run_ids_of_two_jobs_never_collide_whatever_the_headers_say() -> None:
    """With DEDUP_SCHEDULER_JOB the run is keyed on the handler's own job; headers can only be refused."""
    from datetime import datetime, timezone

    from scheduler_dedup.handler.core.errors import OtherJobError

    now = datetime(2026, 10, 16, 12, 0, tzinfo=timezone.utc)
    a = run_key_from_headers(scheduler_headers("job-a", T), default_project="x", server_now=now,
                             manual_tolerance_seconds=5, own_job=JOB_A)
    assert (a.project, a.location, a.job_name) == ("demo-project", "us-central1", "job-a")
    b_job = "projects/demo-project/locations/us-central1/jobs/job-b"
    b = run_key_from_headers(scheduler_headers("job-b", T), default_project="x", server_now=now,
                             manual_tolerance_seconds=5, own_job=b_job)
    assert a.run_id != b.run_id
    with pytest.raises(OtherJobError, match="job-a"):
        run_key_from_headers(scheduler_headers("job-a", T), default_project="x", server_now=now,
                             manual_tolerance_seconds=5, own_job=b_job)


def test_the_run_check_checks_only_its_own_job(harness: Harness) -> None:
    """POST /dedup/run-check on A's service with job_name job-c returned C's failure texts."""
    harness.plan("job-c", fail="permanent")
    c_server = harness.server(DEDUP_SCHEDULE="* * * * *")
    deliver(c_server.url, scheduler_headers("job-c", T))
    a_server = harness.server(DEDUP_SCHEDULER_JOB=JOB_A, DEDUP_SCHEDULE="* * * * *")
    body = {"job_name": "job-c", "grace_seconds": 0, "window_seconds": 3600}
    response = requests.post(a_server.url.rstrip("/") + CHECK_PATH, json=body,
                             headers={"X-CloudScheduler-ScheduleTime": "2026-10-16T12:30:00Z"}, timeout=30)
    assert response.status_code == 403, response.text
    assert "planned permanent failure" not in response.text and JOB_A in response.json()["error"]
    own = requests.post(a_server.url.rstrip("/") + CHECK_PATH, json={**body, "job_name": "job-a"},
                        headers={"X-CloudScheduler-ScheduleTime": "2026-10-16T12:30:00Z"}, timeout=30)
    assert own.status_code == 200, own.text


def test_the_run_check_reads_only_its_own_jobs_runs_on_a_shared_store(harness: Harness) -> None:
    """Two jobs with one short id in two regions share a store: the us-central1 handler's run check counted the
    europe-west1 job's failed run as its own 12:00 run (recorded 1, missed none, the other job's failure text),
    though its own job never ran."""
    harness.plan("nightly", fail="permanent")
    eu = harness.server(DEDUP_SCHEDULER_JOB="projects/demo-project/locations/europe-west1/jobs/nightly",
                        DEDUP_SCHEDULE="0 12 * * *")
    ran = deliver(eu.url, scheduler_headers("nightly", T, **{"X-Dedup-Project": "demo-project",
                                                            "X-Dedup-Location": "europe-west1"}))
    assert ran.json()["status"] == "failed", ran.text
    us = harness.server(DEDUP_SCHEDULER_JOB="projects/demo-project/locations/us-central1/jobs/nightly",
                        DEDUP_SCHEDULE="0 12 * * *", DEDUP_SCHEDULE_SINCE="2026-10-16T00:00:00Z")
    body = {"job_name": "nightly", "grace_seconds": 0, "window_seconds": 3600}
    response = requests.post(us.url.rstrip("/") + CHECK_PATH, json=body, timeout=30,
                             headers={"X-CloudScheduler-ScheduleTime": "2026-10-16T12:30:00Z"})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["recorded"] == 0 and report["missed"] == ["2026-10-16T12:00:00Z"], report
    assert "planned permanent failure" not in response.text
    own_eu = requests.post(eu.url.rstrip("/") + CHECK_PATH, json=body, timeout=30,
                           headers={"X-CloudScheduler-ScheduleTime": "2026-10-16T12:30:00Z"})
    assert own_eu.json()["recorded"] == 1 and own_eu.json()["missed"] == [], own_eu.text


def test_short_id_and_full_name_key_one_run_when_the_location_is_known(harness: Harness) -> None:
    """Without X-Dedup-Location, n-two and projects/P/locations/L/jobs/n-two keyed two runs."""
    server = harness.server(DEDUP_SCHEDULER_JOB="projects/demo-project/locations/us-central1/jobs/n-two")
    first = deliver(server.url, scheduler_headers("n-two", T))
    second = deliver(server.url, scheduler_headers("projects/demo-project/locations/us-central1/jobs/n-two", T))
    assert first.json()["status"] == "processed", first.text
    assert second.json()["status"] == "duplicate" and second.json()["run_id"] == first.json()["run_id"], second.text
    assert len(harness.starts()) == 1


def test_a_schedule_time_with_a_comma_is_called_not_rfc3339_not_sent_twice(harness: Harness) -> None:
    server = harness.server()
    response = deliver(server.url, scheduler_headers("j", "Tue, 01 Dec 2026 10:00:00 GMT"))
    assert response.status_code == 400
    error = response.json()["error"]
    assert "not an RFC 3339 date-time" in error and "Tue, 01 Dec 2026" in error and "times" not in error, error
    both = deliver(server.url, scheduler_headers("a-job,b-job", T))
    assert "sent 2 times with different values" in both.json()["error"]


# -- nothing secret leaves -------------------------------------------------------------------------


def test_a_refusal_never_quotes_the_token(harness: Harness, fake: FakeGoogle, signer: LocalSigner) -> None:
    server = harness.server(DEDUP_OIDC_AUDIENCE=AUDIENCE, DEDUP_ALLOWED_CALLERS=SCHEDULER,
                            DEDUP_OIDC_CERTS_URL=f"{fake.url}/certs")
    wrong_audience = signer.token(audience="https://evil.example", email=SCHEDULER)
    other_key = LocalSigner(kid=signer.kid).token(audience=AUDIENCE, email=SCHEDULER)
    tokens = [wrong_audience, other_key, wrong_audience + ".x", "eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2ln",
              signer.token(audience=AUDIENCE, email=INTRUDER)]
    for token in tokens:
        response = deliver(server.url, scheduler_headers("guarded", T, Authorization=f"Bearer {token}"))
        assert response.status_code in (401, 403), response.text
        for part in token.split("."):
            if len(part) > 8:
                assert part not in response.text, (token, response.text)
                assert part not in server.log(), token


def test_a_downstream_echoing_the_id_token_does_not_put_it_in_answers_records_or_logs(
        harness: Harness, fake: FakeGoogle) -> None:
    """Up to 500 characters of a downstream's error body went into error: answered, logged and stored."""
    token = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.eyJlbWFpbCI6InNjaGVkdWxlciJ9.c2lnbmF0dXJlLXNlY3JldA"
    fake.echo = {"error": {"code": 400, "message": f"bad request; you sent Authorization: Bearer {token}"},
                 "received_headers": {"Authorization": f"Bearer {token}"}}
    server = harness.server(DEDUP_TARGET_TYPE="http", DEDUP_TARGET=f"{fake.url}/echo", DEDUP_TARGET_AUTH="none")
    response = deliver(server.url, scheduler_headers("echoing", T))
    assert response.status_code == 200 and response.json()["status"] == "failed", response.text
    stored = json.dumps(harness.records(), default=str)
    for where, text in (("answer", response.text), ("record", stored), ("log", server.log())):
        assert "c2lnbmF0dXJlLXNlY3JldA" not in text and token not in text, where
    error = response.json()["error"]
    assert "HTTP 400" in error and "application/json" in error, error


def test_credentials_in_the_target_url_never_leave_in_answers_records_or_logs(harness: Harness, fake: FakeGoogle) -> None:
    """DEDUP_TARGET=https://user:password@host/path?key=API_KEY (basic auth in the URL, an API key or a signature
    in the query): the URL was copied whole into the error of a failed or released run and into the result of a
    processed one, answered, logged and stored."""
    secrets = ("s3cr3t-pw", "AIzaSyA-0123456789abcdefghijklmnopqrstu", "c2lnLXNlY3JldA")
    host = fake.url.removeprefix("http://")
    query = f"key={secrets[1]}&sig={secrets[2]}"
    fake.echo = {"error": {"code": 400, "message": "bad request"}}
    cases = [("echo", f"http://alice:{secrets[0]}@{host}/echo?{query}", 200, "failed"),
             ("hook", f"http://alice:{secrets[0]}@{host}/hook?{query}", 200, "processed"),
             ("down", f"http://alice:{secrets[0]}@127.0.0.1:1/hook?{query}", 500, "released")]
    for job, url, status, outcome in cases:
        server = harness.server(DEDUP_TARGET_TYPE="http", DEDUP_TARGET=url, DEDUP_TARGET_AUTH="none")
        response = deliver(server.url, scheduler_headers(job, T))
        assert response.status_code == status and response.json()["status"] == outcome, response.text
        stored = json.dumps(harness.records(), default=str)
        for where, text in (("answer", response.text), ("record", stored), ("log", server.log())):
            for secret in secrets:
                assert secret not in text, (job, where, secret, text[-1500:])
        assert host.split(":")[0] in response.text  # the URL is still named, without its credentials


@pytest.mark.parametrize("text, kept", [
    ("POST https://alice:pw-123@hooks.example.com/x failed", "https://[redacted]@hooks.example.com/x"),
    ("GET https://h.example/p?key=AIzaSyA-0123456789abcdefghijklmnopqrstu&page=2", "&page=2"),
    ("url /o?X-Goog-Signature=abcdef0123&X-Goog-Date=20261016", "X-Goog-Date=20261016"),
    ("an api key AIzaSyA-0123456789abcdefghijklmnopqrstu in prose", "in prose"),
])
def test_scrub_secrets_removes_url_credentials_and_api_keys(text: str, kept: str) -> None:
    from scheduler_dedup.handler.core.safe_text import scrub_secrets

    scrubbed = scrub_secrets(text)
    assert kept in scrubbed, scrubbed
    for secret in ("pw-123", "AIzaSyA-0123456789abcdefghijklmnopqrstu", "abcdef0123"):
        assert secret not in scrubbed, scrubbed
    assert scrub_secrets(scrubbed) == scrubbed


def test_a_refused_setting_is_quoted_without_its_credentials() -> None:
    """A start-up error quoted DEDUP_TARGET whole, password included, into the instance's logs."""
    from scheduler_dedup.handler.core.errors import ConfigError
    from scheduler_dedup.handler.targets.settings import TargetSettings

    with pytest.raises(ConfigError, match="plain http") as refused:
        TargetSettings(type="http", target="http://alice:s3cr3t-pw@hooks.example.com/x")
    assert "s3cr3t-pw" not in str(refused.value) and "http://hooks.example.com/[sha256:" in str(refused.value)


# -- bounded input ---------------------------------------------------------------------------------


def test_a_huge_run_check_body_is_refused_with_413_before_it_is_read(harness: Harness) -> None:
    """A 50 MB job_name took 18.7 s and 250 MB of memory and ended in store_error."""
    server = harness.server(DEDUP_SCHEDULE="* * * * *")
    body = json.dumps({"job_name": "j" * 50_000_000, "grace_seconds": 0, "window_seconds": 60}).encode()
    started = time.monotonic()
    try:
        response = requests.post(server.url.rstrip("/") + CHECK_PATH, data=body, timeout=60,
                                 headers={"Content-Type": "application/json"})
    except requests.ConnectionError:
        pytest.fail("the handler closed the connection instead of answering 413")
    assert response.status_code == 413 and response.json()["status"] == "request_too_large", response.text[:300]
    assert time.monotonic() - started < 30
    chunked = requests.post(server.url.rstrip("/") + CHECK_PATH, data=iter([b"{" + b" " * 70_000, b"}"]), timeout=60)
    assert chunked.status_code == 413, chunked.text[:300]
    long_name = requests.post(server.url.rstrip("/") + CHECK_PATH, timeout=30,
                              json={"job_name": "j" * 600, "grace_seconds": 0, "window_seconds": 60})
    assert long_name.status_code == 400 and long_name.json()["field"] == "job_name"
    assert len(long_name.text) < 1000


def test_an_oversized_header_value_is_answered_431_in_json(harness: Harness) -> None:
    server = harness.server()
    response = deliver(server.url, scheduler_headers("j" * 5000, T))
    assert response.status_code == 431, response.text[:300]
    body = response.json()
    assert body["status"] == "request_header_too_large" and body["header"].lower() == "x-cloudscheduler-jobname"
    assert "jjjjjjjj" not in response.text
    assert harness.records() == {}


def test_run_key_unit_unchanged_for_component_deliveries() -> None:
    """The component's deliveries (X-Dedup-* headers, short id) keep their run ids with DEDUP_SCHEDULER_JOB set."""
    from datetime import datetime, timezone

    now = datetime(2026, 10, 16, 12, 0, tzinfo=timezone.utc)
    headers = scheduler_headers("job-a", T, **{"X-Dedup-Project": "demo-project", "X-Dedup-Location": "us-central1"})
    without = run_key_from_headers(headers, default_project="demo-project", server_now=now, manual_tolerance_seconds=5)
    with_own = run_key_from_headers(headers, default_project="demo-project", server_now=now,
                                    manual_tolerance_seconds=5, own_job=JOB_A)
    assert isinstance(without, RunKey) and without.run_id == with_own.run_id
