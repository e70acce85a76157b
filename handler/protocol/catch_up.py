"""Catch-up: on a delivery after a gap, run the job's missed fire times of a window once each, through the claim.

With ``DEDUP_CATCH_UP_WINDOW_SECONDS`` above 0, a scheduled (not forced) delivery first reads the record of the
fire time just before its own (one read). When that one has none, there was a gap (the service down, deliveries
lost, the job paused): the fire times of ``[schedule time - window, schedule time)`` (after ``DEDUP_SCHEDULE_SINCE``,
and outside the stack's pause, ``DEDUP_PAUSED_SINCE`` until ``DEDUP_RESUMED_AT``: a pause means those do not run)
that have no record are run oldest first, each under its own run key, through
:meth:`~scheduler_dedup.handler.protocol.idempotency.Idempotency.execute`: a concurrent Scheduler retry or a backfill
of the same fire time meets the same claim, so none runs twice. At most :data:`MAX_CATCH_UP_RUNS` fire times are
looked at, the newest of the window. Like Temporal's ``catchup_window``
(https://docs.temporal.io/schedule#catchup-window).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from scheduler_dedup.handler.schedule.cron.fire_times import fire_times
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.handler.stores.base import RunStore

#: Most fire times one delivery looks at (the newest of the window).
MAX_CATCH_UP_RUNS = 100


def key_at(key: RunKey, instant: datetime, wall_clock_zone: str | None) -> RunKey:
    """The run key of the same job at another scheduled instant (keyed on the wall clock when the job is)."""
    wall_clock = None
    if wall_clock_zone is not None:
        local = instant.astimezone(zoneinfo.ZoneInfo(wall_clock_zone))
        wall_clock = f"{local.replace(tzinfo=None).isoformat()} {wall_clock_zone}"
    return replace(key, schedule_time=instant, manual=False, wall_clock=wall_clock)


def missed_keys(store: RunStore, key: RunKey, *, schedule: str, time_zone: str, window_seconds: float,
                schedule_since: datetime | None, wall_clock_zone: str | None,
                pauses: Sequence[tuple[datetime, datetime | None]] = ()) -> Iterator[RunKey]:
    """The run keys of the window's fire times that have no record, oldest first; none when the fire time just
    before ``key``'s has a record (no gap). A fire time in one of ``pauses`` (``(since, until)``, until None while
    it lasts) is not run.

    Raises:
        StoreUnavailableError, StoreRefusedError: a read failed.
    """
    if window_seconds <= 0 or key.manual:
        return
    since = key.schedule_time - timedelta(seconds=window_seconds)
    if schedule_since is not None:
        since = max(since, schedule_since)
    fires = [fire for fire in fire_times(schedule, time_zone, since, key.schedule_time)
             if fire.first < key.schedule_time and not any(start <= fire.first and (end is None or fire.first < end)
                                                           for start, end in pauses)][-MAX_CATCH_UP_RUNS:]
    if not fires or _recorded(store, key, fires[-1].candidates, wall_clock_zone):
        return
    for fire in fires:
        if not _recorded(store, key, fire.candidates, wall_clock_zone):
            yield key_at(key, fire.first, wall_clock_zone)


def _recorded(store: RunStore, key: RunKey, instants: tuple[datetime, ...], wall_clock_zone: str | None) -> bool:
    return any(store.get(key_at(key, instant, wall_clock_zone).run_id) is not None for instant in instants)
