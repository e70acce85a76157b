"""The catch-up window against the attempt deadline at preview: the component passes the deadline to the handler
(``DEDUP_ATTEMPT_DEADLINE_SECONDS``), fails when not one caught-up run fits the catch-up's share of it, and warns
when a full window takes more than one delivery; the policy pack's ``dedup-catch-up-budget`` says the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.handler.schedule.catch_up_budget import catch_up_advisory, catch_up_budget_seconds
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.environment import handler_environment
from scheduler_dedup.infra.job.settings import resolve_settings

HELLO = str(Path(__file__).resolve().parents[2] / "examples" / "hello_job")


def _args(**overrides: Any) -> dict[str, Any]:
    return {"schedule": "* * * * *", "region": "us-central1", "job_source": HELLO, "job": "jobs:run",
            "catch_up_window_seconds": 3600, **overrides}


def test_the_component_passes_the_attempt_deadline_with_a_catch_up_window() -> None:
    env = handler_environment(resolve_settings("nightly", _args(attempt_deadline_seconds=240), default_project="p1"))
    assert env["DEDUP_ATTEMPT_DEADLINE_SECONDS"] == "240"
    off = handler_environment(resolve_settings("nightly", _args(catch_up_window_seconds=0), default_project="p1"))
    assert "DEDUP_ATTEMPT_DEADLINE_SECONDS" not in off


def test_a_run_longer_than_the_catch_up_share_fails_preview_naming_the_fix() -> None:
    """alerts.max_runtime_seconds 120 against a 180 s deadline: one caught-up run (90 s of catch-up) cannot fit."""
    alerts = {"notification_channels": [], "max_runtime_seconds": 120}
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("nightly", _args(alerts=alerts), default_project="p1")
    assert info.value.field == "catch_up_window_seconds"
    assert "raise attempt_deadline_seconds to at least 240" in str(info.value)
    fits = resolve_settings("nightly", _args(alerts=alerts, attempt_deadline_seconds=300), default_project="p1")
    [advisory] = [a for a in fits.advisories if a.startswith("catch_up_window_seconds=")]
    assert "about 1 fire times a delivery" in advisory and "the rest on the next deliveries" in advisory


def test_a_window_that_fits_one_delivery_is_quiet_and_a_larger_one_is_an_advisory() -> None:
    quiet = resolve_settings("nightly", _args(), default_project="p1")  # 60 fire times at 1 s in 90 s
    assert not [a for a in quiet.advisories if "catch_up" in a]
    loud = resolve_settings("nightly", _args(attempt_deadline_seconds=60), default_project="p1")
    [advisory] = [a for a in loud.advisories if a.startswith("catch_up_window_seconds=")]
    assert "1 s a run (assumed" in advisory and "shorten catch_up_window_seconds to at most 1800" in advisory


@pytest.mark.parametrize(("window", "schedule", "deadline", "run", "expected"), [
    (0, "* * * * *", 15, 100.0, None),  # off
    (3600, "0 * * * *", 180, 60.0, None),  # one fire time, 60 s of 90 s
    (3600, "*/5 * * * *", 180, 10.0, False),  # 12 x 10 s > 90 s
    (3600, "*/5 * * * *", 180, 100.0, True),  # 100 s > 90 s: not one fits
])
def test_the_shared_rule(window: float, schedule: str, deadline: float, run: float, expected: bool | None) -> None:
    finding = catch_up_advisory(window, schedule, "Etc/UTC", deadline, run)
    assert (finding[1] if finding else None) is expected, finding
    assert catch_up_budget_seconds(deadline) == deadline / 2
