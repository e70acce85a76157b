"""The source deploy under Pulumi mocks with typed Args: a Cloud Run function builds the uploaded archive (Cloud Run's
``build_config`` starts no build), a code change alone rolls a new build, what a function cannot do is refused at
preview (also through ``scheduler-dedup check``), and the prebuilt ``image`` keeps its Cloud Run service."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.handler.service.server import FUNCTION_TARGET
from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob
from scheduler_dedup.infra.args import DedupScheduledJobArgs
from scheduler_dedup.infra.errors import DedupConfigErrors
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from scheduler_dedup.policies.offline.check import COMPONENT_CONFIG_RULE, check_stack_config
from tests.paths import HELLO_JOB, ROOT
from tests.infra.served import FUNCTION, SERVICE, handler_env

OBJECT = "gcp:storage/bucketObject:BucketObject"


def _args(source: Path | str = HELLO_JOB, **extra: Any) -> DedupScheduledJobArgs:
    args: DedupScheduledJobArgs = {"schedule": "0 3 * * *", "region": "us-central1", "job_source": str(source),
                                   "job": "jobs:run"}
    args.update(extra)  # type: ignore[typeddict-item]
    return args


def _deploy(args: DedupScheduledJobArgs) -> list[RegisteredResource]:
    return run_program(lambda: DedupScheduledJob("nightly", args), {"gcp:project": "p1"})


def _one(resources: list[RegisteredResource], typ: str) -> RegisteredResource:
    found = [r for r in resources if r.type == typ]
    assert len(found) == 1, [(r.type, r.name) for r in found]
    return found[0]


def test_the_source_deploy_is_a_function_that_builds_the_uploaded_archive() -> None:
    resources = _deploy(_args())
    function = _one(resources, FUNCTION).inputs
    obj, bucket = _one(resources, OBJECT), _one(resources, "gcp:storage/bucket:Bucket")
    repository = _one(resources, "gcp:artifactregistry/repository:Repository").inputs
    build = function["buildConfig"]
    assert build["source"] == {"storageSource": {"bucket": bucket.state["name"], "object": obj.state["outputName"]}}
    assert (build["entryPoint"], build["runtime"]) == (FUNCTION_TARGET, "python312")
    assert build["dockerRepository"] == f"projects/p1/locations/us-central1/repositories/{repository['repositoryId']}"
    assert build["serviceAccount"] == "projects/p1/serviceAccounts/nightly-build@p1.iam.gserviceaccount.com"
    assert build["automaticUpdatePolicy"] == {}, "the base image gets security updates"
    assert SERVICE not in {r.type for r in resources}, "no Cloud Run service whose build_config builds nothing"
    assert not [r for r in resources if "buildConfig" in r.inputs and r.type != FUNCTION]
    # the build waits for the build identity's grants: it reads the archive and pushes the image as that identity
    grants = {r.urn for r in resources if r.name.startswith("nightly-build-")}
    assert len(grants) == 4 and grants <= set(_one(resources, FUNCTION).dependencies)


def test_the_build_identity_reads_the_copy_the_functions_api_builds_from() -> None:
    """The Functions API copies the archive into its own bucket ``gcf-v2-sources-PROJECT_NUMBER-REGION`` and the build
    fetches it from there ("Access to bucket gcf-v2-sources-... denied. You must grant Storage Object Viewer
    permission to" the build's account otherwise): the build identity reads those buckets, and only those."""
    resources = _deploy(_args())
    readers = [r.inputs for r in resources if r.type == "gcp:projects/iAMMember:IAMMember"
               and r.inputs["role"] == "roles/storage.objectViewer"]
    assert len(readers) == 1, readers
    reader = readers[0]
    assert reader["member"] == "serviceAccount:nightly-build@p1.iam.gserviceaccount.com"
    assert reader["condition"]["expression"] == 'resource.name.startsWith("projects/_/buckets/gcf-v2-sources-")'
    # a shared build account's project grants are its owner's (one binding: a job's destroy would remove it for all)
    shared = _deploy(_args(build_service_account_email="builder@p1.iam.gserviceaccount.com"))
    assert not [r for r in shared if r.type == "gcp:projects/iAMMember:IAMMember"
                and "builder@" in r.inputs["member"]]


def test_a_failed_build_stops_up_before_the_invoker_grant_and_the_scheduler_job() -> None:
    """The function's create fails when its build fails; everything that calls it waits for it."""
    resources = _deploy(_args(alerts={"notification_channels": ["projects/p1/notificationChannels/1"]}))
    function = _one(resources, FUNCTION).urn
    by_name = {r.name: r for r in resources}
    for grant in ("nightly-scheduler-invoker", "nightly-runtime-self-viewer"):
        assert function in by_name[grant].dependencies, grant
    for job in ("nightly-job", "nightly-watchdog"):
        assert by_name["nightly-scheduler-invoker"].urn in by_name[job].dependencies, job


def test_a_code_change_alone_gives_a_new_object_and_so_a_new_build(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(HELLO_JOB, first)
    shutil.copytree(HELLO_JOB, second)

    def built(args: DedupScheduledJobArgs) -> str:
        source = _one(_deploy(args), FUNCTION).inputs["buildConfig"]["source"]["storageSource"]
        return str(source["object"])

    same = built(_args(first))
    assert built(_args(second)) == same, "the same code in another folder is the same archive"
    assert built(_args(first, schedule="0 4 * * *", memory="1Gi")) == same, "no other input rebuilds"
    (second / "jobs.py").write_text((second / "jobs.py").read_text() + "\n# a change\n")
    changed = built(_args(second))
    assert changed != same and changed.startswith("nightly-") and changed.endswith(".zip")


def test_every_job_setting_reaches_the_function() -> None:
    config = _one(_deploy(_args(min_instance_count=1, max_instance_count=4, request_timeout_seconds=900,
                                attempt_deadline_seconds=600, lease_seconds=915, labels={"team": "data"})),
                  FUNCTION)
    service = config.inputs["serviceConfig"]
    assert (service["minInstanceCount"], service["maxInstanceCount"], service["timeoutSeconds"]) == (1, 4, 900)
    assert service["ingressSettings"] == "ALLOW_ALL", "Cloud Run IAM is the gate, as on the image's service"
    assert config.inputs["labels"] == {"managed-by": "scheduler-dedup", "team": "data"}
    assert handler_env(config)["DEDUP_OIDC_AUDIENCE"] == "https://us-central1-p1.cloudfunctions.net/nightly"


def _errors(args: DedupScheduledJobArgs) -> dict[str, str]:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("nightly", args, default_project="p1")
    errors = info.value.errors if isinstance(info.value, DedupConfigErrors) else [info.value]
    return {e.field: str(e) for e in errors}


@pytest.mark.parametrize("target", [{}, {"http_target": {"url": "https://example.com/hook"}}])
def test_what_a_function_cannot_do_is_refused_at_preview_all_at_once(target: dict[str, Any]) -> None:
    args = _args(cpu_always_allocated=True, oidc_audience="https://example.com/aud",
                 base_image="us-central1-docker.pkg.dev/serverless-runtimes/google-22/runtimes/python312")
    if target:  # a proxy target's handler is built from the archive too
        args = {k: v for k, v in args.items() if k not in ("job_source", "job")} | target  # type: ignore[assignment]
    found = _errors(args)
    assert set(found) == {"cpu_always_allocated", "oidc_audience", "base_image"}, found
    assert "give image instead of job_source" in found["cpu_always_allocated"]
    assert "cloudfunctions.net" in found["oidc_audience"]
    resolve_settings("nightly", _args(cpu_always_allocated=False), default_project="p1")  # what a function does


def test_an_environment_larger_than_a_function_takes_is_refused_naming_the_limit() -> None:
    env = {f"V{i}": "x" * 1000 for i in range(40)}  # each value fits, together 40 kB
    found = _errors(_args(env=env))
    assert "32768" in found["env"] and "secret_files" in found["env"]
    resolve_settings("nightly", {"schedule": "0 3 * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p/r/h:1",
                                 "job": "jobs:run", "env": env}, default_project="p1")  # a service has no such cap


def test_check_refuses_what_a_function_cannot_do_naming_the_stack_keys(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text("\n".join([
        "config:", "  gcp:project: my-project-id", f"  scheduler-dedup:jobSource: {HELLO_JOB}",
        "  scheduler-dedup:job: jobs:run", "  scheduler-dedup:cpuAlwaysAllocated: true",
        "  scheduler-dedup:oidcAudience: https://example.com/aud"]) + "\n")
    messages = [f.message for f in check_stack_config(stack, ROOT / "Pulumi.yaml") if f.rule == COMPONENT_CONFIG_RULE]
    assert any("scheduler-dedup:cpuAlwaysAllocated" in m and "CPU always allocated" in m for m in messages), messages
    assert any("scheduler-dedup:oidcAudience" in m for m in messages), messages


def test_the_prebuilt_image_keeps_its_cloud_run_service_with_every_setting() -> None:
    resources = _deploy({"schedule": "0 3 * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p1/r/h:1",
                         "job": "jobs:run", "cpu_always_allocated": True, "oidc_audience": "https://example.com/aud"})
    types = {r.type for r in resources}
    assert FUNCTION not in types and OBJECT not in types
    service = _one(resources, SERVICE).inputs
    [container] = service["template"]["containers"]
    assert container["image"] == "us-docker.pkg.dev/p1/r/h:1" and "buildConfig" not in service
    assert container["resources"]["cpuIdle"] is False and container["resources"]["startupCpuBoost"] is True
    assert service["customAudiences"] == ["https://example.com/aud"]
    invoker = next(r for r in resources if r.name == "nightly-scheduler-invoker").inputs
    assert invoker["name"] == service["name"] and invoker["role"] == "roles/run.invoker"
