"""A first ``pulumi up`` on a fresh project, under Pulumi mocks: every resource waits until the APIs it uses are
usable, not merely enabled, and the alert policies on log-based metrics wait until their metrics exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_dedup.infra import DedupScheduledJob
from scheduler_dedup.infra.job.alerts import METRICS_READY_SECONDS
from scheduler_dedup.infra.args import DedupScheduledJobArgs
from scheduler_dedup.infra.project.apis import API_PROPAGATION_SECONDS
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program, run_stack_config

ROOT = Path(__file__).resolve().parents[2]
HELLO = str(ROOT / "examples" / "hello_job")
API = "gcp:projects/service:Service"
SLEEP = "time:index/sleep:Sleep"
POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
#: Resources that call no Google API of the project: the clock, the component, and reads of what exists already.
NO_API = {SLEEP, "time:index/static:Static", "scheduler-dedup:index:DedupScheduledJob",
          "gcp:appengine/application:Application"}


def _waits_for(resources: list[RegisteredResource], urn: str) -> set[str]:
    """URNs of the resources that wait for ``urn``, directly or through others."""
    waiting, grew = {urn}, True
    while grew:
        grew = False
        for r in resources:
            if r.urn not in waiting and waiting & set(r.dependencies):
                waiting.add(r.urn)
                grew = True
    return waiting - {urn}


def _check_apis_usable(resources: list[RegisteredResource]) -> None:
    apis = [r for r in resources if r.type == API]
    (sleep,) = [r for r in resources if r.type == SLEEP and r.name.endswith("-apis-usable")]
    assert sleep.inputs["createDuration"] == f"{API_PROPAGATION_SECONDS}s" == "60s"
    assert {a.urn for a in apis} <= set(sleep.dependencies), "the wait starts once every API is enabled"
    assert sleep.inputs["triggers"]["apis"] == ",".join(sorted(a.inputs["service"] for a in apis))
    direct = [r.name for r in resources if r.type != SLEEP and {a.urn for a in apis} & set(r.dependencies)]
    assert direct == [], f"these wait only for 'enabled', not for 'usable': {direct}"
    after = _waits_for(resources, sleep.urn)
    using = [r for r in resources if r.custom and r.type not in NO_API and r.type != API and r.urn not in after]
    assert using == [], [(r.type, r.name) for r in using]


def test_every_resource_of_the_example_stack_waits_until_its_apis_are_usable() -> None:
    _check_apis_usable(run_stack_config(ROOT / "Pulumi.example.yaml"))


def test_every_resource_of_the_real_job_waits_until_its_apis_are_usable() -> None:
    resources = run_stack_config(ROOT / "Pulumi.example-nightly-report.yaml")
    _check_apis_usable(resources)
    assert "secretmanager.googleapis.com" in {r.inputs["service"] for r in resources if r.type == API}


def test_app_engine_resources_wait_until_their_apis_are_usable() -> None:
    _check_apis_usable(run_stack_config(ROOT / "Pulumi.example-app-engine.yaml"))


def test_alert_policies_on_log_based_metrics_wait_until_the_metrics_exist() -> None:
    args: DedupScheduledJobArgs = {"schedule": "*/15 * * * *", "region": "us-central1", "job_source": HELLO,
                                   "job": "jobs:run", "alerts": {"notification_channels": ["projects/p1/notificationChannels/1"]}}
    resources = run_program(lambda: DedupScheduledJob("nightly", args), {"gcp:project": "p1"})
    metrics = [r for r in resources if r.type == "gcp:logging/metric:Metric"]
    (ready,) = [r for r in resources if r.type == SLEEP and r.name == "nightly-metrics-ready"]
    assert ready.inputs["createDuration"] == f"{METRICS_READY_SECONDS}s" == "600s"
    assert {m.urn for m in metrics} <= set(ready.dependencies)
    policies = {r.name: r for r in resources if r.type == POLICY}
    on_metrics = {n for n, p in policies.items() if "logging.googleapis.com/user/" in str(p.inputs["conditions"])}
    assert on_metrics == {"nightly-alert-released", "nightly-alert-watchdog-silent", "nightly-alert-deliveries-stopped"}
    for name in on_metrics:
        assert ready.urn in policies[name].dependencies, name
    for name in set(policies) - on_metrics:  # log-match policies read logs, not metrics: no wait added
        assert ready.urn not in policies[name].dependencies, name


@pytest.mark.parametrize("config", ["Pulumi.example-store.yaml", "Pulumi.example-spanner-store.yaml",
                                    "Pulumi.example-memorystore-store.yaml"])
def test_every_resource_of_a_store_stack_waits_until_its_apis_are_usable(config: str) -> None:
    """The DedupStore's own children (its database, instance, secrets, TTL fields, indexes) waited only for
    "enabled": a fresh project answered the first of them with 403."""
    resources = run_stack_config(ROOT / config)
    assert any(r.type == "scheduler-dedup:index:DedupStore" for r in resources)
    _check_apis_usable(resources)


def test_a_job_on_a_store_stack_enables_nothing_and_adds_no_wait() -> None:
    store = run_stack_config(ROOT / "Pulumi.example-store.yaml")
    resources = run_stack_config(ROOT / "Pulumi.example-job-on-store.yaml",
                                 stack_outputs={"acme/scheduler-dedup/store": store.exports})
    assert not [r for r in resources if r.type in (API, SLEEP) and "metrics" not in r.name]
