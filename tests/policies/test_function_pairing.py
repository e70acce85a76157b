"""Jobs and the functions they call: many functions share ``https://REGION-PROJECT.cloudfunctions.net``, so a job is
paired with its function by the function URL, and the watchdog's ``…/NAME/dedup/run-check`` is the run check (the
platform strips ``/NAME`` before the function sees the path)."""

from __future__ import annotations

import pytest

from scheduler_dedup.handler.callers.audience import routed_base, served_path
from scheduler_dedup.infra import DedupScheduledJob
from scheduler_dedup.infra.stack.mock_run import run_program
from scheduler_dedup.policies.offline.check import resources_from_registered
from scheduler_dedup.policies.reading.topology import Topology
from scheduler_dedup.policies.rules.base import _calls_run_check
from tests.paths import HELLO_JOB

FN = "https://us-central1-p1.cloudfunctions.net"


@pytest.mark.parametrize(("url", "base", "path"), [
    (f"{FN}/nightly", f"{FN}/nightly", "/"),
    (f"{FN}/nightly/dedup/run-check", f"{FN}/nightly", "/dedup/run-check"),
    ("https://svc-abc-uc.a.run.app/dedup/run-check", "https://svc-abc-uc.a.run.app", "/dedup/run-check"),
])
def test_a_function_url_routes_by_its_name_and_serves_the_rest_of_the_path(url: str, base: str, path: str) -> None:
    assert (routed_base(url), served_path(url)) == (base, path)


def test_two_functions_on_one_host_are_each_paired_with_their_own_jobs() -> None:
    def program() -> None:
        for name in ("nightly", "hourly"):
            DedupScheduledJob(name, {"schedule": "0 3 * * *", "region": "us-central1", "job_source": str(HELLO_JOB),
                                     "job": "jobs:run",
                                     "alerts": {"notification_channels": ["projects/p1/notificationChannels/1"]}})

    topology = Topology.of(resources_from_registered(run_program(program, {"gcp:project": "p1"})))
    pairs = {(p.job.name, p.service.name, p.how) for p in topology.pairings}
    assert pairs == {("nightly-job", "nightly-function", "url"), ("nightly-watchdog", "nightly-function", "url"),
                     ("hourly-job", "hourly-function", "url"), ("hourly-watchdog", "hourly-function", "url")}
    checks = {p.job.name: _calls_run_check(p.job) for p in topology.pairings}
    assert checks == {"nightly-job": False, "nightly-watchdog": True, "hourly-job": False, "hourly-watchdog": True}
