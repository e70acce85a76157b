"""Caller verification over real HTTP: tokens signed with a local key, certificates from a local server."""

from __future__ import annotations

import base64
import json

import pytest

from scheduler_dedup.handler import CallerAuthSettings, ConfigError

from .conftest import Harness, deliver, scheduler_headers
from .fake_google import FakeGoogle, LocalSigner

T = "2026-10-16T12:00:00Z"
AUDIENCE = "https://dedup-handler-abc123-uc.a.run.app"
CALLER = "scheduler@p1.iam.gserviceaccount.com"


@pytest.fixture()
def fake(google: FakeGoogle) -> FakeGoogle:
    return google


SERVICE = "projects/p1/locations/us-central1/services/dedup-handler"


def auth_env(fake: FakeGoogle) -> dict[str, str]:
    return {"DEDUP_OIDC_AUDIENCE": f"https://other.example, {AUDIENCE}",
            "DEDUP_ALLOWED_CALLERS": f"ops@p1.iam.gserviceaccount.com,{CALLER}",
            "DEDUP_OIDC_CERTS_URL": f"{fake.url}/certs"}


def trust_env(fake: FakeGoogle) -> dict[str, str]:
    """Trust mode on a service the fake Cloud Run Admin API reports private."""
    fake.private_service(SERVICE)
    return {**auth_env(fake), "DEDUP_TRUST_CLOUD_RUN_IAM": "true", "DEDUP_SERVICE": SERVICE,
            "DEDUP_RUN_API": fake.url, "DEDUP_TARGET_AUTH": "none"}


def bearer(token: str) -> dict[str, str]:
    return scheduler_headers("guarded", T, Authorization=f"Bearer {token}")


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def test_forged_and_invalid_callers_are_refused_before_firestore(harness: Harness, fake: FakeGoogle,
                                                                 signer: LocalSigner) -> None:
    server = harness.server(**auth_env(fake))
    other_key = LocalSigner(kid=signer.kid)  # same kid, a key Google never published
    good_claims = {"audience": AUDIENCE, "email": CALLER}
    unsigned = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64({'aud': AUDIENCE, 'email': CALLER})}."
    cases = {
        "missing": (scheduler_headers("guarded", T), 401),
        "not bearer": (scheduler_headers("guarded", T, Authorization="Basic dXNlcjpwdw=="), 401),
        "garbage": (bearer("not-a-jwt"), 401),
        "unsigned": (bearer(unsigned), 401),
        "signed by another key": (bearer(other_key.token(**good_claims)), 401),
        "wrong audience": (bearer(signer.token(audience="https://evil.example", email=CALLER)), 401),
        "expired": (bearer(signer.token(**good_claims, issued_ago_seconds=7200)), 401),
        "not google's issuer": (bearer(signer.token(**good_claims, issuer="https://evil.example")), 401),
        "wrong email": (bearer(signer.token(audience=AUDIENCE, email="intruder@p1.iam.gserviceaccount.com")), 403),
        "unverified email": (bearer(signer.token(**good_claims, email_verified=False)), 403),
    }
    for name, (headers, status) in cases.items():
        response = deliver(server.url, headers)
        assert response.status_code == status, (name, response.text)
        body = response.json()
        assert body["status"] == ("unauthorized" if status == 401 else "forbidden"), name
        assert body["error"], name
        assert "run_id" not in body, name
    assert harness.records() == {}
    assert harness.starts() == []


def test_a_good_token_passes_and_certificates_are_fetched_once(harness: Harness, fake: FakeGoogle,
                                                               signer: LocalSigner) -> None:
    server = harness.server(**auth_env(fake))
    token = signer.token(audience=AUDIENCE, email=CALLER)
    first = deliver(server.url, bearer(token))
    assert first.status_code == 200 and first.json()["status"] == "processed", first.text
    second = deliver(server.url, scheduler_headers("guarded", "2026-10-16T13:00:00Z",
                                                   Authorization=f"Bearer {token}"))
    assert second.json()["status"] == "processed"
    assert len(harness.records()) == 2 and len(harness.starts()) == 2
    assert len(fake.gets("/certs")) == 1


def test_unreachable_certificates_answer_500_so_scheduler_retries(harness: Harness, fake: FakeGoogle,
                                                                  signer: LocalSigner) -> None:
    server = harness.server(**{**auth_env(fake), "DEDUP_OIDC_CERTS_URL": f"{fake.url}/no-such-certs"})
    response = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email=CALLER)))
    assert response.status_code == 500 and response.json()["status"] == "auth_unavailable", response.text
    assert harness.records() == {}


def test_without_the_settings_no_token_is_needed(harness: Harness) -> None:
    server = harness.server()
    assert deliver(server.url, scheduler_headers("open", T)).json()["status"] == "processed"


@pytest.mark.parametrize("env, message", [
    ({"DEDUP_OIDC_AUDIENCE": AUDIENCE}, "DEDUP_ALLOWED_CALLERS is not"),
    ({"DEDUP_ALLOWED_CALLERS": CALLER}, "DEDUP_OIDC_AUDIENCE is not"),
    ({"DEDUP_OIDC_AUDIENCE": " , ", "DEDUP_ALLOWED_CALLERS": CALLER}, "DEDUP_OIDC_AUDIENCE is not"),
    ({"DEDUP_OIDC_AUDIENCE": AUDIENCE, "DEDUP_ALLOWED_CALLERS": "scheduler"}, "DEDUP_ALLOWED_CALLERS has"),
    ({"DEDUP_OIDC_AUDIENCE": AUDIENCE, "DEDUP_ALLOWED_CALLERS": CALLER, "DEDUP_OIDC_CERTS_URL": "certs"},
     "DEDUP_OIDC_CERTS_URL="),
])
def test_half_configured_verification_is_a_config_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CallerAuthSettings.from_env(env)


def test_half_configured_verification_stops_the_handler(harness: Harness) -> None:
    with pytest.raises(RuntimeError, match="DEDUP_ALLOWED_CALLERS"):
        harness.server(DEDUP_OIDC_AUDIENCE=AUDIENCE)


def test_settings_parse_lists() -> None:
    settings = CallerAuthSettings.from_env({"DEDUP_OIDC_AUDIENCE": "a, b",
                                            "DEDUP_ALLOWED_CALLERS": " X@p.iam.gserviceaccount.com , "
                                                                     "serviceAccount:Y@p.iam.gserviceaccount.com"})
    assert settings is not None
    assert settings.audiences == ("a", "b")
    assert settings.allowed_callers == {"x@p.iam.gserviceaccount.com", "y@p.iam.gserviceaccount.com"}
    assert settings.certs_url == "https://www.googleapis.com/oauth2/v1/certs"
    assert CallerAuthSettings.from_env({}) is None


def as_forwarded_by_cloud_run(token: str) -> str:
    """The token as Cloud Run hands it to the container after verifying it: signature replaced."""
    header, payload, _signature = token.split(".")
    return f"{header}.{payload}.SIGNATURE_REMOVED_BY_GOOGLE"


def test_tokens_cloud_run_verified_are_checked_without_their_signature(harness: Harness, fake: FakeGoogle,
                                                                       signer: LocalSigner) -> None:
    """On a private service Cloud Run strips the signature; with DEDUP_TRUST_CLOUD_RUN_IAM the claims still decide."""
    server = harness.server(**trust_env(fake))
    good = {"audience": AUDIENCE, "email": CALLER}
    refused = {
        "wrong audience": (signer.token(audience="https://evil.example", email=CALLER), 401),
        "expired": (signer.token(**good, issued_ago_seconds=7200), 401),
        "not google's issuer": (signer.token(**good, issuer="https://evil.example"), 401),
        "wrong email": (signer.token(audience=AUDIENCE, email="intruder@p1.iam.gserviceaccount.com"), 403),
        "unverified email": (signer.token(**good, email_verified=False), 403),
    }
    for name, (token, status) in refused.items():
        response = deliver(server.url, bearer(as_forwarded_by_cloud_run(token)))
        assert response.status_code == status, (name, response.text)
    garbage = deliver(server.url, bearer("bm90LWpzb24.bm90LWpzb24.SIGNATURE_REMOVED_BY_GOOGLE"))
    assert garbage.status_code == 401
    assert harness.records() == {} and harness.starts() == []
    ok = deliver(server.url, bearer(as_forwarded_by_cloud_run(signer.token(**good))))
    assert ok.status_code == 200 and ok.json()["status"] == "processed", ok.text
    assert fake.gets("/certs") == [], "no signature to check, so no certificates fetched"


def test_without_trust_a_stripped_token_is_refused_with_the_setting_to_change(harness: Harness, fake: FakeGoogle,
                                                                              signer: LocalSigner) -> None:
    server = harness.server(**auth_env(fake))
    response = deliver(server.url, bearer(as_forwarded_by_cloud_run(signer.token(audience=AUDIENCE, email=CALLER))))
    assert response.status_code == 401
    assert "DEDUP_TRUST_CLOUD_RUN_IAM=true" in response.json()["error"]
    assert harness.records() == {}


def test_trust_setting_must_be_true_or_false() -> None:
    base = {"DEDUP_OIDC_AUDIENCE": AUDIENCE, "DEDUP_ALLOWED_CALLERS": CALLER, "DEDUP_SERVICE": SERVICE}
    assert CallerAuthSettings.from_env(base).trust_cloud_run_iam is False  # type: ignore[union-attr]
    assert CallerAuthSettings.from_env({**base, "DEDUP_TRUST_CLOUD_RUN_IAM": "TRUE"}).trust_cloud_run_iam is True  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="DEDUP_TRUST_CLOUD_RUN_IAM='yes'"):
        CallerAuthSettings.from_env({**base, "DEDUP_TRUST_CLOUD_RUN_IAM": "yes"})


@pytest.mark.parametrize("entry", [
    "user:alice@example.com", "group:ops@example.com", "domain:example.com", "allUsers",
    "principal://iam.googleapis.com/x", "alice@example.com", "deleted:serviceAccount:x@p.iam.gserviceaccount.com",
])
def test_members_that_no_scheduler_token_can_carry_are_refused_at_start_up(entry: str) -> None:
    """Only a service account can be a Scheduler job's OIDC identity; anything else would hide a 403 per delivery."""
    with pytest.raises(ConfigError, match="DEDUP_ALLOWED_CALLERS has"):
        CallerAuthSettings.from_env({"DEDUP_OIDC_AUDIENCE": AUDIENCE, "DEDUP_ALLOWED_CALLERS": f"{CALLER},{entry}"})


def test_a_service_account_member_pasted_from_an_iam_binding_is_accepted(harness: Harness, fake: FakeGoogle,
                                                                         signer: LocalSigner) -> None:
    """DEDUP_ALLOWED_CALLERS=serviceAccount:EMAIL (an IAM member, any case) allows EMAIL: its deliveries run."""
    env = {**auth_env(fake), "DEDUP_ALLOWED_CALLERS": f"serviceAccount:{CALLER.upper()}"}
    server = harness.server(**env)
    ok = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email=CALLER)))
    assert ok.status_code == 200 and ok.json()["status"] == "processed", ok.text
    other = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email="intruder@p1.iam.gserviceaccount.com")))
    assert other.status_code == 403


def test_a_key_rotated_in_is_accepted_on_its_first_delivery(harness: Harness, fake: FakeGoogle,
                                                            signer: LocalSigner) -> None:
    """Certificates were cached for a fixed hour: a token signed with a newly published key got 401 on every
    delivery until the hour ended (with default retries, the run was lost)."""
    server = harness.server(**auth_env(fake))
    first = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email=CALLER)))
    assert first.status_code == 200, first.text
    rotated = LocalSigner(kid="local-key-2")
    fake.certs[rotated.kid] = rotated.cert_pem  # Google publishes the new key; the handler's cache predates it
    second = deliver(server.url, scheduler_headers("guarded", "2026-10-16T13:00:00Z",
                                                   Authorization=f"Bearer {rotated.token(audience=AUDIENCE, email=CALLER)}"))
    assert second.status_code == 200 and second.json()["status"] == "processed", second.text
    assert len(fake.gets("/certs")) == 2
    # Unknown kids refetch at most once per interval, whatever a caller sends.
    for n in range(5):
        forged = LocalSigner(kid=f"unknown-{n}").token(audience=AUDIENCE, email=CALLER)
        assert deliver(server.url, bearer(forged)).status_code == 401
    assert len(fake.gets("/certs")) == 2


def test_certificates_are_kept_as_long_as_cache_control_says(harness: Harness, fake: FakeGoogle,
                                                             signer: LocalSigner) -> None:
    import time

    fake.certs_max_age = 1
    server = harness.server(**auth_env(fake))
    token = signer.token(audience=AUDIENCE, email=CALLER)
    assert deliver(server.url, bearer(token)).status_code == 200
    assert deliver(server.url, scheduler_headers("guarded", "2026-10-16T13:00:00Z",
                                                 Authorization=f"Bearer {token}")).status_code == 200
    assert len(fake.gets("/certs")) == 1, "reused within max-age"
    time.sleep(1.5)
    assert deliver(server.url, scheduler_headers("guarded", "2026-10-16T14:00:00Z",
                                                 Authorization=f"Bearer {token}")).status_code == 200
    assert len(fake.gets("/certs")) == 2, "fetched again once max-age passed"
