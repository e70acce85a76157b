"""The previous fire time of a run: the start of its data interval, as Airflow passes each run its data interval
(https://airflow.apache.org/docs/apache-airflow/stable/core-concepts/dag-run.html, "Data Interval") and Kubernetes
CronJob users ask for the last schedule time (docs/how-it-works.md, "The run's interval").

Evaluated on the job's wall clock in its time zone (:func:`~scheduler_dedup.handler.schedule.cron.fire_times.fire_times`),
so an interval across a daylight saving change is that day's real length (23 or 25 hours for a daily job).
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta

from scheduler_dedup.handler.schedule.cron.fire_times import fire_times

#: How far back the previous fire time is looked for, days (a 29 February schedule fires every 4 to 8 years).
LOOKBACK_DAYS = 8 * 366


@functools.lru_cache(maxsize=256)
def previous_fire_time(schedule: str, time_zone: str, instant: datetime) -> datetime | None:
    """The latest instant before ``instant`` (aware) of a fire time of ``schedule`` in ``time_zone`` other than the
    one ``instant`` belongs to; None when there is none within :data:`LOOKBACK_DAYS`.

    A fire time that occurs twice when clocks go back counts as one wall-clock time, at its later instant; one
    only some readings of an unsettled schedule fire at (:attr:`FireTime.ambiguous`) is not counted.

    Raises:
        ValueError: the schedule or time zone is invalid, or ``instant`` is naive.
    """
    span = timedelta(days=1)
    while True:
        since = instant - span
        before = [max(c for c in fire.candidates if c < instant)
                  for fire in fire_times(schedule, time_zone, since, instant)
                  if not fire.ambiguous and instant not in fire.candidates]
        if before:
            return max(before)
        if span >= timedelta(days=LOOKBACK_DAYS):
            return None
        span = min(span * 8, timedelta(days=LOOKBACK_DAYS))
