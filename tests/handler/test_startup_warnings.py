"""The handler's logs hold no google-api-core Python-version FutureWarning, and still show other warnings."""

from __future__ import annotations

from .conftest import Harness, deliver, scheduler_headers


def test_the_api_core_python_version_warning_is_hidden_and_a_jobs_own_warning_is_not(harness: Harness) -> None:
    harness.plan("warns", warn="the job's own deprecation notice")
    server = harness.server()
    answer = deliver(server.url, scheduler_headers("warns", "2026-10-16T12:00:00Z"))
    assert answer.status_code == 200, answer.text[:300]
    log = server.log()
    assert "the job's own deprecation notice" in log, log[-2000:]
    assert "google.api_core" not in log and "_python_version_support" not in log, log[-3000:]
