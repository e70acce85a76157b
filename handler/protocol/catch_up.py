"""Catch-up: on a delivery after a gap, run the job's missed fire times of a window once each, through the claim.

With ``DEDUP_CATCH_UP_WINDOW_SECONDS`` above 0, a scheduled (not forced) delivery first reads the record of the
fire time just before its own (one read). When that one has none, or its delivery's catch-up ran out of time
(:data:`CATCH_UP_LEFT_FIELD`), the fire times of the window that have no record run oldest first, each under its
own run key, through :meth:`~scheduler_dedup.handler.protocol.idempotency.Idempotency.execute`, so none runs twice.

The window (:func:`catch_up_since`) is counted back from the store's clock, never from the delivery's schedule time
(a header its sender chooses); it never reaches before ``DEDUP_SCHEDULE_SINCE`` nor past the retention period, whose
records the TTL policy may have deleted. A pause (``DEDUP_PAUSED_SINCE`` until ``DEDUP_RESUMED_AT``) is no gap. At
most :data:`MAX_CATCH_UP_RUNS` fire times are looked at, the newest of the window. Like Temporal's
``catchup_window`` (https://docs.temporal.io/schedule#catchup-window). The bounds: docs/overlap-and-backfill.md.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scheduler_dedup.handler.core.record import RunRecord
from scheduler_dedup.handler.schedule.catch_up_budget import MAX_CATCH_UP_RUNS
from scheduler_dedup.handler.schedule.cron.fire_times import FireTime, fire_times
from scheduler_dedup.handler.schedule.run_key import RunKey
from scheduler_dedup.handler.stores.base import RunStore

#: Record field: the oldest fire time (aware UTC) the delivery's catch-up left unrun when its time ran out; the
#: next delivery, finding it on the record before its own, goes on with the window.
CATCH_UP_LEFT_FIELD = "catch_up_left"
#: Seconds kept clear of the retention bound: the store's clock as an instance measured it may be off by the
#: latency of the answer it measured it from, and the TTL stamp was written by an instance's measure too.
RETENTION_MARGIN_SECONDS = 60.0


@dataclass(frozen=True)
class CatchUpBounds:
    """What bounds one delivery's catch-up window; durations in seconds.

    Attributes:
        window_seconds: ``DEDUP_CATCH_UP_WINDOW_SECONDS``, counted back from the store's clock.
        retention_seconds: ``DEDUP_RETENTION_SECONDS``: older fire times' records may have expired.
        schedule_since: ``DEDUP_SCHEDULE_SINCE`` (aware UTC), or None when unknown.
        pauses: ``(since, until)`` of the stack's pause (until None while it lasts); its fire times never run.
    """

    window_seconds: float
    retention_seconds: float
    schedule_since: datetime | None = None
    pauses: Sequence[tuple[datetime, datetime | None]] = ()


def catch_up_since(now: datetime, bounds: CatchUpBounds) -> datetime:
    """The earliest fire time (aware UTC) a catch-up may run at ``now`` (the store's clock): the window counted
    back from ``now``, after ``schedule_since`` and inside the retention period (less
    :data:`RETENTION_MARGIN_SECONDS`): a record is created no earlier than its fire time and stamped to expire
    ``retention_seconds`` after its last write, so a younger fire time's record is still there if it ever ran."""
    since = max(now - timedelta(seconds=bounds.window_seconds),
                now - timedelta(seconds=bounds.retention_seconds - RETENTION_MARGIN_SECONDS))
    return since if bounds.schedule_since is None else max(since, bounds.schedule_since)


def key_at(key: RunKey, instant: datetime, wall_clock_zone: str | None) -> RunKey:
    """The run key of the same job at another scheduled instant (keyed on the wall clock when the job is)."""
    wall_clock = None
    if wall_clock_zone is not None:
        local = instant.astimezone(zoneinfo.ZoneInfo(wall_clock_zone))
        wall_clock = f"{local.replace(tzinfo=None).isoformat()} {wall_clock_zone}"
    return replace(key, schedule_time=instant, manual=False, wall_clock=wall_clock)


def missed_keys(store: RunStore, key: RunKey, *, schedule: str, time_zone: str, bounds: CatchUpBounds,
                wall_clock_zone: str | None) -> Iterator[RunKey]:
    """The run keys of the window's fire times before ``key``'s that have no record, oldest first; none when the
    fire time just before ``key``'s has a record its delivery finished catching up for (no gap).

    The window is :func:`catch_up_since` at the store's clock after the first read, so a delivery whose schedule
    time is older than the window (or the retention period) catches nothing up.

    Raises:
        StoreUnavailableError, StoreRefusedError: a read failed.
    """
    if bounds.window_seconds <= 0 or key.manual:
        return
    # Before any read, a superset: the store's clock is at least the schedule time less the forced-run tolerance.
    start = key.schedule_time - timedelta(seconds=bounds.window_seconds)
    fires = _fires(schedule, time_zone, start if bounds.schedule_since is None else max(start, bounds.schedule_since),
                   key.schedule_time, bounds.pauses)
    if not fires:
        return
    before = _record_of(store, key, fires[-1], wall_clock_zone)
    if before is not None and before.data.get(CATCH_UP_LEFT_FIELD) is None:
        return
    since = catch_up_since(store.server_now(), bounds)  # the store's clock, as its answer just told it
    for fire in fires:
        if fire.first >= since and (fire is not fires[-1] or before is None) \
                and _record_of(store, key, fire, wall_clock_zone) is None:
            yield key_at(key, fire.first, wall_clock_zone)


def _fires(schedule: str, time_zone: str, since: datetime, until: datetime,
           pauses: Sequence[tuple[datetime, datetime | None]]) -> list[FireTime]:
    """The fire times in ``[since, until)`` outside ``pauses``, the newest :data:`MAX_CATCH_UP_RUNS`."""
    return [fire for fire in fire_times(schedule, time_zone, since, until)
            if fire.first < until and not any(start <= fire.first and (end is None or fire.first < end)
                                              for start, end in pauses)][-MAX_CATCH_UP_RUNS:]


def _record_of(store: RunStore, key: RunKey, fire: FireTime, wall_clock_zone: str | None) -> RunRecord | None:
    for instant in fire.candidates:
        record = store.get(key_at(key, instant, wall_clock_zone).run_id)
        if record is not None:
            return record
    return None
