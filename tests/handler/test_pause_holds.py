"""The stack's pause holds at the handler, over real HTTP on the Firestore emulator: a delivery during the pause, or
of a fire time in it, runs nothing and writes nothing (run history then reports the fire time paused)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .conftest import Harness, deliver, scheduler_headers


def _ago(minutes: int) -> str:
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    return (now - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_delivery_during_the_pause_runs_nothing(harness: Harness) -> None:
    server = harness.server(DEDUP_PAUSED_SINCE=_ago(10))
    for schedule_time in (_ago(1), _ago(20)):  # a fire time of the pause, and a retry of an earlier one
        answer = deliver(server.url, scheduler_headers("paused-job", schedule_time))
        assert answer.status_code == 200 and answer.json()["status"] == "paused", answer.text
        assert "DEDUP_PAUSED_SINCE" in answer.json()["error"] and answer.json()["run_id"]
    assert harness.starts() == [] and harness.records() == {}


def test_after_the_resume_only_the_fire_times_of_the_pause_stay_held(harness: Harness) -> None:
    server = harness.server(DEDUP_PAUSED_SINCE=_ago(30), DEDUP_RESUMED_AT=_ago(10))
    held = deliver(server.url, scheduler_headers("paused-job", _ago(20)))
    assert held.status_code == 200 and held.json()["status"] == "paused", held.text
    assert harness.starts() == [] and harness.records() == {}
    ran = deliver(server.url, scheduler_headers("paused-job", _ago(5)))
    assert ran.status_code == 200 and ran.json()["status"] == "processed", ran.text
    assert len(harness.starts()) == 1 and len(harness.records()) == 1
