"""A job's settings given to a local command as options (``--schedule``, ``--time-zone``, ``--overlap``,
``--catch-up-window``), read by the functions the component calls at preview and the policy pack's rules are made
of: what ``pulumi preview`` or ``check`` refuses is refused here with the same message, and what they advise is
printed (:mod:`scheduler_dedup.handler.schedule.schedule_checks`,
:mod:`scheduler_dedup.handler.schedule.overlap_policy`)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from scheduler_dedup.handler.schedule.overlap_policy import catch_up_window_problem, overlap_policy_problem
from scheduler_dedup.handler.schedule.schedule_checks import schedule_advisories, schedule_problems

#: A setting's name (the component input's) -> the option that gives it.
OPTIONS = {"schedule": "--schedule", "time_zone": "--time-zone", "overlap": "--overlap",
           "catch_up_window_seconds": "--catch-up-window"}


def option_problems(schedule: str | None = None, time_zone: str | None = None, overlap: str | None = None,
                    catch_up_window: float | None = None) -> list[str]:
    """One line per option refused, each ``--option <why, with the fix>``; options given as None are not checked.

    ``schedule`` is checked with ``time_zone`` (default ``Etc/UTC``): :func:`~scheduler_dedup.handler.schedule.
    schedule_checks.schedule_problems`; ``overlap`` and ``catch_up_window`` (seconds) with the handler's rules.
    """
    found = []
    if schedule is not None or time_zone is not None:
        problems = schedule_problems(schedule if schedule is not None else "* * * * *", time_zone or "Etc/UTC")
        found += [f"{OPTIONS[key]} {message}" for key, message in problems.items()]
    if overlap is not None:
        problem = overlap_policy_problem(overlap, OPTIONS["overlap"])
        if problem:
            found.append(problem.replace("=", " ", 1))
    if catch_up_window is not None:
        problem = catch_up_window_problem(catch_up_window, OPTIONS["catch_up_window_seconds"])
        if problem:
            found.append(problem.replace("=", " ", 1))
    return found


def print_advisories(console: Console, schedule: str, time_zone: str) -> list[str]:
    """Print what ``check`` and ``pulumi preview`` would advise about the schedule and time zone (the same
    messages, :func:`~scheduler_dedup.handler.schedule.schedule_checks.schedule_advisories`), naming the option;
    returns the lines printed."""
    lines = []
    for message in schedule_advisories(schedule, time_zone):
        setting, _, text = message.partition(" ")
        lines.append(f"advisory: {OPTIONS.get(setting, setting)} {text}")
    for line in lines:
        console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)
    return lines
