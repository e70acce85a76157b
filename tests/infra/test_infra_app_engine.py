"""The component's other shapes under Pulumi mocks: App Engine as the Scheduler target, and a Cloud Build trigger target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest

from scheduler_dedup.handler.service.startup import startup_problems
from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob
from scheduler_dedup.infra.job.archive import APP_ENGINE_ENTRYPOINT, APP_ENGINE_RUNTIME
from scheduler_dedup.infra.job.component import TARGET_ROLES
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program, run_stack_config
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.stack.program import args_from_config
from tests.paths import ROOT, HELLO_JOB
from tests.infra.served import handler_env, handler_of

HELLO = str(HELLO_JOB)
TRIGGER = "projects/builds-p/locations/us-east1/triggers/nightly-build"
OUTPUT_KEYS = ["service_url", "job_name", "scheduler_service_account_email", "runtime_service_account_email",
               "database_name", "oidc_audience"]


def _component(name: str, args: dict[str, Any]) -> tuple[list[RegisteredResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        comp = DedupScheduledJob(name, args)  # type: ignore[arg-type]
        pulumi.Output.all(*[getattr(comp, k) for k in OUTPUT_KEYS]).apply(lambda v: outputs.update(zip(OUTPUT_KEYS, v)))

    return run_program(program, {"gcp:project": "p1"}), outputs


def _of(resources: list[RegisteredResource], typ: str) -> list[RegisteredResource]:
    return [r for r in resources if r.type == typ]


def _grants(resources: list[RegisteredResource], member: str) -> set[tuple[str, str]]:
    return {(r.inputs["role"], r.type) for r in resources
            if r.type.lower().endswith("iammember") and r.inputs["member"] == member}


APP_ENGINE_JOB = {"schedule": "0 2 * * *", "region": "us-east1", "job_source": HELLO, "job": "jobs:run",
                  "app_engine": {"service": "dedup", "relative_uri": "/run?from=scheduler"}}


def test_app_engine_deploys_a_standard_version_and_an_app_engine_target() -> None:
    resources, outputs = _component("nightly", APP_ENGINE_JOB)
    types = {r.type for r in resources}
    assert not types & {"gcp:cloudrunv2/service:Service", "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
                        "gcp:artifactregistry/repository:Repository"}
    assert [r.name for r in _of(resources, "gcp:serviceaccount/account:Account")] == ["nightly-runtime"]  # no -sched

    [version] = _of(resources, "gcp:appengine/standardAppVersion:StandardAppVersion")
    v = version.inputs
    assert (v["service"], v["runtime"], v["entrypoint"]) == ("dedup", APP_ENGINE_RUNTIME, {"shell": APP_ENGINE_ENTRYPOINT})
    assert v["serviceAccount"] == "nightly-runtime@p1.iam.gserviceaccount.com"
    assert v["automaticScaling"]["standardSchedulerSettings"]["maxInstances"] == 3
    assert v["deleteServiceOnDestroy"] is False
    [archive] = _of(resources, "gcp:storage/bucketObject:BucketObject")
    [bucket] = _of(resources, "gcp:storage/bucket:Bucket")
    assert v["deployment"]["zip"]["sourceUrl"] == (f"https://storage.googleapis.com/{bucket.state['name']}/"
                                                    f"{archive.inputs['name']}")
    assert v["versionId"] == "dedup-" + archive.inputs["name"].rsplit("-", 1)[1].removesuffix(".zip")

    env = v["envVariables"]
    assert env["DEDUP_APP_ENGINE_CALLER"] == "true" and env["DEDUP_JOB"] == "jobs:run"
    assert not {"DEDUP_OIDC_AUDIENCE", "DEDUP_TRUST_CLOUD_RUN_IAM", "DEDUP_ALLOWED_CALLERS"} & set(env)
    assert env["DEDUP_LEASE_SECONDS"] == "600"  # covers App Engine's 10-minute request deadline
    assert startup_problems(env) == [], "the handler would start with this environment"

    [job] = _of(resources, "gcp:cloudscheduler/job:Job")
    j = job.inputs
    assert "httpTarget" not in j
    assert j["appEngineHttpTarget"] == {
        "relativeUri": "/run?from=scheduler", "httpMethod": "POST",
        "headers": {"X-Dedup-Project": "p1", "X-Dedup-Location": "us-east1"},
        "appEngineRouting": {"service": "dedup", "version": v["versionId"]},
    }
    assert j["attemptDeadline"] == "180s" and j["retryConfig"]["retryCount"] == 5
    assert outputs["service_url"] == f"https://{v['versionId']}-dot-dedup-dot-p1.uc.r.appspot.com"
    assert outputs["scheduler_service_account_email"] == "" and outputs["oidc_audience"] == ""
    runtime = "serviceAccount:nightly-runtime@p1.iam.gserviceaccount.com"
    assert _grants(resources, runtime) == {("roles/datastore.user", "gcp:projects/iAMMember:IAMMember")}
    apis = {r.inputs["service"] for r in _of(resources, "gcp:projects/service:Service")}
    assert "appengine.googleapis.com" in apis and "run.googleapis.com" not in apis


def test_app_engine_without_deploy_creates_only_the_job_routed_to_the_given_version() -> None:
    resources, outputs = _component("nightly", {**APP_ENGINE_JOB, "attempt_deadline_seconds": 1900, "app_engine": {
        "service": "default", "version": "batch", "deploy": False, "request_timeout_seconds": 3600}})
    types = {r.type for r in resources}
    assert not types & {"gcp:appengine/standardAppVersion:StandardAppVersion", "gcp:storage/bucket:Bucket",
                        "gcp:cloudrunv2/service:Service"}
    [job] = _of(resources, "gcp:cloudscheduler/job:Job")
    assert job.inputs["appEngineHttpTarget"]["appEngineRouting"] == {"service": "default", "version": "batch"}
    assert job.inputs["appEngineHttpTarget"]["relativeUri"] == "/"
    assert job.inputs["attemptDeadline"] == "1900s"  # above an HTTP target's 1800 s: App Engine targets take 24 h
    assert outputs["service_url"] == "https://batch-dot-default-dot-p1.uc.r.appspot.com"
    s = resolve_settings("nightly", {**APP_ENGINE_JOB, "app_engine": {"service": "default", "deploy": False,
                                                                      "request_timeout_seconds": 3600}},
                         default_project="p1")
    assert s.lease_seconds == 3600, "the lease covers the service's request deadline"
    # ... and a deadline whose lease no five retries can outlast is refused, as on Cloud Run
    with pytest.raises(DedupConfigError, match="every retry would get 409 and the run would never complete"):
        resolve_settings("nightly", {**APP_ENGINE_JOB, "app_engine": {"service": "default", "deploy": False,
                                                                       "request_timeout_seconds": 86400}},
                         default_project="p1")


@pytest.mark.parametrize(("overrides", "field", "fix"), [
    ({"attempt_deadline_seconds": 601}, "attempt_deadline_seconds", "lower it to at most 600"),
    ({"attempt_deadline_seconds": 14}, "attempt_deadline_seconds", "use 15 to 86400 seconds"),
    ({"attempt_deadline_seconds": 0}, "attempt_deadline_seconds", "use 15 to 86400 seconds"),
    ({"attempt_deadline_seconds": 86401, "app_engine": {"service": "dedup", "deploy": False,
                                                        "request_timeout_seconds": 86400}},
     "attempt_deadline_seconds", "use 15 to 86400 seconds"),
    ({"app_engine": {"service": "dedup", "request_timeout_seconds": 3600}}, "app_engine.request_timeout_seconds",
     "request deadline is 600 s"),
    ({"app_engine": {"service": "dedup", "deploy": False, "request_timeout_seconds": 90000}},
     "app_engine.request_timeout_seconds", "1 to 86400"),
    ({"app_engine": {"service": "Dedup"}}, "app_engine.service", "lower-case letters"),
    ({"app_engine": {}}, "app_engine.service", "is required"),
    ({"app_engine": {"service": "dedup", "version": "latest"}}, "app_engine.version", "reserved"),
    ({"app_engine": {"service": "dedup", "version": "ah-1"}}, "app_engine.version", "reserved"),
    ({"app_engine": {"service": "dedup", "relative_uri": "run"}}, "app_engine.relative_uri", "start it with '/'"),
    ({"app_engine": {"service": "dedup", "relative_uri": "/a b"}}, "app_engine.relative_uri", "without spaces"),
    ({"app_engine": {"service": "dedup", "relative_uri": "/" + "a" * 2083}}, "app_engine.relative_uri", "2083"),
    ({"app_engine": {"service": "dedup", "relative_uri": "/_ah/start"}}, "app_engine.relative_uri", "reserved /_ah/"),
    ({"app_engine": {"service": "dedup", "relative_uri": "/dedup/run-check?x=1"}}, "app_engine.relative_uri",
     "run check"),
    ({"app_engine": {"service": "dedup", "scaling": "basic"}}, "app_engine.scaling", "unknown key"),
    ({"app_engine": {"service": "dedup", "deploy": "yes"}}, "app_engine.deploy", "true or false"),
    ({"image": "us-docker.pkg.dev/p/r/i:1", "job_source": None}, "image", "deploys the archive"),
    ({"oidc_audience": "https://x.invalid"}, "oidc_audience", "no OIDC token"),
    ({"scheduler_service_account_email": "s@p1.iam.gserviceaccount.com"}, "scheduler_service_account_email",
     "no OIDC token"),
    ({"request_timeout_seconds": 600}, "request_timeout_seconds", "app_engine.request_timeout_seconds"),
    ({"cpu_always_allocated": False}, "cpu_always_allocated", "request-based billing"),
    ({"alerts": {"notification_channels": ["projects/p1/notificationChannels/1"]}}, "alerts",
     "not available on App Engine yet"),
])
def test_app_engine_misconfiguration_fails_before_any_resource(overrides: dict[str, Any], field: str, fix: str) -> None:
    args = {**APP_ENGINE_JOB, **overrides}
    args = {k: v for k, v in args.items() if v is not None}
    registered: list[RegisteredResource] = []
    with pytest.raises(DedupConfigError) as info:
        registered = run_program(lambda: DedupScheduledJob("nightly", args), {"gcp:project": "p1"})  # type: ignore[arg-type]
    assert info.value.field == field, str(info.value)
    assert fix in str(info.value)
    assert registered == []


def test_the_app_engine_example_stack_config_builds_under_mocks() -> None:
    resources = run_stack_config(ROOT / "Pulumi.example-app-engine.yaml")
    [job] = _of(resources, "gcp:cloudscheduler/job:Job")
    assert job.inputs["appEngineHttpTarget"]["relativeUri"] == "/run"
    [version] = _of(resources, "gcp:appengine/standardAppVersion:StandardAppVersion")
    assert version.inputs["envVariables"]["DEDUP_TARGET_TYPE"] == "cloud_build_trigger"
    assert resources.exports["service_url"].endswith("-dot-dedup-dot-my-project-id.uc.r.appspot.com")


def test_app_engine_stack_keys_set_the_app_engine_input(tmp_path: Path) -> None:
    config = {"gcp:project": "p1", "scheduler-dedup:schedule": "0 2 * * *", "scheduler-dedup:region": "us-east1",
              "scheduler-dedup:jobSource": HELLO, "scheduler-dedup:job": "jobs:run",
              "scheduler-dedup:appEngineService": "dedup", "scheduler-dedup:appEngineVersion": "v7",
              "scheduler-dedup:appEngineRelativeUri": "/run", "scheduler-dedup:appEngineDeploy": "false",
              "scheduler-dedup:appEngineRequestTimeoutSeconds": "3600",
              "scheduler-dedup:cloudBuildTrigger": TRIGGER,
              "scheduler-dedup:cloudBuildTriggerServiceAccountEmail": "builder@builds-p.iam.gserviceaccount.com"}
    found: dict[str, Any] = {}
    run_program(lambda: found.update(args_from_config(pulumi.Config("scheduler-dedup"))[1]), config)
    assert found["app_engine"] == {"service": "dedup", "version": "v7", "relative_uri": "/run", "deploy": False,
                                   "request_timeout_seconds": 3600}
    assert found["cloud_build_trigger_target"] == {"trigger": TRIGGER,
                                                   "service_account_email": "builder@builds-p.iam.gserviceaccount.com"}


# -- a Cloud Build trigger as the proxy target ---------------------------------------------------------------


def test_cloud_build_trigger_target_gets_the_builds_editor_role_on_its_project_and_act_as_on_its_account() -> None:
    resources, _ = _component("build", {"schedule": "0 1 * * *", "region": "us-east1", "cloud_build_trigger_target": {
        "trigger": TRIGGER, "service_account_email": "builder@builds-p.iam.gserviceaccount.com"}})
    env = handler_env(handler_of(resources))
    assert (env["DEDUP_TARGET_TYPE"], env["DEDUP_TARGET"]) == ("cloud_build_trigger", TRIGGER)
    assert "DEDUP_JOB" not in env
    runtime = "serviceAccount:build-runtime@p1.iam.gserviceaccount.com"
    assert _grants(resources, runtime) == {
        ("roles/datastore.user", "gcp:projects/iAMMember:IAMMember"),
        ("roles/run.viewer", "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"),  # trust mode reads its own service
        (TARGET_ROLES["cloud_build_trigger"], "gcp:projects/iAMMember:IAMMember"),
        ("roles/iam.serviceAccountUser", "gcp:serviceaccount/iAMMember:IAMMember"),
    }
    assert TARGET_ROLES["cloud_build_trigger"] == "roles/cloudbuild.builds.editor"
    runner = next(r for r in resources if r.name == "build-runtime-build-trigger-runner")
    assert runner.inputs["project"] == "builds-p" and "condition" not in runner.inputs  # the trigger's project
    act_as = next(r for r in resources if r.name == "build-runtime-build-act-as")
    assert act_as.inputs["serviceAccountId"] == ("projects/builds-p/serviceAccounts/"
                                                 "builder@builds-p.iam.gserviceaccount.com")
    apis = {r.inputs["service"] for r in _of(resources, "gcp:projects/service:Service")}
    assert "cloudbuild.googleapis.com" in apis


def test_cloud_build_trigger_without_its_own_account_gets_no_act_as_grant() -> None:
    resources, _ = _component("build", {"schedule": "0 1 * * *", "region": "us-east1",
                                        "cloud_build_trigger_target": {"trigger": TRIGGER}})
    assert not [r for r in resources if r.type == "gcp:serviceaccount/iAMMember:IAMMember"]


@pytest.mark.parametrize(("target", "field", "fix"), [
    ({"trigger": "projects/p/triggers/t"}, "cloud_build_trigger_target.trigger", "projects/P/locations/L/triggers/NAME"),
    ({}, "cloud_build_trigger_target.trigger", "is required"),
    ({"trigger": TRIGGER, "branch": "main"}, "cloud_build_trigger_target.branch", "unknown key"),
    ({"trigger": TRIGGER, "service_account_email": "builder"}, "cloud_build_trigger_target.service_account_email",
     "not a service account email"),
])
def test_cloud_build_trigger_target_misconfiguration_names_the_field(target: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("build", {"schedule": "0 1 * * *", "region": "us-east1", "cloud_build_trigger_target": target},
                         default_project="p1")
    assert info.value.field == field, str(info.value)
    assert fix in str(info.value)


def test_the_top_level_request_timeout_keeps_its_own_stack_key_beside_the_app_engine_one() -> None:
    """Two inputs end in request_timeout_seconds: a root-stack message about Cloud Run's names requestTimeoutSeconds."""
    from scheduler_dedup.infra.stack.program import in_stack_config_terms, stack_key_for

    assert stack_key_for("request_timeout_seconds") == "requestTimeoutSeconds"
    assert stack_key_for("app_engine.request_timeout_seconds") == "appEngineRequestTimeoutSeconds"
    assert in_stack_config_terms("request_timeout_seconds 100 s; app_engine.request_timeout_seconds") == (
        "scheduler-dedup:requestTimeoutSeconds 100 s; scheduler-dedup:appEngineRequestTimeoutSeconds")


@pytest.mark.parametrize(("location", "region", "ok"), [
    ("us-central", "us-central1", True), ("europe-west", "europe-west1", True), ("europe-west2", "europe-west2", True),
    ("us-central", "europe-west1", False), ("europe-west", "europe-west2", False), ("us-central", "us-central", False),
])
def test_the_app_engine_region_is_the_applications_with_its_two_older_names(location: str, region: str,
                                                                             ok: bool) -> None:
    args = {"schedule": "0 3 * * *", "region": region, "job_source": HELLO, "job": "jobs:run",
            "app_engine": {"service": "dedup", "location": location}}
    if ok:
        assert resolve_settings("nightly", args, default_project="p1").app_engine is not None
        return
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("nightly", args, default_project="p1")
    errors = getattr(info.value, "errors", [info.value])
    assert any(e.field == "region" and "only in the application's region" in str(e) for e in errors), str(info.value)


def test_the_applications_own_location_is_checked_when_preview_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without app_engine.location, the application read at preview decides: europe-west1 for an app in us-central
    fails the preview, naming the region to use."""
    from scheduler_dedup.infra.stack import mock_run

    real = mock_run.mock_outputs

    def app_in_us_central(typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        found_id, state = real(typ, name, inputs)
        if typ == "gcp:appengine/application:Application":
            state["location_id"] = "us-central"
        return found_id, state

    monkeypatch.setattr(mock_run, "mock_outputs", app_in_us_central)
    args = {"schedule": "0 3 * * *", "job_source": HELLO, "job": "jobs:run", "app_engine": {"service": "dedup"}}
    run_program(lambda: DedupScheduledJob("nightly", {**args, "region": "us-central1"}), {"gcp:project": "p1"})
    with pytest.raises(Exception, match="set region to us-central1"):
        run_program(lambda: DedupScheduledJob("nightly", {**args, "region": "europe-west1"}), {"gcp:project": "p1"})
