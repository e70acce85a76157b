"""What leaves the handler towards a downstream and back: over real HTTP, real handler processes, the real emulator.

A webhook URL's path is its secret; a downstream's answer may be huge or trickled. None of these may leak the URL,
grow the handler's memory, or hold a run past the target timeout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from scheduler_dedup.handler.core.safe_text import scrub_secrets, shown_url

from .conftest import Harness, deliver, scheduler_headers
from .downstream import Downstream

T = "2026-10-16T12:00:00Z"
#: A Slack-style webhook path: the path is the credential.
SECRETS = ("T0SECRET1", "B0SECRET2", "XXXXsecretXXXXtoken")
WEBHOOK_PATH = f"/services/{SECRETS[0]}/{SECRETS[1]}/{SECRETS[2]}"
#: The target timeout: a trickling downstream must not hold the run much past it.
TIMEOUT_SECONDS = 2
#: How long a trickling downstream would go on: far past the timeout, and past what the test waits for the answer.
TRICKLE_SECONDS = 120
#: How long the test waits for the handler's answer: well under the trickle, well over the timeout.
ANSWER_WITHIN_SECONDS = 40


@pytest.fixture()
def downstream() -> Iterator[Downstream]:
    server = Downstream().start()
    yield server
    server.stop()


def http_target(url: str) -> dict[str, str]:
    return {"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": url, "DEDUP_TARGET_AUTH": "none",
            "DEDUP_TARGET_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS)}


def assert_no_secret(harness: Harness, log: str, *answers: requests.Response) -> None:
    stored = json.dumps(harness.records(), default=str)
    for where, text in [("record", stored), ("log", log), *((f"answer {a.status_code}", a.text) for a in answers)]:
        for secret in SECRETS:
            assert secret not in text, (where, secret, text[-2000:])


# -- the target URL --------------------------------------------------------------------------------


def test_a_webhook_url_is_recorded_and_answered_as_scheme_host_and_a_hash(harness: Harness,
                                                                          downstream: Downstream) -> None:
    url = downstream.url + WEBHOOK_PATH
    server = harness.server(**http_target(url))
    first = deliver(server.url, scheduler_headers("hook", T))
    assert first.status_code == 200 and first.json()["status"] == "processed", first.text
    again = deliver(server.url, scheduler_headers("hook", T))
    assert again.json()["status"] == "duplicate", again.text
    assert downstream.served[0].path == WEBHOOK_PATH  # the downstream got the whole URL
    shown = first.json()["result"]["url"]
    assert shown == again.json()["result"]["url"] == shown_url(url)
    assert shown.startswith(downstream.url + "/[sha256:") and len(shown) == len(downstream.url) + 26
    assert_no_secret(harness, server.log(), first, again)


@pytest.mark.parametrize("status, outcome", [(404, "failed"), (302, "failed"), (503, "released")])
def test_a_downstream_quoting_the_webhook_url_does_not_put_it_in_errors_records_or_logs(
        harness: Harness, downstream: Downstream, status: int, outcome: str) -> None:
    """A 404 page quoting the requested path, a redirect to it with a slash added, a 503 page: the run's error
    named the URL, and the downstream's own text repeated its path."""
    downstream.behaviour = ("status", status)
    url = downstream.url + WEBHOOK_PATH + "?token=q-SECRETq"
    server = harness.server(**http_target(url))
    answer = deliver(server.url, scheduler_headers(f"hook-{status}", T))
    assert answer.json()["status"] == outcome, answer.text
    error = answer.json()["error"]
    assert f"HTTP {status}" in error and shown_url(url) in error, error
    assert_no_secret(harness, server.log(), answer)
    assert "q-SECRETq" not in server.log() + answer.text


def test_an_unreachable_webhook_is_released_without_its_url(harness: Harness) -> None:
    """urllib3's connection error quotes the request's path: ``Max retries exceeded with url: /services/...``."""
    url = "http://127.0.0.1:1" + WEBHOOK_PATH
    server = harness.server(**http_target(url))
    answer = deliver(server.url, scheduler_headers("hook-down", T))
    assert answer.status_code == 500 and answer.json()["status"] == "released", answer.text
    assert "connection failed" in answer.json()["error"]
    assert_no_secret(harness, server.log(), answer)


def test_a_refused_webhook_setting_does_not_quote_its_path() -> None:
    from scheduler_dedup.handler.core.errors import ConfigError
    from scheduler_dedup.handler.targets.settings import TargetSettings

    url = "http://hooks.example.com" + WEBHOOK_PATH
    with pytest.raises(ConfigError, match="plain http") as refused:
        TargetSettings(type="http", target=url)
    assert shown_url(url) in str(refused.value)
    assert not any(secret in str(refused.value) for secret in SECRETS), refused.value


def test_shown_url_keeps_scheme_and_host_and_tells_urls_apart() -> None:
    a, b = "https://hooks.example.com/services/A/B/C", "https://hooks.example.com/services/A/B/D"
    assert shown_url(a).startswith("https://hooks.example.com/[sha256:") and shown_url(a) != shown_url(b)
    assert shown_url("https://user:pw@h.example:8443/x?y=1") == shown_url("https://h.example:8443/x?y=1")
    assert "pw" not in shown_url("https://user:pw@h.example:8443/x")
    assert shown_url("https://h.example") == shown_url("https://h.example/") == "https://h.example/"
    assert scrub_secrets(shown_url(a)) == shown_url(a)


# -- bounded answers -------------------------------------------------------------------------------

#: A success body as large as the one that added 367 MB to the handler.
HUGE_BYTES = 200 * 1024 * 1024
#: What the handler may let the downstream send of it: socket buffers on both ends, and one read.
READ_BOUND_BYTES = 32 * 1024 * 1024


@pytest.mark.parametrize("status, outcome", [(200, "processed"), (500, "released")])
def test_a_huge_answer_is_not_read(harness: Harness, downstream: Downstream, status: int, outcome: str) -> None:
    downstream.behaviour = ("huge", status, HUGE_BYTES)
    server = harness.server(**{**http_target(downstream.url + "/hook"), "DEDUP_TARGET_TIMEOUT_SECONDS": "30"})
    answer = deliver(server.url, scheduler_headers(f"huge-{status}", T))
    assert answer.json()["status"] == outcome, answer.text
    [served] = downstream.served
    assert served.done.wait(30), "the handler still holds the connection"
    assert served.cut_off, "the handler read the whole answer"
    assert served.bytes_sent < READ_BOUND_BYTES, served.bytes_sent


# -- a total deadline ------------------------------------------------------------------------------


@pytest.mark.parametrize("behaviour, outcome, error", [
    # an error body is read for its summary: its status decides, what arrived in time is summarised
    (("trickle_body", 500, TRICKLE_SECONDS), "released", f"HTTP 500, application/json, 0+ bytes (its body cut off "
                                                         f"at {TIMEOUT_SECONDS} s)"),
    # the headers never end: no answer at all (http.client would parse the part that came as a whole answer)
    (("trickle_headers", 200, TRICKLE_SECONDS), "released", f"no complete answer within {TIMEOUT_SECONDS} s"),
    (("trickle_body", 200, TRICKLE_SECONDS), "processed", None),  # only the status is used: no body is read
])
def test_a_trickled_answer_does_not_hold_the_run_past_the_target_timeout(
        harness: Harness, downstream: Downstream, behaviour: tuple[object, ...], outcome: str,
        error: str | None) -> None:
    downstream.behaviour = behaviour
    server = harness.server(**http_target(downstream.url + "/hook"))
    answer = deliver(server.url, scheduler_headers("trickled", T), timeout=ANSWER_WITHIN_SECONDS)
    assert answer.json()["status"] == outcome, answer.text
    if error is not None:
        assert error in answer.json()["error"], answer.text
    [served] = downstream.served
    assert served.done.wait(ANSWER_WITHIN_SECONDS) and served.cut_off, served
    assert served.bytes_sent < 200 + TRICKLE_SECONDS // 2, served


def test_a_google_api_answer_trickled_after_its_status_does_not_hold_the_run(
        harness: Harness, downstream: Downstream) -> None:
    """A Workflows answer is read for its JSON: trickled, the call ends at the timeout and the run is released."""
    downstream.behaviour = ("trickle_body", 200, TRICKLE_SECONDS)
    server = harness.server(DEDUP_TARGET_TYPE="workflows", DEDUP_TARGET="projects/p1/locations/l/workflows/wf",
                            DEDUP_WORKFLOWS_API=downstream.url, DEDUP_TARGET_AUTH="none",
                            DEDUP_TARGET_TIMEOUT_SECONDS=str(TIMEOUT_SECONDS))
    answer = deliver(server.url, scheduler_headers("trickled-api", T), timeout=ANSWER_WITHIN_SECONDS)
    assert answer.status_code == 500 and answer.json()["status"] == "released", answer.text
    assert f"did not arrive within {TIMEOUT_SECONDS} s" in answer.json()["error"]
    [served] = downstream.served
    assert served.done.wait(ANSWER_WITHIN_SECONDS) and served.cut_off, served
