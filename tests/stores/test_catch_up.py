"""Catch-up's bounds on each store over real HTTP: the window is counted back from the store's clock, never past the
retention period, and a delivery's catch-up spends at most its share of the attempt deadline, leaving the rest to the
next delivery; the executions log is the truth."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from scheduler_dedup.handler.protocol.catch_up import CATCH_UP_LEFT_FIELD
from scheduler_dedup.local.servers.store_servers import StoreServer

from .test_backfill import SCHEDULE, ok_runs
from .test_overlap import (Handlers, _handler_processes_reach_it, deliver, fire_times,  # noqa: F401
                           handlers, run_id)  # (fixtures)

pytestmark = pytest.mark.processes


def _minute(ago: timedelta) -> str:
    when = (datetime.now(timezone.utc) - ago).replace(second=0, microsecond=0)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _at(rfc3339: str) -> datetime:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))


@pytest.mark.parametrize(("late", "job_start"), [
    (timedelta(days=30), timedelta(days=60)),  # older than the 7-day retention too: its own run at most
    (timedelta(hours=2), timedelta(hours=4)),
], ids=["30-days-old", "2-hours-late"])
def test_a_late_delivery_catches_up_only_the_window_before_the_store_clock(
        handlers: Handlers, server: StoreServer, late: timedelta, job_start: timedelta) -> None:
    """A delivery whose schedule time is older than the window, on an every-minute job with a 1-hour window: the
    window is counted back from the store's clock, so it holds none of the 60 fire times before the header's; the
    delivery runs its own run, once."""
    when = _minute(late)
    handlers.plan(sleep=0)
    a = handlers.start(DEDUP_SCHEDULE=SCHEDULE, DEDUP_CATCH_UP_WINDOW_SECONDS="3600",
                       DEDUP_SCHEDULE_SINCE=_minute(job_start))
    body = deliver(a.url, when).json()
    assert body["status"] == "processed" and "caught_up" not in body, body
    assert deliver(a.url, when).json()["status"] == "duplicate"
    assert ok_runs(handlers) == {run_id(when, server.project): 1}


def test_catch_up_never_reaches_past_the_retention_period(handlers: Handlers, server: StoreServer) -> None:
    """With records kept 10 minutes, a 1-hour window after a 2-hour gap runs only the fire times whose records could
    not have expired yet: those of the last 9 minutes (retention less the clock margin)."""
    [now_ish] = fire_times(1)
    handlers.plan(sleep=0)
    a = handlers.start(DEDUP_SCHEDULE=SCHEDULE, DEDUP_CATCH_UP_WINDOW_SECONDS="3600", DEDUP_RETENTION_SECONDS="600",
                       DEDUP_SCHEDULE_SINCE=_minute(timedelta(hours=2)))
    asked = datetime.now(timezone.utc)
    body = deliver(a.url, now_ish).json()
    assert body["status"] == "processed", body
    caught = [_at(c["schedule_time"]) for c in body.get("caught_up", [])]
    assert 5 <= len(caught) <= 10, caught
    assert all(when >= asked - timedelta(seconds=600) for when in caught), caught
    assert caught == sorted(caught)  # oldest first


def test_catch_up_spends_its_share_of_the_attempt_deadline_and_the_next_delivery_goes_on(
        handlers: Handlers, server: StoreServer) -> None:
    """A 2 s job with a 15 s attempt deadline (7.5 s for catch-up) after a gap of 5 fire times: the first delivery
    catches up what fits and says where it stopped; each next delivery goes on from there; every fire time runs once."""
    times = fire_times(10)
    handlers.plan(sleep=2)
    a = handlers.start(DEDUP_SCHEDULE=SCHEDULE, DEDUP_CATCH_UP_WINDOW_SECONDS="3600", DEDUP_SCHEDULE_SINCE=times[0],
                       DEDUP_ATTEMPT_DEADLINE_SECONDS="15", DEDUP_LEASE_SECONDS="10")
    answers = [deliver(a.url, times[5]).json()]
    first = answers[0]
    assert first["status"] == "processed" and 1 <= len(first.get("caught_up", [])) < 5, first
    left = first[CATCH_UP_LEFT_FIELD]
    assert left[:19] == times[len(first["caught_up"])][:19], first  # the oldest one not run
    for t in times[6:]:
        if CATCH_UP_LEFT_FIELD not in answers[-1]:
            break
        answers.append(deliver(a.url, t).json())
        assert answers[-1]["status"] == "processed" and answers[-1].get("caught_up"), answers[-1]
    assert CATCH_UP_LEFT_FIELD not in answers[-1], answers
    caught = [c["schedule_time"][:19] for body in answers for c in body.get("caught_up", [])]
    assert caught == [t[:19] for t in times[:5]], answers  # oldest first, across deliveries, each once
    counts = ok_runs(handlers)
    for t in times[:5 + len(answers)]:
        assert counts.get(run_id(t, server.project)) == 1, (t, counts)
