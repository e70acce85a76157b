"""The catch-up window against the attempt deadline at preview: an error when not one caught-up run fits the share of
the deadline a delivery spends on catch-up, an advisory when a full window takes more than one delivery
(:func:`scheduler_dedup.handler.schedule.catch_up_budget.catch_up_advisory`, which the policy pack's
``dedup-catch-up-budget`` calls too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.schedule.catch_up_budget import catch_up_advisory
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.resolved import DedupSettings


def expected_run_seconds(args: Mapping[str, Any], target_type: str) -> int | None:
    """The longest a run is expected to take, seconds: a Python job's ``alerts.max_runtime_seconds`` (the input that
    says so), else None (a proxy target's run is one start call; the advisory then says what it assumes)."""
    alerts = args.get("alerts")
    runtime = alerts.get("max_runtime_seconds") if isinstance(alerts, Mapping) else None
    if target_type != "python" or isinstance(runtime, bool) or not isinstance(runtime, int) or runtime <= 0:
        return None
    return runtime


def catch_up_finding(s: DedupSettings) -> tuple[str, bool] | None:
    """``(message, is_error)`` for the settings' catch-up window, or None (see the module docstring)."""
    return catch_up_advisory(s.catch_up_window_seconds, s.schedule, s.time_zone, s.attempt_deadline_seconds,
                             s.expected_run_seconds)


def catch_up_error(s: DedupSettings) -> DedupConfigError | None:
    """The finding when it is an error, naming ``catch_up_window_seconds``."""
    finding = catch_up_finding(s)
    return DedupConfigError("catch_up_window_seconds", finding[0]) if finding and finding[1] else None


def catch_up_advisories(s: DedupSettings) -> list[str]:
    """The finding when it is an advisory."""
    finding = catch_up_finding(s)
    return [finding[0]] if finding and not finding[1] else []
