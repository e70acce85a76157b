"""What a job's result becomes, over real HTTP on the real emulator: stored once, answered alike, never re-run for it.

A result Firestore would refuse must not leave the run ``in_progress`` (every retry after the lease would
run the job again); a result JSON cannot hold must not turn the answer into functions-framework's HTML
500 page; the first answer and every replay carry the same JSON, and no body is invalid JSON.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import requests
from google.cloud import firestore

from .conftest import COLLECTION, Harness, deliver, scheduler_headers

T = "2026-10-16T12:00:00Z"
LEASE = 1.0


def strict_json(response: requests.Response) -> dict[str, Any]:
    """The body parsed as strict JSON: NaN, Infinity and non-JSON (an HTML page) fail the test."""
    assert response.headers["Content-Type"].startswith("application/json"), response.text[:300]

    def refuse(constant: str) -> Any:
        raise AssertionError(f"answer body holds {constant}, which is not JSON")

    body: dict[str, Any] = json.loads(response.text, parse_constant=refuse)
    return body


def nested_maps(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


REFUSED_BY_FIRESTORE = {
    "above-int64": ({"object_id": 18446744073709551615}, "64-bit integer"),
    "30-nested-maps": (nested_maps(30), "20 levels"),
    "reserved-key": ({"__meta__": 1}, "__.*__"),
    "over-1mib-as-firestore-counts": ({"ids": [0] * 170000}, "document limit"),
}


def test_a_result_firestore_refuses_completes_the_run_without_it_and_never_reruns(harness: Harness) -> None:
    for job, (value, reason) in REFUSED_BY_FIRESTORE.items():
        harness.plan(job, result=value)
    server = harness.server(DEDUP_LEASE_SECONDS=str(LEASE))
    for job, (_, reason) in REFUSED_BY_FIRESTORE.items():
        answers = []
        for delivery in range(3):  # Scheduler's retries, each after the lease would have expired
            if delivery:
                time.sleep(LEASE + 0.3)
            answers.append(deliver(server.url, scheduler_headers(job, T)))
        first, *replays = [strict_json(a) for a in answers]
        assert answers[0].status_code == 200 and first["status"] == "processed", (job, answers[0].text[:300])
        assert first["result"] is None and reason in first["result_dropped"], (job, first)
        for answer, replay in zip(answers[1:], replays):
            assert answer.status_code == 200 and replay["status"] == "duplicate", (job, replay)
            assert replay["result"] is None and replay["result_dropped"] == first["result_dropped"], job
        run_id = first["run_id"]
        assert len(harness.starts(run_id)) == 1, f"{job}: the job ran {len(harness.starts(run_id))} times"
        record = harness.records()[run_id]
        assert record["status"] == "completed" and record["result"] is None, job
        assert record["result_dropped"] == first["result_dropped"], job


@pytest.mark.parametrize("kind", ["set", "bytes", "object"])
def test_a_non_json_result_answers_200_processed_and_replays_say_why_it_was_dropped(harness: Harness,
                                                                                    kind: str) -> None:
    harness.plan("odd", result_python=kind)
    server = harness.server()
    first = deliver(server.url, scheduler_headers("odd", T))
    body = strict_json(first)
    assert first.status_code == 200 and body["status"] == "processed", first.text[:300]
    assert body["result"] is None and "not JSON" in body["result_dropped"]
    # A replay from this process's cache and one read from Firestore by another process say the same.
    other = harness.server()
    for url in (server.url, other.url):
        replay = strict_json(deliver(url, scheduler_headers("odd", T)))
        assert replay == {"status": "duplicate", "run_id": body["run_id"], "result": None,
                          "result_dropped": body["result_dropped"]}
    assert len(harness.starts()) == 1


def test_first_answer_and_every_replay_carry_the_stored_form(harness: Harness) -> None:
    harness.plan("forms", result_python="tuple_and_datetime")
    harness.plan("nan", result_python="nan")
    server, other = harness.server(), harness.server()
    first = strict_json(deliver(server.url, scheduler_headers("forms", T)))
    assert first["result"] == {"pair": [1, 2], "at": "2026-10-16T12:00:00+00:00"}
    for url in (server.url, other.url):
        assert strict_json(deliver(url, scheduler_headers("forms", T)))["result"] == first["result"]
    assert harness.records()[first["run_id"]]["result"] == first["result"]

    nan = strict_json(deliver(server.url, scheduler_headers("nan", T)))  # NaN would make the body invalid JSON
    assert nan["status"] == "processed" and nan["result"] is None and "NaN" in nan["result_dropped"]
    for url in (server.url, other.url):
        assert strict_json(deliver(url, scheduler_headers("nan", T)))["result_dropped"] == nan["result_dropped"]


def test_an_unexpected_error_answers_json_500_not_the_html_page(harness: Harness) -> None:
    server = harness.server()
    run_id = strict_json(deliver(server.url, scheduler_headers("corrupt", T)))["run_id"]
    client = firestore.Client(project=harness.emulator.project)
    client.collection(COLLECTION).document(run_id).update({"status": "paused"})  # a status no version writes
    other = harness.server()  # no cached outcome: it reads the record
    answer = deliver(other.url, scheduler_headers("corrupt", T))
    body = strict_json(answer)
    assert answer.status_code == 500 and body["status"] == "internal_error", answer.text[:300]
    assert "paused" in body["error"]


def utf8_encodable(body: Any) -> bool:
    """True when every string in ``body`` encodes as UTF-8 (no lone surrogate hides behind a \\u escape)."""
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


UNSTORABLE_STRINGS_AND_KEYS = {
    "lone_surrogate_value": "not valid UTF-8",  # {"s": "\ud800"}
    "lone_surrogate_key": "not valid UTF-8",  # {"\udc80": 1}
    "colliding_keys": "same JSON key",  # {1: "a", "1": "b"}: json.dumps would keep only "1": "b"
}


@pytest.mark.parametrize("kind", sorted(UNSTORABLE_STRINGS_AND_KEYS))
def test_a_result_with_strings_or_keys_firestore_cannot_keep_is_dropped_and_never_reruns(harness: Harness,
                                                                                          kind: str) -> None:
    harness.plan(kind, result_python=kind)
    server, other = harness.server(DEDUP_LEASE_SECONDS=str(LEASE)), harness.server(DEDUP_LEASE_SECONDS=str(LEASE))
    first = deliver(server.url, scheduler_headers(kind, T))
    body = strict_json(first)
    assert first.status_code == 200 and body["status"] == "processed", first.text[:300]
    assert body["result"] is None and UNSTORABLE_STRINGS_AND_KEYS[kind] in body["result_dropped"], body
    assert utf8_encodable(body), body
    time.sleep(LEASE + 0.3)  # were the run left in_progress, this delivery would take it over and run it again
    for url in (server.url, other.url):
        replay = strict_json(deliver(url, scheduler_headers(kind, T)))
        assert replay == {"status": "duplicate", "run_id": body["run_id"], "result": None,
                          "result_dropped": body["result_dropped"]}
    assert len(harness.starts(body["run_id"])) == 1
    record = harness.records()[body["run_id"]]
    assert record["status"] == "completed" and record["result_dropped"] == body["result_dropped"]


def test_error_text_utf8_cannot_encode_is_recorded_escaped(harness: Harness) -> None:
    harness.plan("permanent", raise_python="non_retryable_lone_surrogate")  # NonRetryableJobError("bad file \udc80name")
    harness.plan("retryable", raise_python="retryable_lone_surrogate", fail_times=1)
    server, other = harness.server(DEDUP_LEASE_SECONDS=str(LEASE)), harness.server(DEDUP_LEASE_SECONDS=str(LEASE))
    first = deliver(server.url, scheduler_headers("permanent", T))
    body = strict_json(first)
    assert body["status"] == "failed", first.text[:300]
    assert body["error"] == "NonRetryableJobError: bad file \\udc80name" and utf8_encodable(body)
    time.sleep(LEASE + 0.3)
    for url in (server.url, other.url):
        replay = strict_json(deliver(url, scheduler_headers("permanent", T)))
        assert replay["status"] == "failed" and replay["error"] == body["error"]
    assert len(harness.starts(body["run_id"])) == 1
    assert harness.records()[body["run_id"]]["status"] == "failed"

    released = deliver(server.url, scheduler_headers("retryable", T))
    body = strict_json(released)
    assert released.status_code == 500 and body["status"] == "released", released.text[:300]
    assert body["error"] == "RuntimeError: bad file \\udc80name" and utf8_encodable(body)
    retry = strict_json(deliver(other.url, scheduler_headers("retryable", T)))  # released: runs again at once
    assert retry["status"] == "processed" and len(harness.starts(body["run_id"])) == 2
