"""The pack on the component's other shapes: App Engine as the Scheduler target, and a Cloud Build trigger target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.infra import DedupScheduledJob
from scheduler_dedup.policies.reading.model import UNKNOWN, Resource
from scheduler_dedup.policies.offline.check import check_program, check_stack_config
from scheduler_dedup.policies.rules import RULES, RULES_BY_NAME, Finding, evaluate
from scheduler_dedup.policies.reading.topology import Topology
from tests.paths import ROOT, HELLO_JOB

JOB = "gcp:cloudscheduler/job:Job"
VERSION = "gcp:appengine/standardAppVersion:StandardAppVersion"
TRIGGER = "projects/builds-p/locations/us-east1/triggers/nightly"
EVERY = {rule.name: "mandatory" for rule in RULES}  # advisory rules raised, so none is skipped


def res(typ: str, name: str, props: dict[str, Any]) -> Resource:
    return Resource(type=typ, name=name, urn=f"urn:pulumi:s::p::{typ}::{name}", props=props, dependencies={})


def ae_job(name: str = "job", **props: Any) -> Resource:
    base: dict[str, Any] = {"schedule": "0 2 * * *", "timeZone": "Etc/UTC", "attemptDeadline": "300s",
                            "retryConfig": {"retryCount": 5, "minBackoffDuration": "30s", "maxBackoffDuration": "3600s",
                                            "maxDoublings": 5, "maxRetryDuration": "0s"},
                            "appEngineHttpTarget": {"relativeUri": "/run", "httpMethod": "POST",
                                                    "appEngineRouting": {"service": "dedup", "version": "v1"}}}
    base.update(props)
    return res(JOB, name, base)


def version(env: dict[str, str] | None = None, name: str = "ver", **props: Any) -> Resource:
    base: dict[str, Any] = {"service": "dedup", "versionId": "v1", "runtime": "python312",
                            "serviceAccount": "runtime@p.iam.gserviceaccount.com",
                            "envVariables": env if env is not None else {
                                "GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "600",
                                "DEDUP_APP_ENGINE_CALLER": "true"}}
    base.update(props)
    return res(VERSION, name, base)


def run(rule: str, resources: list[Resource], config: dict[str, Any] | None = None) -> list[Finding]:
    return evaluate(resources, {rule: config} if config is not None else None, rules=[RULES_BY_NAME[rule]])


# -- scheduler-attempt-deadline: App Engine's range, from the one table the component uses -----------------------

def test_app_engine_attempt_deadline_is_checked_against_15_s_to_24_h() -> None:
    rule = "scheduler-attempt-deadline"
    assert run(rule, [ae_job(attemptDeadline="15s"), ae_job(attemptDeadline="86400s"), ae_job(attemptDeadline="1900s")]) == []
    assert run(rule, [ae_job(attemptDeadline="0s"), ae_job(attemptDeadline=None), ae_job(attemptDeadline=UNKNOWN)]) == [], \
        "0s and unset mean the service's default deadline"
    [high] = run(rule, [ae_job(attemptDeadline="86401s")])
    assert "outside 15s to 86400s for an App Engine target" in high.message and "\"86400s\"" in high.message
    [low] = run(rule, [ae_job(attemptDeadline="10s")])
    assert "\"15s\"" in low.message
    # the HTTP range's maxSeconds does not cap an App Engine target; appEngineMaxSeconds does
    assert run(rule, [ae_job(attemptDeadline="1900s")], {"maxSeconds": 600}) == []
    assert run(rule, [ae_job(attemptDeadline="1900s")], {"appEngineMaxSeconds": 600})


# -- the retry-window rules pair an App Engine job with its version ----------------------------------------------

def test_an_app_engine_job_is_paired_with_the_version_its_routing_names() -> None:
    other = version(name="other", versionId="v2")
    topology = Topology.of([ae_job(), version(), other, ae_job("elsewhere", appEngineHttpTarget={
        "relativeUri": "/", "appEngineRouting": {"service": "another"}})])
    [pairing] = topology.pairings
    assert (pairing.job.name, pairing.service.name, pairing.how) == ("job", "ver", "url")
    # without a version in the routing: the service's only version of the stack
    [unversioned] = Topology.of([ae_job(appEngineHttpTarget={"relativeUri": "/", "appEngineRouting": {
        "service": "dedup"}}), version()]).pairings
    assert unversioned.service.name == "ver"
    # no routing service means App Engine's "default" service
    [default] = Topology.of([ae_job(appEngineHttpTarget={"relativeUri": "/"}), version(service="default")]).pairings
    assert default.service.name == "ver"


def test_the_lease_covers_app_engines_request_deadline() -> None:
    short = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "300"}
    [finding] = run("dedup-lease-covers-deadline", [ae_job(), version(short)])
    assert "DEDUP_LEASE_SECONDS=300 is shorter than the request timeout 600s" in finding.message
    # basic (and manual) scaling: a 24 h deadline
    [basic] = run("dedup-lease-covers-deadline", [ae_job(), version(basicScaling={"maxInstances": 1})])
    assert "86400s" in basic.message
    assert run("dedup-lease-covers-deadline", [ae_job(), version()]) == []
    [longer] = run("dedup-lease-covers-deadline", [ae_job(attemptDeadline="900s"), version()])
    assert "attemptDeadline 900s of job job is longer than service ver's request timeout 600s" in longer.message


def test_retention_and_crash_recovery_are_checked_for_app_engine_jobs_as_for_http_ones() -> None:
    env = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "600",
           "DEDUP_RETENTION_SECONDS": "3000"}
    # attemptDeadline 300 s: 6 attempts x 300 s + waits 30 + 60 + 120 + 240 + 480 s = 2730 s, within 3000 s
    assert run("dedup-retention-covers-retries", [ae_job(), version(env)]) == []
    [retention] = run("dedup-retention-covers-retries", [ae_job(attemptDeadline="600s"), version(env)])
    assert "DEDUP_RETENTION_SECONDS=3000 of service ver is shorter than job job's retry window 4530s" in retention.message
    # unset, an App Engine target's deadline is the service's default, 600 s (an HTTP target's 180 s would fit)
    [unset] = run("dedup-retention-covers-retries", [ae_job(attemptDeadline=None), version(env)])
    assert "retry window 4530s" in unset.message
    [crash] = run("dedup-retries-outlast-lease", [ae_job(retryConfig={"retryCount": 0}), version()])
    assert "a crashed attempt holds the run for up to DEDUP_LEASE_SECONDS=600" in crash.message


def test_the_handler_settings_rule_reads_an_app_engine_versions_environment() -> None:
    both = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run", "DEDUP_APP_ENGINE_CALLER": "true",
            "DEDUP_OIDC_AUDIENCE": "https://x.invalid", "DEDUP_ALLOWED_CALLERS": "s@p.iam.gserviceaccount.com"}
    [finding] = run("dedup-handler-settings", [version(both)])
    assert "DEDUP_APP_ENGINE_CALLER=true and DEDUP_OIDC_AUDIENCE" in finding.message
    bad_trigger = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_TARGET_TYPE": "cloud_build_trigger",
                   "DEDUP_TARGET": "projects/p/triggers/t", "DEDUP_APP_ENGINE_CALLER": "true"}
    [target] = run("dedup-handler-settings", [version(bad_trigger)])
    assert "is not a Cloud Build trigger name" in target.message


# -- dedup-cloud-build-trigger-grant ------------------------------------------------------------------------------

def _grant(role: str = "roles/cloudbuild.builds.editor", project: str = "builds-p", **props: Any) -> Resource:
    return res("gcp:projects/iAMMember:IAMMember", f"grant-{role}-{project}",
               {"project": project, "role": role, "member": "serviceAccount:runtime@p.iam.gserviceaccount.com", **props})


TRIGGER_ENV = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_TARGET_TYPE": "cloud_build_trigger", "DEDUP_TARGET": TRIGGER}


@pytest.mark.parametrize(("grants", "expected"), [
    ([_grant()], None),
    ([_grant("roles/cloudbuild.builds.builder")], None),
    ([], "no grant in this stack lets its runtime account runtime@p.iam.gserviceaccount.com run it: grant "
         "roles/cloudbuild.builds.editor on project builds-p"),
    ([_grant("roles/cloudbuild.builds.viewer")], "no grant in this stack"),  # cannot create builds
    ([_grant(project="p")], "no grant in this stack"),  # the handler's project, not the trigger's
    ([_grant(condition={"title": "t", "expression": 'resource.name.endsWith("/nightly")'})],
     "has an IAM condition, and Cloud Build evaluates no resource attributes"),
])
def test_a_cloud_build_trigger_target_needs_the_builds_editor_grant_on_the_triggers_project(
        grants: list[Resource], expected: str | None) -> None:
    findings = run("dedup-cloud-build-trigger-grant", [version(TRIGGER_ENV), *grants])
    if expected is None:
        assert findings == []
    else:
        [finding] = findings
        assert expected in finding.message and finding.level == "advisory"


def test_the_grant_rule_skips_other_targets_and_unknown_accounts() -> None:
    assert run("dedup-cloud-build-trigger-grant", [version()]) == []
    assert run("dedup-cloud-build-trigger-grant", [version(TRIGGER_ENV, serviceAccount=UNKNOWN)]) == []


# -- both shapes of the component, built under mocks, pass every rule --------------------------------------------

def test_the_component_on_app_engine_and_with_a_cloud_build_trigger_passes_every_rule() -> None:
    for config in (None, EVERY):
        findings = check_stack_config(ROOT / "Pulumi.example-app-engine.yaml", ROOT / "Pulumi.yaml",
                                      *([config] if config else []))
        # the one advisory: the component's warning that a lost lease cannot stop a build (lost_lease_advisory)
        assert [f.rule for f in findings] == ["program-warning"], findings
        assert "a lost lease cannot stop a downstream execution" in findings[0].message
    on_cloud_run = check_program(lambda: DedupScheduledJob("build", {  # type: ignore[typeddict-item]
        "schedule": "0 2 * * *", "region": "us-east1", "cloud_build_trigger_target": {"trigger": TRIGGER},
        "alerts": {"notification_channels": ["projects/p1/notificationChannels/1"]}}), {"gcp:project": "p1"}, EVERY)
    assert [f.rule for f in on_cloud_run] == ["program-warning"], on_cloud_run  # the same advisory
    not_deployed = check_program(lambda: DedupScheduledJob("nightly", {  # type: ignore[typeddict-item]
        "schedule": "0 2 * * *", "region": "us-east1", "job_source": str(HELLO_JOB),
        "job": "jobs:run", "app_engine": {"service": "dedup", "deploy": False}}), {"gcp:project": "p1"}, EVERY)
    assert not_deployed == []


# -- App Engine fails closed: the pack reports a version without the caller check -------------------------------

def _app_engine_stack_without(tmp_path: Path, **env: str | None) -> list[Finding]:
    """The App Engine example stack as the component makes it, with its version's environment changed."""
    from scheduler_dedup.infra.stack.mock_run import run_stack_config
    from scheduler_dedup.policies.offline.check import resources_from_registered

    resources = resources_from_registered(run_stack_config(ROOT / "Pulumi.example-app-engine.yaml",
                                                           project_file=ROOT / "Pulumi.yaml"))
    changed = []
    for resource in resources:
        if resource.type == VERSION:
            variables = {k: v for k, v in {**resource.props["envVariables"], **env}.items() if v is not None}
            resource = Resource(resource.type, resource.name, resource.urn, {**resource.props, "envVariables": variables},
                                resource.parent)
        changed.append(resource)
    return [f for f in evaluate(changed) if f.level == "mandatory"]


def test_an_app_engine_version_without_the_caller_check_is_mandatory(tmp_path: Path) -> None:
    assert _app_engine_stack_without(tmp_path) == []
    [unset] = _app_engine_stack_without(tmp_path, DEDUP_APP_ENGINE_CALLER=None)
    assert unset.rule == "dedup-handler-settings" and "App Engine has no IAM gate" in unset.message
    [off] = _app_engine_stack_without(tmp_path, DEDUP_APP_ENGINE_CALLER="false")
    assert "DEDUP_APP_ENGINE_OPEN_REASON" in off.message
    assert _app_engine_stack_without(tmp_path, DEDUP_APP_ENGINE_CALLER="false",
                                     DEDUP_APP_ENGINE_OPEN_REASON="IAP guards the app") == []
