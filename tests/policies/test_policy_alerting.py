"""The dedup-job-alerting rule on hand-written resources (engine-shaped, camelCase), as the pack sees them."""

from __future__ import annotations

from typing import Any

from scheduler_dedup.handler.core.paths import CHECK_PATH
from scheduler_dedup.infra.job.log_query import missed_run_clause
from scheduler_dedup.policies.reading.model import UNKNOWN, Resource
from scheduler_dedup.policies.rules import RULES_BY_NAME, evaluate

JOB = "gcp:cloudscheduler/job:Job"
SERVICE = "gcp:cloudrunv2/service:Service"
POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
URL = "https://svc-abc-ew.a.run.app"


def res(typ: str, name: str, props: dict[str, Any]) -> Resource:
    return Resource(type=typ, name=name, urn=f"urn:pulumi:s::p::{typ}::{name}", props=props)


def job(name: str = "nightly", uri: Any = URL) -> Resource:
    return res(JOB, name, {"schedule": "0 3 * * *", "httpTarget": {"uri": uri, "httpMethod": "POST"}})


def service(name: Any = "svc") -> Resource:
    return res(SERVICE, "svc", {"name": name, "uri": URL,
                                "template": {"containers": [{"envs": [{"name": "DEDUP_COLLECTION", "value": "runs"}]}]}})


def policy(text: Any) -> Resource:
    return res(POLICY, "missed", {"conditions": [{"conditionMatchedLog": {"filter": text}}]})


def findings(resources: list[Resource]) -> list[str]:
    return [f.message for f in evaluate(resources, rules=[RULES_BY_NAME["dedup-job-alerting"]])]


def missed_filter(service_name: str = "svc") -> str:
    return f'resource.type="cloud_run_revision" AND resource.labels.service_name="{service_name}" AND {missed_run_clause()}'


def test_a_watchdog_and_a_missed_run_policy_on_the_service_pass() -> None:
    assert findings([job(), job("watchdog", URL + CHECK_PATH), service(), policy(missed_filter())]) == []


def test_each_missing_piece_is_named_with_the_fix() -> None:
    (no_watchdog,) = findings([job(), service(), policy(missed_filter())])
    assert CHECK_PATH in no_watchdog and "alert policy" not in no_watchdog and "notification_channels" in no_watchdog
    (no_policy,) = findings([job(), job("watchdog", URL + CHECK_PATH), service()])
    assert "missed_run" in no_policy and "watchdog" not in no_policy
    (neither,) = findings([job(), service()])
    assert CHECK_PATH in neither and "missed_run" in neither and "nightly" in neither


def test_a_policy_on_another_service_or_another_event_does_not_count() -> None:
    assert findings([job(), job("watchdog", URL + CHECK_PATH), service(), policy(missed_filter("other"))])
    other_event = 'resource.labels.service_name="svc" AND jsonPayload.event="delivery"'
    assert findings([job(), job("watchdog", URL + CHECK_PATH), service(), policy(other_event)])


def test_unknown_values_during_preview_do_not_violate() -> None:
    assert findings([job(uri=UNKNOWN), service(), policy(missed_filter())]) == []
    assert findings([job(), job("watchdog", URL + CHECK_PATH), service(), policy(UNKNOWN)]) == []
    assert findings([job(), job("watchdog", URL + CHECK_PATH), service(name=UNKNOWN), policy(missed_filter("x"))]) == []


def test_a_service_no_job_calls_needs_no_alerting() -> None:
    assert findings([service()]) == []
