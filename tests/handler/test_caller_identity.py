"""Callers compared as IAM compares them, over real HTTP with tokens signed by the local fake Google: the email
case-insensitively, and the account itself by its unique id (the token's ``sub``) where it is pinned."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler import CallerAuthSettings, ConfigError

from .conftest import Harness, deliver
from .fake_google import FakeGoogle, LocalSigner
from .test_caller_auth import AUDIENCE, CALLER, auth_env, bearer

ACCOUNT_ID = "112233445566778899001"
RECREATED_ID = "998877665544332211009"


def test_the_pinned_account_passes_and_a_recreated_one_of_the_same_email_is_refused(
        harness: Harness, google: FakeGoogle, signer: LocalSigner) -> None:
    server = harness.server(**auth_env(google), DEDUP_ALLOWED_CALLER_IDS=f" {ACCOUNT_ID} ,")
    recreated = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email=CALLER, sub=RECREATED_ID)))
    assert recreated.status_code == 403 and recreated.json()["status"] == "forbidden", recreated.text
    assert "DEDUP_ALLOWED_CALLER_IDS" in recreated.json()["error"]
    no_sub = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email=CALLER, sub=None)))
    assert no_sub.status_code == 403, no_sub.text
    assert harness.records() == {} and harness.starts() == []
    pinned = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email=CALLER.upper(), sub=ACCOUNT_ID)))
    assert pinned.status_code == 200 and pinned.json()["status"] == "processed", pinned.text


def test_without_a_pin_the_email_is_matched_case_insensitively(harness: Harness, google: FakeGoogle,
                                                              signer: LocalSigner) -> None:
    server = harness.server(**{**auth_env(google), "DEDUP_ALLOWED_CALLERS": "serviceAccount:" + CALLER.upper()})
    answer = deliver(server.url, bearer(signer.token(audience=AUDIENCE, email=CALLER.title(), sub=RECREATED_ID)))
    assert answer.status_code == 200 and answer.json()["status"] == "processed", answer.text


@pytest.mark.parametrize("env, message", [
    ({"DEDUP_ALLOWED_CALLER_IDS": "sched@p.iam.gserviceaccount.com"}, "not a service account's unique id"),
    ({"DEDUP_ALLOWED_CALLER_IDS": "12a"}, "DEDUP_ALLOWED_CALLER_IDS has '12a'"),
    ({"DEDUP_OIDC_AUDIENCE": "", "DEDUP_ALLOWED_CALLERS": ""}, "caller verification is off"),
])
def test_a_bad_pin_stops_the_handler_naming_the_variable(env: dict[str, str], message: str) -> None:
    base = {"DEDUP_OIDC_AUDIENCE": AUDIENCE, "DEDUP_ALLOWED_CALLERS": CALLER, "DEDUP_ALLOWED_CALLER_IDS": ACCOUNT_ID}
    with pytest.raises(ConfigError, match=message):
        CallerAuthSettings.from_env({**base, **env})
