"""Tokens for downstream calls end by the call's total deadline, over real HTTP: handler processes whose google-auth
asks a local metadata server (``GCE_METADATA_HOST``) that trickles its token answer one byte a second.

A trickled token answer held the run as long as the trickle went on: google-auth's per-read timeout never trips on
a byte a second, and it retries the metadata server five times. The ID token of an HTTP target, the access token
an API target's ``AuthorizedSession`` refreshes, and the one trust mode's own Admin API reads refresh now end with
their call's deadline.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .conftest import Harness, deliver, scheduler_headers
from .downstream import Downstream
from .fake_google import FakeGoogle, LocalSigner
from .fake_metadata import FakeMetadata
from .test_trust_boundary import AUDIENCE, SCHEDULER, SERVICE, stripped, trust_env

T = "2026-10-16T12:00:00Z"
#: The target timeout: the token's fetch and the call share it.
TIMEOUT_SECONDS = 2
#: How long the metadata server would trickle: far past every deadline, and past what the test waits for an answer.
TRICKLE_SECONDS = 120
#: How long the test waits for the handler's answer: well under the trickle, well over the deadlines.
ANSWER_WITHIN_SECONDS = 40


@pytest.fixture()
def metadata() -> Iterator[FakeMetadata]:
    server = FakeMetadata(tokens=("trickle", TRICKLE_SECONDS)).start()
    yield server
    server.stop()


@pytest.fixture()
def downstream() -> Iterator[Downstream]:
    server = Downstream().start()
    yield server
    server.stop()


def on_cloud_run(metadata: FakeMetadata, **extra: str) -> dict[str, str]:
    """The environment of a handler whose credentials come from ``metadata`` (as on Cloud Run), and none else."""
    return {"GCE_METADATA_HOST": metadata.host, "GCE_METADATA_IP": metadata.host, "GOOGLE_APPLICATION_CREDENTIALS": "",
            "DEDUP_TARGET_AUTH": "google", "DEDUP_TARGET_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS), **extra}


def assert_cut_off(metadata: FakeMetadata) -> None:
    [token] = metadata.token_requests()  # one fetch: no retry after the deadline
    assert token.done.wait(ANSWER_WITHIN_SECONDS) and token.cut_off, token
    assert token.bytes_sent < 200 + TRICKLE_SECONDS // 2, token


def test_an_id_token_the_metadata_server_trickles_does_not_hold_the_run(harness: Harness,
                                                                        metadata: FakeMetadata) -> None:
    server = harness.server(**on_cloud_run(metadata, DEDUP_TARGET_TYPE="http", DEDUP_TARGET="https://127.0.0.1:9/hook"))
    answer = deliver(server.url, scheduler_headers("minted", T), timeout=ANSWER_WITHIN_SECONDS)
    assert answer.status_code == 500 and answer.json()["status"] == "released", answer.text
    assert f"could not mint an ID token for the HTTP target within {TIMEOUT_SECONDS} s" in answer.json()["error"]
    assert_cut_off(metadata)
    (record,) = harness.records().values()  # released: the next delivery runs it at once
    assert record["status"] == "released" and "within" in record["error"], record


def test_an_access_token_refresh_the_metadata_server_trickles_does_not_hold_the_run(
        harness: Harness, metadata: FakeMetadata, downstream: Downstream) -> None:
    server = harness.server(**on_cloud_run(metadata, DEDUP_TARGET_TYPE="workflows",
                                           DEDUP_TARGET="projects/p1/locations/l/workflows/wf",
                                           DEDUP_WORKFLOWS_API=downstream.url))
    answer = deliver(server.url, scheduler_headers("refreshed", T), timeout=ANSWER_WITHIN_SECONDS)
    assert answer.status_code == 500 and answer.json()["status"] == "released", answer.text
    assert f"no access token within {TIMEOUT_SECONDS} s" in answer.json()["error"], answer.text
    assert_cut_off(metadata)
    assert downstream.served == []  # nothing was sent without its token


def test_trust_modes_own_admin_api_read_ends_by_its_deadline_when_its_token_trickles(
        harness: Harness, metadata: FakeMetadata, google: FakeGoogle, signer: LocalSigner) -> None:
    """Trust mode reads its own service's IAM policy (handler/callers/trust_premise) with the runtime account's
    token: a trickled refresh refuses the delivery once the read's deadline passes, as any unreadable policy does."""
    google.private_service(SERVICE)
    server = harness.server(**trust_env(google, **on_cloud_run(metadata)))
    token = stripped(signer.token(audience=AUDIENCE, email=SCHEDULER))
    answer = deliver(server.url, scheduler_headers("guarded", T, **{"X-Serverless-Authorization": f"Bearer {token}"}),
                     timeout=ANSWER_WITHIN_SECONDS)
    assert answer.status_code == 401, answer.text
    assert "no answer within the deadline (CredentialDeadlineExceeded)" in answer.json()["error"], answer.text
    assert_cut_off(metadata)
    assert not google.gets(SERVICE)  # the read was never sent without its token
