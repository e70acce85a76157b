"""The resource graph of the root program and of the component, under Pulumi mocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob
from scheduler_dedup.infra.job.component import TARGET_ROLES, TYPE_TOKEN
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program, run_stack_config
from scheduler_dedup.infra.job.settings import DEFAULT_ATTEMPT_DEADLINE_SECONDS
from scheduler_dedup.infra.stack.program import CONFIG_KEYS
from tests.paths import ROOT, HELLO_JOB

EXAMPLE = ROOT / "Pulumi.example.yaml"
HELLO = str(HELLO_JOB)
#: The function's URL: the OIDC audience of a source deploy (function_deploy.function_url).
AUDIENCE = "https://europe-west1-my-project-id.cloudfunctions.net/hello-dedup"
FUNCTION = "gcp:cloudfunctionsv2/function:Function"
SERVICE = "gcp:cloudrunv2/service:Service"


@pytest.fixture(scope="module")
def graph() -> list[RegisteredResource]:
    return run_stack_config(EXAMPLE)


def _one(resources: list[RegisteredResource], typ: str, name: str | None = None) -> RegisteredResource:
    found = [r for r in resources if r.type == typ and (name is None or r.name == name)]
    assert len(found) == 1, [(r.type, r.name) for r in found]
    return found[0]


def _env(service: RegisteredResource) -> dict[str, str]:
    """The handler's plain environment on a function (source deploy) or a Cloud Run service (prebuilt image)."""
    if service.type == FUNCTION:
        return dict(service.inputs["serviceConfig"]["environmentVariables"])
    return {e["name"]: e["value"] for e in service.inputs["template"]["containers"][0]["envs"]}


def _handler(resources: list[RegisteredResource]) -> RegisteredResource:
    """The one resource that serves the handler: the function of a source deploy, or the prebuilt image's service."""
    found = [r for r in resources if r.type in (FUNCTION, SERVICE)]
    assert len(found) == 1, [(r.type, r.name) for r in found]
    return found[0]


def _grants(resources: list[RegisteredResource]) -> set[tuple[str, str, str]]:
    """(member, role, resource type of the grant) for every IAM member resource."""
    return {
        (r.inputs["member"], r.inputs["role"], r.type)
        for r in resources
        if r.type.lower().endswith("iammember")
    }


def test_example_stack_creates_every_resource_type(graph: list[RegisteredResource]) -> None:
    types = {r.type for r in graph}
    assert {
        TYPE_TOKEN, "gcp:projects/service:Service", "gcp:serviceaccount/account:Account",
        "gcp:firestore/database:Database", "gcp:firestore/field:Field", "gcp:storage/bucket:Bucket",
        "gcp:storage/bucketObject:BucketObject", "gcp:artifactregistry/repository:Repository",
        FUNCTION, "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
        "gcp:cloudscheduler/job:Job", "gcp:projects/iAMMember:IAMMember",
    } <= types
    assert SERVICE not in types, "the source deploy's service is the function's own"
    assert not any(t.endswith(("IamPolicy", "IAMPolicy", "IamBinding", "IAMBinding")) for t in types)


def test_every_child_has_the_component_as_parent_and_a_derived_name(graph: list[RegisteredResource]) -> None:
    component = _one(graph, TYPE_TOKEN)
    assert component.name == "hello-dedup"
    children = [r for r in graph if r is not component]
    assert children and all(r.parent == component.urn for r in children)
    assert all(r.name.startswith("hello-dedup-") for r in children)


def test_scheduler_job_oidc_deadline_retry_and_headers(graph: list[RegisteredResource]) -> None:
    job = _one(graph, "gcp:cloudscheduler/job:Job", "hello-dedup-job").inputs
    sched_sa = _one(graph, "gcp:serviceaccount/account:Account", "hello-dedup-sched").state["email"]
    function = _one(graph, FUNCTION)
    assert job["schedule"] == "0 * * * *" and job["timeZone"] == "Europe/Berlin"
    assert job["attemptDeadline"] == "300s"
    assert job["retryConfig"] == {
        "retryCount": 5, "maxRetryDuration": "1800s", "minBackoffDuration": "30s",
        "maxBackoffDuration": "300s", "maxDoublings": 3,
    }
    target = job["httpTarget"]
    assert target["httpMethod"] == "POST" and target["uri"] == function.state["url"]
    assert target["oidcToken"] == {"serviceAccountEmail": sched_sa, "audience": AUDIENCE}
    assert target["headers"] == {"X-Dedup-Project": "my-project-id", "X-Dedup-Location": "europe-west1"}


def test_audience_is_the_same_in_scheduler_env_and_service(graph: list[RegisteredResource]) -> None:
    job = _one(graph, "gcp:cloudscheduler/job:Job", "hello-dedup-job").inputs
    function = _one(graph, FUNCTION)
    env = _env(function)
    audience = job["httpTarget"]["oidcToken"]["audience"]
    assert env["DEDUP_OIDC_AUDIENCE"] == audience
    # A function takes no custom audience: its token's audience is its function URL, which it is called at.
    assert audience == function.state["url"] == job["httpTarget"]["uri"] == AUDIENCE
    sched_sa = _one(graph, "gcp:serviceaccount/account:Account", "hello-dedup-sched").state["email"]
    assert env["DEDUP_ALLOWED_CALLERS"] == sched_sa == job["httpTarget"]["oidcToken"]["serviceAccountEmail"]


def test_service_env_timeout_and_deploy(graph: list[RegisteredResource]) -> None:
    function = _one(graph, FUNCTION).inputs
    service = function["serviceConfig"]
    runtime_sa = _one(graph, "gcp:serviceaccount/account:Account", "hello-dedup-runtime").state["email"]
    env = _env(_one(graph, FUNCTION))
    job = _one(graph, "gcp:cloudscheduler/job:Job", "hello-dedup-job").inputs
    assert (job["schedule"], job["timeZone"]) == ("0 * * * *", "Europe/Berlin")
    assert env == {
        "GOOGLE_CLOUD_PROJECT": "my-project-id", "DEDUP_JOB": "jobs:run", "DEDUP_COLLECTION": "scheduler_runs",
        "DEDUP_DATABASE": "hello-dedup-runs", "DEDUP_LEASE_SECONDS": "600", "DEDUP_RETENTION_SECONDS": "604800",
        "DEDUP_MANUAL_TOLERANCE_SECONDS": "5", "DEDUP_TARGET_TYPE": "python", "DEDUP_OIDC_AUDIENCE": AUDIENCE,
        # the Scheduler job's own schedule and zone, stored on each run record for run history
        "DEDUP_SCHEDULE": job["schedule"], "DEDUP_TIME_ZONE": job["timeZone"],
        "DEDUP_STORE_TIMEOUT_SECONDS": "20",  # attempt deadline 300 s: min(20, 300 // 4)
        "DEDUP_TRUST_CLOUD_RUN_IAM": "true",  # the service enforces Cloud Run IAM, which strips verified signatures
        # trust mode reads this service's own IAM policy; the handler serves this one job only
        "DEDUP_SERVICE": "projects/my-project-id/locations/europe-west1/services/hello-dedup",
        "DEDUP_SCHEDULER_JOB": "projects/my-project-id/locations/europe-west1/jobs/hello-dedup",
        # run keys are made with the region of the first deploy, kept when region moves (time.Static below)
        "DEDUP_RUN_KEY_LOCATION": "europe-west1",
        "THREADS": "8",
        "DEDUP_ALLOWED_CALLERS": env["DEDUP_ALLOWED_CALLERS"],
        # the Scheduler account the component made, pinned by its unique id (the token's sub)
        "DEDUP_ALLOWED_CALLER_IDS": _one(graph, "gcp:serviceaccount/account:Account", "hello-dedup-sched").state[
            "uniqueId"],
        # when the job got this schedule: the time.Static below, replaced when schedule, zone or job name change
        "DEDUP_SCHEDULE_SINCE": env["DEDUP_SCHEDULE_SINCE"],
        # the last pause, from when it began until the resume: for a job never paused both are its creation (none)
        "DEDUP_PAUSED_SINCE": env["DEDUP_SCHEDULE_SINCE"], "DEDUP_RESUMED_AT": env["DEDUP_SCHEDULE_SINCE"],
        "REPORT_LABEL": "hourly",  # the job's own (scheduler-dedup:env), after the handler's
    }
    since = _one(graph, "time:index/static:Static", "hello-dedup-schedule-since")
    assert env["DEDUP_SCHEDULE_SINCE"] == since.state["rfc3339"]
    assert since.inputs["triggers"] == {"schedule": job["schedule"], "time_zone": job["timeZone"], "job": job["name"]}
    assert service["serviceAccountEmail"] == runtime_sa
    assert service["timeoutSeconds"] == 315
    assert service["maxInstanceRequestConcurrency"] == int(env["THREADS"])
    assert service["ingressSettings"] == "ALLOW_ALL" and service["allTrafficOnLatestRevision"] is True
    self_viewer = [r for r in graph if r.type == "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"
                   and r.inputs["role"] == "roles/run.viewer"]
    assert len(self_viewer) == 1 and self_viewer[0].inputs["member"] == f"serviceAccount:{runtime_sa}"
    # the function's service has the function's name: the self-check reads it
    assert self_viewer[0].inputs["name"] == function["name"] == "hello-dedup"
    obj = _one(graph, "gcp:storage/bucketObject:BucketObject").inputs
    bucket = _one(graph, "gcp:storage/bucket:Bucket")
    assert obj["name"].startswith("hello-dedup-") and obj["name"].endswith(".zip")
    assert bucket.inputs["uniformBucketLevelAccess"] is True and bucket.inputs["publicAccessPrevention"] == "enforced"


def test_ttl_policy_and_database(graph: list[RegisteredResource]) -> None:
    field = _one(graph, "gcp:firestore/field:Field", "hello-dedup-ttl").inputs
    assert (field["collection"], field["field"], field["database"]) == ("scheduler_runs", "expire_at", "hello-dedup-runs")
    assert field["ttlConfig"] == {} and field["indexConfig"] == {}
    db = _one(graph, "gcp:firestore/database:Database").inputs
    assert (db["name"], db["type"], db["locationId"]) == ("hello-dedup-runs", "FIRESTORE_NATIVE", "eur3")
    assert db["deletionPolicy"] == "DELETE"  # once protect is lifted (tests/infra/test_infra_ownership.py)


def test_apis_are_enabled_and_never_disabled_on_destroy(graph: list[RegisteredResource]) -> None:
    apis = [r.inputs for r in graph if r.type == "gcp:projects/service:Service"]
    assert {a["service"] for a in apis} >= {
        "run.googleapis.com", "cloudscheduler.googleapis.com", "firestore.googleapis.com", "cloudbuild.googleapis.com",
    }
    assert all(a["disableOnDestroy"] is False for a in apis)


def test_exact_role_set_per_account_and_no_public_or_primitive_grant(graph: list[RegisteredResource]) -> None:
    email = {n: _one(graph, "gcp:serviceaccount/account:Account", f"hello-dedup-{n}").state["email"]
             for n in ("sched", "runtime", "build")}
    grants = _grants(graph)
    by_account = {n: {(role, typ) for member, role, typ in grants if member == f"serviceAccount:{e}"}
                  for n, e in email.items()}
    assert by_account["sched"] == {("roles/run.invoker", "gcp:cloudrunv2/serviceIamMember:ServiceIamMember")}
    assert by_account["runtime"] == {("roles/datastore.user", "gcp:projects/iAMMember:IAMMember"),
                                     ("roles/run.viewer", "gcp:cloudrunv2/serviceIamMember:ServiceIamMember")}
    assert by_account["build"] == {
        ("roles/storage.objectViewer", "gcp:storage/bucketIAMMember:BucketIAMMember"),
        ("roles/artifactregistry.writer", "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"),
        ("roles/logging.logWriter", "gcp:projects/iAMMember:IAMMember"),
        ("roles/storage.objectViewer", "gcp:projects/iAMMember:IAMMember"),  # pinned to gcf-v2-sources-* buckets
    }
    assert sum(len(v) for v in by_account.values()) == len(grants)
    members = {member for member, _, _ in grants}
    assert not members & {"allUsers", "allAuthenticatedUsers"}
    assert not {role for _, role, _ in grants} & {"roles/owner", "roles/editor", "roles/viewer"}
    invoker = next(r for r in graph if r.name == "hello-dedup-scheduler-invoker").inputs
    assert invoker["name"] == _one(graph, FUNCTION).inputs["name"], "run.invoker on the function's own service"
    datastore = next(r for r in graph if r.name == "hello-dedup-runtime-datastore-user").inputs
    assert datastore["condition"]["expression"] == 'resource.name == "projects/my-project-id/databases/hello-dedup-runs"'


def _component(name: str, args: dict[str, Any], project: str = "p1") -> tuple[list[RegisteredResource], dict[str, Any]]:
    outputs: dict[str, Any] = {}

    def program() -> None:
        comp = DedupScheduledJob(name, args)  # type: ignore[arg-type]
        keys = ["service_url", "job_name", "scheduler_service_account_email", "runtime_service_account_email",
                "database_name", "oidc_audience"]
        pulumi.Output.all(*[getattr(comp, k) for k in keys]).apply(lambda vals: outputs.update(zip(keys, vals)))

    resources = run_program(program, {"gcp:project": project})
    return resources, outputs


def test_component_outputs() -> None:
    resources, outputs = _component("nightly", {"schedule": "0 3 * * *", "region": "us-east1",
                                                "job_source": HELLO, "job": "jobs:run"})
    assert outputs == {
        "service_url": "https://us-east1-p1.cloudfunctions.net/nightly",
        "job_name": "projects/p1/locations/us-east1/jobs/nightly",
        "scheduler_service_account_email": "nightly-sched@p1.iam.gserviceaccount.com",
        "runtime_service_account_email": "nightly-runtime@p1.iam.gserviceaccount.com",
        "database_name": "nightly-dedup",
        "oidc_audience": "https://us-east1-p1.cloudfunctions.net/nightly",
    }
    job = _one(resources, "gcp:cloudscheduler/job:Job").inputs
    assert job["attemptDeadline"] == f"{DEFAULT_ATTEMPT_DEADLINE_SECONDS}s" and job["timeZone"] == "Etc/UTC"
    # crash recovery by default: five retries 15, 30, 60, 120, 240 s apart outlast the 300 s lease
    assert job["retryConfig"]["retryCount"] == 5 and job["retryConfig"]["minBackoffDuration"] == "15s"


@pytest.mark.parametrize(
    ("target", "value", "target_type", "grant_type", "role"),
    [
        ("workflow_target", {"workflow": "projects/p1/locations/us-east1/workflows/etl"}, "workflows",
         "gcp:projects/iAMMember:IAMMember", TARGET_ROLES["workflows"]),
        ("cloud_run_job_target", {"job": "projects/p1/locations/us-east1/jobs/etl"}, "cloud_run_job",
         "gcp:cloudrunv2/jobIamMember:JobIamMember", "roles/run.jobsExecutorWithOverrides"),
        ("http_target", {"url": "https://etl-x.a.run.app/go", "cloud_run_service": "projects/p1/locations/us-east1/services/etl"},
         "http", "gcp:cloudrunv2/serviceIamMember:ServiceIamMember", "roles/run.invoker"),
    ],
)
def test_proxy_targets_get_one_role_on_the_target_only(
    target: str, value: dict[str, str], target_type: str, grant_type: str, role: str
) -> None:
    resources, _ = _component("etl", {"schedule": "0 1 * * *", "region": "us-east1", target: value})
    env = _env(_one(resources, FUNCTION))  # the handler of a proxy target is built from the archive too
    assert env["DEDUP_TARGET_TYPE"] == target_type and "DEDUP_JOB" not in env
    expected_target = next(iter(value.values())) if target != "http_target" else value["url"]
    assert env["DEDUP_TARGET"] == expected_target
    # default attempt deadline 180 s: downstream calls give up after 30 s, Firestore after 20 s
    assert (env["DEDUP_TARGET_TIMEOUT_SECONDS"], env["DEDUP_STORE_TIMEOUT_SECONDS"]) == ("30", "20")
    runtime = "serviceAccount:etl-runtime@p1.iam.gserviceaccount.com"
    runtime_grants = {(role_, typ) for member, role_, typ in _grants(resources) if member == runtime}
    # a Cloud Run job's executions are listed by the existence check: run.viewer on that job too
    viewer = {("roles/run.viewer", grant_type)} if target == "cloud_run_job_target" else set()
    assert runtime_grants == {("roles/datastore.user", "gcp:projects/iAMMember:IAMMember"), (role, grant_type),
                              ("roles/run.viewer", "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"), *viewer}
    for grant_resource in resources:
        if grant_resource.type == "gcp:cloudrunv2/jobIamMember:JobIamMember":
            assert grant_resource.inputs["name"] == value["job"]  # on the job only
    grant = next(r for r in resources if r.type == grant_type and r.inputs["member"] == runtime and r.inputs["role"] == role)
    if target == "workflow_target":
        assert grant.inputs["condition"]["expression"].startswith(f'resource.name == "{value["workflow"]}"')
    else:
        assert grant.inputs["name"] == (value.get("job") or value["cloud_run_service"])
    # a proxy deploy still packages the handler (no user code)
    assert any(r.type == "gcp:storage/bucketObject:BucketObject" for r in resources)


def test_http_target_without_cloud_run_service_grants_nothing_extra() -> None:
    resources, _ = _component("ping", {"schedule": "0 1 * * *", "region": "us-east1",
                                       "http_target": {"url": "https://example.com/hook"}})
    runtime = "serviceAccount:ping-runtime@p1.iam.gserviceaccount.com"
    assert {role for member, role, _ in _grants(resources) if member == runtime} == {"roles/datastore.user", "roles/run.viewer"}, \
        "beyond its own service's policy and its database, nothing"


def test_prebuilt_image_and_existing_database() -> None:
    resources, outputs = _component("imgjob", {
        "schedule": "*/5 * * * *", "region": "us-east1", "image": "us-docker.pkg.dev/p1/r/handler:1", "job": "jobs:run",
        "create_database": False, "deletion_protection": True,
    })
    types = {r.type for r in resources}
    assert "gcp:firestore/database:Database" not in types
    assert not types & {"gcp:storage/bucket:Bucket", "gcp:storage/bucketObject:BucketObject"}
    service = _one(resources, "gcp:cloudrunv2/service:Service").inputs
    assert service["template"]["containers"][0]["image"] == "us-docker.pkg.dev/p1/r/handler:1"
    assert "buildConfig" not in service and service["deletionProtection"] is True
    assert outputs["database_name"] == "(default)"
    assert _one(resources, "gcp:firestore/field:Field", "imgjob-ttl").inputs["database"] == "(default)"


def test_misconfiguration_fails_before_any_resource(tmp_path: Path) -> None:
    config = yaml.safe_load(EXAMPLE.read_text())
    config["config"]["scheduler-dedup:attemptDeadlineSeconds"] = 5
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    registered: list[RegisteredResource] = []
    with pytest.raises(DedupConfigError, match="attempt_deadline_seconds") as info:
        registered = run_stack_config(bad, project_file=ROOT / "Pulumi.yaml")
    assert registered == []
    assert "(stack config scheduler-dedup:attemptDeadlineSeconds)" in str(info.value), "names the key the user edits"


def test_pulumi_yaml_defaults_match_the_code_and_example_sets_every_key() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "scheduler-dedup" and project["runtime"]["name"] == "python"
    known = {k.key: k for k in CONFIG_KEYS}
    declared = project["config"]
    assert set(declared) <= set(known)
    for key, spec in declared.items():
        assert spec["type"] == known[key].type, key
    # with only the project's defaults (and a job), the program resolves to the component's own defaults
    resources = run_program(
        lambda: DedupScheduledJob("scheduled-job", {"schedule": declared["schedule"]["default"],
                                                    "region": declared["region"]["default"],
                                                    "job_source": HELLO, "job": "jobs:run"}),
        {"gcp:project": "p1"},
    )
    from_code = _one(resources, "gcp:cloudscheduler/job:Job").inputs
    tmp = ROOT / "Pulumi.example.yaml"
    example_keys = {k.split(":", 1)[1] for k in yaml.safe_load(tmp.read_text())["config"] if k.startswith("scheduler-dedup:")}
    commented = {line.split(":")[1].strip() for line in tmp.read_text().splitlines() if line.strip().startswith("# scheduler-dedup:")}
    assert example_keys | commented == set(known)
    assert from_code["attemptDeadline"] == f"{declared['attemptDeadlineSeconds']['default']}s"
    assert from_code["retryConfig"] == {
        "retryCount": declared["retryCount"]["default"],
        "maxRetryDuration": f"{declared['maxRetryDurationSeconds']['default']}s",
        "minBackoffDuration": "15s",  # derived from the lease (no project default): see RetryConfigArgs
        "maxBackoffDuration": f"{declared['maxBackoffSeconds']['default']}s",
        "maxDoublings": declared["maxDoublings"]["default"],
    }


def test_a_misspelt_stack_config_key_is_refused_with_the_closest_key(tmp_path: Path) -> None:
    """A typo must not silently fall back to a default (``retrycount`` would leave retries at 0)."""
    config = yaml.safe_load(EXAMPLE.read_text())
    config["config"]["scheduler-dedup:retrycount"] = config["config"].pop("scheduler-dedup:retryCount")
    bad = tmp_path / "Pulumi.typo.yaml"
    bad.write_text(yaml.safe_dump(config))
    with pytest.raises(DedupConfigError, match="did you mean scheduler-dedup:retryCount"):
        run_stack_config(bad, project_file=ROOT / "Pulumi.yaml")


def test_programs_that_call_data_sources_run_under_the_mocks() -> None:
    """get_project / get_iam_policy are common in hand-written stacks; the offline check must not crash on them."""
    import pulumi_gcp as gcp

    def program() -> None:
        project = gcp.organizations.get_project(project_id="p1")
        policy = gcp.organizations.get_iam_policy(bindings=[gcp.organizations.GetIAMPolicyBindingArgs(
            role="roles/owner", members=["allUsers"])])
        gcp.projects.IAMPolicy("policy", gcp.projects.IAMPolicyArgs(project=project.project_id or "p1",
                                                                  policy_data=policy.policy_data or "{}"))

    registered = run_program(program, {"gcp:project": "p1"})
    assert [r.type for r in registered if r.custom] == ["gcp:projects/iAMPolicy:IAMPolicy"]

    from scheduler_dedup.policies.offline.check import check_program

    findings = {f.rule for f in check_program(program, {"gcp:project": "p1"})}
    assert {"no-primitive-roles"} <= findings, findings


@pytest.mark.parametrize(("http_target", "audience"), [
    ({"url": "https://us-central1-my-proj.cloudfunctions.net/export-report"},
     "https://us-central1-my-proj.cloudfunctions.net/export-report"),
    ({"url": "https://etl-x.a.run.app/go"}, "https://etl-x.a.run.app"),
    ({"url": "https://reports.example.com/go", "audience": "https://reports.example.com/custom"},
     "https://reports.example.com/custom"),
])
def test_the_http_target_audience_is_settable_and_written_out(http_target: dict[str, str], audience: str) -> None:
    """A Cloud Functions target only works with the full function URL as audience: the component writes it."""
    resources, _ = _component("fn", {"schedule": "0 1 * * *", "region": "us-central1", "http_target": http_target})
    env = _env(_one(resources, FUNCTION))
    assert env["DEDUP_TARGET_AUDIENCE"] == audience


IMAGE_JOB = {"schedule": "0 1 * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p1/r/handler:1",
             "job": "jobs:run"}


def test_cpu_is_always_allocated_and_boosted_at_start_up_on_the_prebuilt_image() -> None:
    """Lease renewal runs in a background thread while the job runs, also after Scheduler hung up: CPU must not be
    throttled outside requests (pulumi-gcp defaults cpu_idle to true once resources are set)."""
    resources, _ = _component("img", dict(IMAGE_JOB))
    [container] = _one(resources, SERVICE).inputs["template"]["containers"]
    assert container["resources"]["cpuIdle"] is False and container["resources"]["startupCpuBoost"] is True


def test_cpu_always_allocated_can_be_turned_off_from_the_component_and_the_stack_config(tmp_path: Path) -> None:
    """Request-based billing is the user's choice (cheaper for sparse jobs); with an image the default stays CPU always
    allocated."""
    resources, _ = _component("sparse", {**IMAGE_JOB, "cpu_always_allocated": False})
    [container] = _one(resources, SERVICE).inputs["template"]["containers"]
    assert container["resources"]["cpuIdle"] is True and container["resources"]["startupCpuBoost"] is True
    config = yaml.safe_load(EXAMPLE.read_text())
    config["config"]["scheduler-dedup:cpuAlwaysAllocated"] = False
    off = tmp_path / "Pulumi.off.yaml"
    off.write_text(yaml.safe_dump(config))
    assert _one(run_stack_config(off, project_file=ROOT / "Pulumi.yaml"), FUNCTION), "false is what a function does"
    with pytest.raises(DedupConfigError, match="cpu_always_allocated"):
        _component("typo", {**IMAGE_JOB, "cpu_always_allocated": "no"})
