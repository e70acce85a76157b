"""The overlap campaign: runs of one job faster than they finish, faults on every store call (the overlap lease's
included), on each store; the invariants hold under ``skip`` and catch ``allow``."""

from __future__ import annotations

import pytest
from rich.console import Console

from scheduler_dedup.local.campaigns.scenarios import CampaignConfig
from scheduler_dedup.local.campaigns.overlap import run_overlap_campaign
from scheduler_dedup.local.servers.store_servers import SERVER_KINDS, StoreServer, store_server

pytestmark = pytest.mark.campaign


@pytest.fixture(params=SERVER_KINDS)
def server(request: pytest.FixtureRequest) -> StoreServer:  # type: ignore[misc]
    if request.param == "firestore":
        yield request.getfixturevalue("firestore_emulator")
    elif request.param == "redis":
        yield request.getfixturevalue("redis_server")
    else:
        with store_server(request.param) as started:
            yield started


def test_under_skip_no_two_runs_of_a_job_execute_at_once_under_store_faults(server: StoreServer) -> None:
    console = Console(record=True, width=200)
    report = run_overlap_campaign(CampaignConfig(scenarios=10, seed=20261203, fault_rate=0.15, concurrency=5),
                                  server, console)
    assert not report.violations, console.export_text()
    assert report.lease_faults > 0  # faults did reach the overlap lease's calls
    statuses = [r.get("status") for result in report.results for r in result.records.values() if r]
    assert "completed" in statuses and "skipped_overlap" in statuses


def test_the_invariants_catch_runs_that_overlap(firestore_emulator: StoreServer) -> None:
    report = run_overlap_campaign(CampaignConfig(scenarios=4, seed=7, fault_rate=0.0), firestore_emulator,
                                  Console(quiet=True), policy="allow")
    assert any("started while" in v for _, v in report.violations), report.violations
