"""A region move keeps one execution per fire time: while ``pulumi up`` moves ``region``, the old and the new
Scheduler job both fire into one store; keyed on the pinned location (``DEDUP_RUN_KEY_LOCATION``), one fire time
delivered by both is one run, and the run check of the moved job reads the old job's records (a fire time neither
delivered is reported missed, none is reported twice). Real emulator, real threads, the handler in-process."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import pytest

from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.paths import CHECK_LOCATION_GUARD
from scheduler_dedup.handler.monitoring.run_check import RunCheck
from scheduler_dedup.handler.monitoring.run_history import RunHistory
from scheduler_dedup.handler.protocol.idempotency import Idempotency
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.service.delivery import SchedulerHandler
from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
from scheduler_dedup.local.servers.firestore_emulator import FirestoreEmulator

from .conftest import scheduler_headers

OLD, NEW = "europe-west1", "europe-west4"
SCHEDULE = "0 * * * *"


def _handler(emulator: FirestoreEmulator, region: str, pinned: str | None, runs: Counter[str]) -> SchedulerHandler:
    """The handler the component deploys in ``region``: its own job there, keyed on ``pinned``."""
    settings = Settings(project=emulator.project, schedule=SCHEDULE, time_zone="Etc/UTC",
                        scheduler_job=f"projects/{emulator.project}/locations/{region}/jobs/nightly",
                        run_key_location=pinned)
    store = FirestoreRunStore.connect(settings.project, settings.store_config.database, settings.collection)
    lock = threading.Lock()

    def job(run: ScheduledRun) -> dict[str, Any]:
        with lock:
            runs[run.schedule_time.isoformat()] += 1
        return {"ok": True}

    return SchedulerHandler(settings, Idempotency(store, settings.lease_seconds, settings.retention_seconds), job)


def _both_deliver(old: SchedulerHandler, new: SchedulerHandler, at: str, project: str) -> list[Any]:
    """One fire time delivered at once by the old job (to the old service) and the new one (to the new)."""
    barrier = threading.Barrier(2)

    def deliver(args: tuple[SchedulerHandler, str]) -> Any:
        handler, region = args
        barrier.wait()
        return handler.handle(scheduler_headers("nightly", at, **{"X-Dedup-Project": project,
                                                                  "X-Dedup-Location": region}))

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(deliver, [(old, OLD), (new, NEW)]))


@pytest.mark.parametrize("pinned", [OLD, None])
def test_one_fire_time_delivered_by_the_old_and_the_new_job_runs_once_when_the_key_location_is_pinned(
        emulator: FirestoreEmulator, pinned: str | None) -> None:
    runs: Counter[str] = Counter()
    old, new = _handler(emulator, OLD, pinned, runs), _handler(emulator, NEW, pinned, runs)
    for hour in (10, 11, 12):
        answers = _both_deliver(old, new, f"2026-12-07T{hour}:00:00Z", emulator.project)
        assert all(status in (200, 409) for _, status, _ in answers), answers
    if pinned is None:  # what a move did before the location was pinned: each fire time ran twice
        assert set(runs.values()) == {2}, runs
    else:
        assert len(runs) == 3 and set(runs.values()) == {1}, runs


def test_the_moved_jobs_run_check_reads_the_old_jobs_records_and_reports_a_gap_missed(
        emulator: FirestoreEmulator) -> None:
    runs: Counter[str] = Counter()
    old, new = _handler(emulator, OLD, OLD, runs), _handler(emulator, NEW, OLD, runs)
    # 10:00 by the old job only (before the new one existed), 12:00 by the new one only (the old one deleted);
    # 11:00 by neither: the move's gap.
    for handler, region, hour in ((old, OLD, 10), (new, NEW, 12)):
        _, status, _ = handler.handle(scheduler_headers("nightly", f"2026-12-07T{hour}:00:00Z", **{
            "X-Dedup-Project": emulator.project, "X-Dedup-Location": region}))
        assert status == 200
    check = RunCheck(new.settings, RunHistory(emulator.connect()),
                     lambda: datetime(2026, 12, 7, 13, 5, tzinfo=timezone.utc))
    body, status, _ = check.handle(
        {**scheduler_headers("nightly-watchdog", "2026-12-07T13:05:00Z"), "X-Dedup-Location": CHECK_LOCATION_GUARD},
        json.dumps({"job_name": "nightly", "grace_seconds": 300, "window_seconds": 4 * 3600}).encode())
    assert status == 200, body
    assert body["missed"] == ["2026-12-07T11:00:00Z"], body


def test_a_pinned_key_location_that_is_no_region_stops_the_handler_at_start_up() -> None:
    with pytest.raises(ConfigError, match="DEDUP_RUN_KEY_LOCATION"):
        Settings(project="p1", run_key_location="Europe West")
