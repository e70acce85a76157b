"""The handler served as App Engine standard serves it, delivered to as Cloud Scheduler's App Engine target delivers.

Each server is the unpacked deploy archive run by its ``app.yaml`` entrypoint (gunicorn serving ``main:app``) with
``$PORT`` set, against the real Firestore emulator; each request has the shape of an ``AppEngineHttpTarget``
delivery (:func:`~tests.handler.conftest.app_engine_headers`: POST to the relative URI, Scheduler's and App Engine's
headers, a body). App Engine retries a 503 outside the job's retry count, so every test here also collects every
answer and checks that none is 503.
"""

from __future__ import annotations

from collections import Counter

import pytest
import requests

from .conftest import APP_ENGINE_RELATIVE_URI, Harness, app_engine_headers, deliver

T = "2026-10-16T12:00:00Z"


@pytest.fixture()
def ae(harness: Harness, app_engine_app) -> Harness:  # type: ignore[no-untyped-def]
    harness.platform, harness.app_dir = "app_engine", app_engine_app
    return harness


def test_one_app_engine_delivery_runs_the_job_once_and_its_retry_is_a_duplicate(ae: Harness) -> None:
    server = ae.server()
    assert server.url.endswith(APP_ENGINE_RELATIVE_URI)
    first = deliver(server.url, app_engine_headers("nightly", T))
    assert first.status_code == 200 and first.json()["status"] == "processed", first.text
    again = deliver(server.url, app_engine_headers("nightly", T))
    assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
    assert len(ae.starts()) == 1
    (record,) = ae.records().values()
    assert record["job_name"] == "nightly" and record["project"] == "demo-scheduler-dedup"
    assert record["location"] == "us-central1"


def _never_503(responses: list[requests.Response]) -> None:
    assert not [r for r in responses if r.status_code == 503], Counter(r.status_code for r in responses)


def test_a_request_without_app_engines_proof_is_refused_403_before_firestore(ae: Harness) -> None:
    """App Engine strips X-Appengine-* from external requests, so a forged delivery reaches the app without them:
    X-CloudScheduler alone (any client can send it) proves nothing."""
    server = ae.server()
    forged = {k: v for k, v in app_engine_headers("nightly", T).items()
              if k not in ("X-Appengine-Cron", "X-AppEngine-QueueName")}
    answers = [deliver(server.url, forged), deliver(server.url, {**forged, "X-Appengine-Cron": "false"}),
               deliver(server.url, {**forged, "X-AppEngine-QueueName": "default"})]
    for answer in answers:
        assert answer.status_code == 403 and answer.json()["status"] == "forbidden", answer.text
        assert "X-Appengine-Cron" in answer.json()["error"]
    assert ae.records() == {} and ae.starts() == []
    # Either proof admits the delivery.
    by_queue = deliver(server.url, {**forged, "X-AppEngine-QueueName": "__cron"})
    assert by_queue.status_code == 200 and by_queue.json()["status"] == "processed", by_queue.text
    by_cron = deliver(server.url, {**forged, "X-Appengine-Cron": "true"})
    assert by_cron.status_code == 200 and by_cron.json()["status"] == "duplicate", by_cron.text
    _never_503([*answers, by_queue, by_cron])


def test_app_engine_start_and_reserved_paths_answer_404_without_a_delivery(ae: Harness) -> None:
    """/_ah/start begins every basic- or manual-scaling instance: App Engine takes 2xx or 404 for a started
    instance (anything else stops it), and it carries no Scheduler header."""
    server = ae.server()
    base = server.url.split("/scheduled/")[0]
    for method, path in (("GET", "/_ah/start"), ("GET", "/_ah/stop"), ("POST", "/_ah/warmup")):
        answer = requests.request(method, base + path, timeout=30)
        assert answer.status_code == 404 and answer.json()["status"] == "not_found", (path, answer.text)
    assert ae.records() == {}


def test_firestore_unreachable_answers_500_store_error_never_503(ae: Harness) -> None:
    """A store outage is a retryable failure Scheduler must count: 500, not App Engine's uncounted 503."""
    import socket

    with socket.socket() as closed:  # a port nobody listens on: every Firestore call fails fast
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"
    server = ae.server(FIRESTORE_EMULATOR_HOST=dead, DEDUP_STORE_TIMEOUT_SECONDS="1")
    answers = [deliver(server.url, app_engine_headers(f"outage-{n}", T)) for n in range(3)]
    for answer in answers:
        assert answer.status_code == 500 and answer.json()["status"] == "store_error", answer.text
        assert answer.json()["executed"] is False
    assert ae.starts() == []
    _never_503(answers)


def test_job_failures_answer_500_or_200_never_503(ae: Harness) -> None:
    ae.plan("flaky", fail="retryable", fail_times=1)
    ae.plan("broken", fail="permanent")
    ae.plan("raises", raise_python="keyboard_interrupt", fail_times=1)
    server = ae.server()
    answers = {job: deliver(server.url, app_engine_headers(job, T)) for job in ("flaky", "broken", "raises")}
    assert answers["flaky"].status_code == 500 and answers["flaky"].json()["status"] == "released"
    assert answers["broken"].status_code == 200 and answers["broken"].json()["status"] == "failed"
    assert answers["raises"].status_code == 500, answers["raises"].text
    retried = deliver(server.url, app_engine_headers("flaky", T))
    assert retried.status_code == 200 and retried.json()["status"] == "processed", retried.text
    _never_503([*answers.values(), retried])


def test_more_deliveries_than_threads_queue_and_none_is_answered_503(ae: Harness) -> None:
    """Overload: 40 concurrent deliveries (10 runs, 4 copies each) to one instance of 8 threads whose jobs take
    1 s. gunicorn queues what its threads cannot take; nothing answers 503; each run runs once."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    for n in range(10):
        ae.plan(f"busy-{n}", sleep=1.0)
    server = ae.server()
    barrier = threading.Barrier(40)

    def one(i: int) -> requests.Response:
        barrier.wait()
        return deliver(server.url, app_engine_headers(f"busy-{i % 10}", T), timeout=120)

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(one, range(40)))
    _never_503(answers)
    statuses = Counter((r.status_code, r.json()["status"]) for r in answers)
    assert set(statuses) <= {(200, "processed"), (200, "duplicate"), (409, "in_progress")}, statuses
    assert statuses[(200, "processed")] == 10, statuses
    assert Counter(e["job_name"] for e in ae.starts()) == {f"busy-{n}": 1 for n in range(10)}


def test_a_downstream_503_is_answered_500_not_passed_through(ae: Harness) -> None:
    """A proxy target's 503 releases the run and answers 500: App Engine would retry a 503 outside the job's
    retry count, without end."""
    from .fake_google import FakeGoogle

    fake = FakeGoogle().start()
    try:
        server = ae.server(DEDUP_TARGET_TYPE="http", DEDUP_TARGET=f"{fake.url}/hook", DEDUP_TARGET_AUTH="none",
                           DEDUP_TARGET_TIMEOUT_SECONDS="5")
        fake.fail_next(503)
        first = deliver(server.url, app_engine_headers("proxied", T))
        assert first.status_code == 500 and first.json()["status"] == "released", first.text
        second = deliver(server.url, app_engine_headers("proxied", T))
        assert second.status_code == 200 and second.json()["status"] == "processed", second.text
        assert len(fake.hook_executions) == 1
        _never_503([first, second])
    finally:
        fake.stop()


def test_oidc_settings_beside_the_app_engine_check_stop_the_instance(ae: Harness) -> None:
    with pytest.raises(RuntimeError, match="DEDUP_APP_ENGINE_CALLER=true and DEDUP_OIDC_AUDIENCE"):
        ae.server(DEDUP_OIDC_AUDIENCE="https://x.invalid", DEDUP_ALLOWED_CALLERS="s@p.iam.gserviceaccount.com")


def test_on_app_engine_an_unset_caller_check_fails_closed(ae: Harness) -> None:
    """App Engine has no IAM gate: without DEDUP_APP_ENGINE_CALLER the check is on (App Engine's runtime sets
    GAE_APPLICATION/GAE_SERVICE, as the local App Engine server does), so a bare POST with Scheduler's two headers is
    refused 403 and claims nothing; a real delivery (App Engine's cron headers) runs."""
    server = ae.server(DEDUP_APP_ENGINE_CALLER="")
    bare = deliver(server.url, {"X-CloudScheduler-JobName": "nightly", "X-CloudScheduler-ScheduleTime": T})
    assert bare.status_code == 403 and bare.json()["status"] == "forbidden", bare.text
    assert ae.records() == {} and ae.starts() == []
    real = deliver(server.url, app_engine_headers("nightly", T))
    assert real.status_code == 200 and real.json()["status"] == "processed", real.text


def test_on_app_engine_turning_the_check_off_needs_a_reason(ae: Harness) -> None:
    with pytest.raises(RuntimeError, match="DEDUP_APP_ENGINE_OPEN_REASON"):
        ae.server(DEDUP_APP_ENGINE_CALLER="false")
    server = ae.server(DEDUP_APP_ENGINE_CALLER="false", DEDUP_APP_ENGINE_OPEN_REASON="an IAP policy guards the app")
    bare = deliver(server.url, {"X-CloudScheduler-JobName": "nightly", "X-CloudScheduler-ScheduleTime": T})
    assert bare.status_code == 200 and bare.json()["status"] == "processed", bare.text
