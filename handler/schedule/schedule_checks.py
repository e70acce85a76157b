"""A job's schedule and time zone as every reader reads them: what is refused (:func:`schedule_problems`) and what
is advised (:func:`schedule_advisories`). The component at preview, ``run-local`` and ``backfill`` call these, and
the policy pack's rules the functions they are made of, so each says the same thing in the same words.

Sources: unix-cron (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules); ``Job.time_zone``, a
tz database name (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs).
"""

from __future__ import annotations

from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.cron.oversized_steps import oversized_step_forms
from scheduler_dedup.handler.schedule.cron.readings import unsettled_cron_forms
from scheduler_dedup.handler.schedule.time_zones import (fixed_offset_abbreviation_problem, is_iana_time_zone,
                                                         time_zone_alias_advisory, time_zone_suggestion)


def time_zone_problem(time_zone: str) -> str | None:
    """Why ``time_zone`` is refused, or None: not a tz database name (with the closest name,
    :func:`~scheduler_dedup.handler.schedule.time_zones.time_zone_suggestion`), or a fixed-offset abbreviation
    such as ``EST`` (:func:`~scheduler_dedup.handler.schedule.time_zones.fixed_offset_abbreviation_problem`)."""
    if not is_iana_time_zone(time_zone):
        return f"{time_zone!r} is not an IANA time zone name; {time_zone_suggestion(time_zone)}"
    return fixed_offset_abbreviation_problem(time_zone)


def schedule_problems(schedule: str, time_zone: str) -> dict[str, str]:
    """What is refused in a schedule and its time zone: ``{"schedule": why, "time_zone": why}``, each key present
    only when that value is refused (:func:`~scheduler_dedup.handler.schedule.cron.accepted.unix_cron_problem`,
    :func:`time_zone_problem`); each message names the fix."""
    found = {"schedule": unix_cron_problem(schedule), "time_zone": time_zone_problem(time_zone)}
    return {key: message for key, message in found.items() if message}


def schedule_advisories(schedule: str, time_zone: str) -> list[str]:
    """What a schedule and time zone Scheduler accepts do that a user would want to know, each message starting
    with the setting it is about (``schedule ...``, ``time_zone ...``): a form Cloud Scheduler's cron page leaves
    open (pack: ``scheduler-schedule-unsettled``), a step that selects one value of its range so the job runs less
    often than it reads (``*/90 * * * *`` runs hourly; pack: ``scheduler-schedule-step``), a time zone alias (pack:
    ``scheduler-time-zone-canonical``). Nothing for values :func:`schedule_problems` refuses."""
    problems = schedule_problems(schedule, time_zone)
    found = []
    if "schedule" not in problems:
        found += [f"schedule {message}" for message in (*unsettled_cron_forms(schedule),
                                                        *oversized_step_forms(schedule))]
    alias = time_zone_alias_advisory(time_zone) if "time_zone" not in problems else None
    if alias:
        found.append(f"time_zone {alias}")
    return found
