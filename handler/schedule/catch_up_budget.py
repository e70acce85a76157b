"""How much of a delivery's attempt deadline its catch-up may spend, and the preview's check of the catch-up window
against a run's expected length and the attempt deadline: one function each, which the handler
(:mod:`scheduler_dedup.handler.service.delivery`), the component and the policy pack all call.

Cloud Scheduler ends an attempt at its attempt deadline and retries it
(https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.attempt_deadline), so a
catch-up that outlives the delivery delays the delivery's own run by a retry. The story: docs/overlap-and-backfill.md.
"""

from __future__ import annotations

import math

from scheduler_dedup.handler.schedule.cron.gaps import fire_gaps
from scheduler_dedup.handler.schedule.retry_windows import ATTEMPT_DEADLINES, HTTP_TARGET

#: Share of the attempt deadline one delivery's catch-up may spend; the rest is the delivery's own run's.
CATCH_UP_SHARE = 0.5
#: The attempt deadline a handler without ``DEDUP_ATTEMPT_DEADLINE_SECONDS`` assumes, seconds: Scheduler's default
#: for HTTP targets ("For HTTP targets, the default is 3 minutes", REST ``Job.attemptDeadline``).
DEFAULT_ATTEMPT_DEADLINE_SECONDS = float(ATTEMPT_DEADLINES[HTTP_TARGET].default_seconds)
#: A Python job's run length assumed at preview when none is given, seconds (the handler measures the real one).
ASSUMED_RUN_SECONDS = 1.0
#: Most fire times one delivery's catch-up looks at (the newest of the window).
MAX_CATCH_UP_RUNS = 100


def catch_up_budget_seconds(attempt_deadline_seconds: float) -> float:
    """Seconds of a delivery, from its arrival, its catch-up may spend: :data:`CATCH_UP_SHARE` of the attempt
    deadline. The handler starts no caught-up run that, at the length of its longest so far, would end later."""
    return CATCH_UP_SHARE * attempt_deadline_seconds


def catch_up_advisory(window_seconds: float, schedule: str, time_zone: str, attempt_deadline_seconds: float,
                      run_seconds: float | None, setting: str = "catch_up_window_seconds",
                      deadline_setting: str = "attempt_deadline_seconds") -> tuple[str, bool] | None:
    """The finding when a gap as long as the catch-up window cannot be caught up within one delivery, or None.

    Args:
        window_seconds: the catch-up window (0: off, None returned).
        schedule, time_zone: the job's unix-cron schedule and tz database zone (unreadable: None returned).
        attempt_deadline_seconds: the Scheduler job's attempt deadline.
        run_seconds: the longest a run is expected to take (a proxy target: its call's timeout), or None for a
            Python job: :data:`ASSUMED_RUN_SECONDS` is assumed and the message says so.
        setting, deadline_setting: the window's and the deadline's names in the message.

    Returns:
        ``(message, is_error)``: an error when not even one run fits the catch-up's share of the deadline (the
        delivery would then outlive its attempt deadline); an advisory when a full window takes more than one
        delivery (the rest goes on with the next ones). Each names the fix.
    """
    if window_seconds <= 0:
        return None
    try:
        gap = fire_gaps(schedule, time_zone).smallest_seconds
    except ValueError:
        return None
    runs = min(MAX_CATCH_UP_RUNS, math.floor(window_seconds / gap))
    budget = catch_up_budget_seconds(attempt_deadline_seconds)
    each = ASSUMED_RUN_SECONDS if run_seconds is None else run_seconds
    assumed = (f"{each:g} s a run (assumed: a Python job's length is not an input; the handler measures it)"
               if run_seconds is None else f"up to {each:g} s a run")
    if runs < 1 or runs * each <= budget:
        return None
    if each > budget:
        return (f"{setting}={window_seconds:g}: at {assumed}, not one caught-up run fits the {budget:g} s of the "
                f"{attempt_deadline_seconds:g} s attempt deadline a delivery spends on catch-up, so a delivery after "
                f"a gap outlives its attempt deadline: raise {deadline_setting} to at least "
                f"{math.ceil(each / CATCH_UP_SHARE)}, or set {setting} to 0", True)
    per_delivery = math.floor(budget / each)
    return (f"{setting}={window_seconds:g} holds up to {runs} fire times (schedule {schedule!r}), {runs * each:g} s "
            f"at {assumed}, but a delivery spends at most {budget:g} s ({CATCH_UP_SHARE:g} of the "
            f"{attempt_deadline_seconds:g} s attempt deadline) on catch-up: a full gap is caught up about "
            f"{per_delivery} fire times a delivery, the rest on the next deliveries, and fire times that leave the "
            f"window first are reported missed. To catch a full window up at once, shorten {setting} to at most "
            f"{math.floor(per_delivery * gap)} or raise {deadline_setting} to at least "
            f"{math.ceil(runs * each / CATCH_UP_SHARE)}", False)
