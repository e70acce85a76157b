"""The schedule, its time zone and the region: unix-cron (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules),
a tz database name (``Job.FIELDS.time_zone``), a region offering Cloud Scheduler and Cloud Run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.schedule_checks import time_zone_problem
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import required_str
from scheduler_dedup.infra.project.locations import region_problem


def validate_schedule(schedule: str) -> str:
    """Return ``schedule`` if it is a five-field unix-cron expression.

    Raises:
        DedupConfigError: groc (``every 5 minutes``), six-field, ``@hourly`` or invalid cron. Scheduler
            sends ``X-CloudScheduler-ScheduleTime`` only for unix-cron schedules
            (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules), and the handler
            keys runs on it.
    """
    problem = unix_cron_problem(schedule)
    if problem:
        raise DedupConfigError("schedule", problem)
    return " ".join(schedule.split())


def validate_time_zone(time_zone: str) -> str:
    """Return ``time_zone`` if it is an IANA tz database name (``Job.time_zone``).

    Raises:
        DedupConfigError: not a tz database name (the message suggests the closest zone name), or a fixed-offset abbreviation
            such as ``EST`` (UTC-5 all year; :func:`~scheduler_dedup.handler.schedule.time_zones.fixed_offset_abbreviation_problem`).
            An alias such as ``US/Eastern`` passes with an advisory (:func:`advisories_of`).
    """
    problem = time_zone_problem(time_zone)
    if problem:
        raise DedupConfigError("time_zone", problem)
    return time_zone


def resolve_region(args: Mapping[str, Any]) -> str:
    """The region of the Cloud Run service and the Scheduler job, offered by both (:mod:`scheduler_dedup.infra.project.locations`)."""
    region = required_str(args, "region", "a Cloud Run and Cloud Scheduler region such as 'us-central1'")
    problem = region_problem(region, ("Cloud Scheduler", "Cloud Run"))
    if problem:
        raise DedupConfigError("region", problem)
    return region
