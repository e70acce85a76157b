"""Builders for the rule tests (test_rules_*.py, one per module of scheduler_dedup.policies.rules): engine-shaped
(camelCase) resources, a compliant stack, and one rule run the way the policy engine would."""

from __future__ import annotations

from typing import Any

from scheduler_dedup.policies.reading.model import Resource
from scheduler_dedup.policies.rules import RULES_BY_NAME, Finding, evaluate


JOB = "gcp:cloudscheduler/job:Job"
SERVICE = "gcp:cloudrunv2/service:Service"
FIELD = "gcp:firestore/field:Field"
RUN_URL = "https://svc-abc-ew.a.run.app"


def res(typ: str, name: str, props: dict[str, Any], deps: dict[str, list[str]] | None = None) -> Resource:
    return Resource(type=typ, name=name, urn=f"urn:pulumi:s::p::{typ}::{name}", props=props, dependencies=deps or {})


def job(**props: Any) -> Resource:
    base: dict[str, Any] = {"schedule": "*/15 * * * *", "timeZone": "Etc/UTC", "attemptDeadline": "180s",
                            "httpTarget": {"uri": RUN_URL, "httpMethod": "POST",
                                           "oidcToken": {"serviceAccountEmail": "sched@p.iam.gserviceaccount.com",
                                                         "audience": RUN_URL}}}
    base.update(props)
    return res(JOB, "job", base)


def service(env: dict[str, str] | None = None, timeout: Any = "300s", **props: Any) -> Resource:
    envs = [{"name": k, "value": v} for k, v in (env if env is not None else {"DEDUP_COLLECTION": "scheduler_runs"}).items()]
    base: dict[str, Any] = {"uri": RUN_URL, "template": {"timeout": timeout, "containers": [{"image": "i", "envs": envs}]}}
    base.update(props)
    return res(SERVICE, "svc", base)


def ttl_field(**props: Any) -> Resource:
    base: dict[str, Any] = {"collection": "scheduler_runs", "field": "expire_at", "database": "(default)", "ttlConfig": {},
                            "indexConfig": {}}
    base.update(props)
    return res(FIELD, "ttl", base)


def run(rule: str, resources: list[Resource], config: dict[str, Any] | None = None) -> list[Finding]:
    policy_config = {rule: config} if config is not None else None
    return evaluate(resources, policy_config, rules=[RULES_BY_NAME[rule]])


def good_stack() -> list[Resource]:
    return [job(), service(), ttl_field()]


def public_config_job(min_backoff: str) -> Resource:
    return job(retryConfig={"minBackoffDuration": min_backoff, "maxBackoffDuration": "0s", "maxRetryDuration": "3600s"})
