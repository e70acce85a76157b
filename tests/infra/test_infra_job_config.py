"""The job's own configuration under Pulumi mocks with typed Args: env vars, secrets (as env vars and files),
CPU and memory, labels, VPC egress and the roles of its own work; and each mistake refused at preview, all at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob, DedupStore
from scheduler_dedup.infra.errors import DedupConfigErrors
from scheduler_dedup.infra.args import DedupScheduledJobArgs
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from tests.infra.served import beyond_function_cpu

HELLO = str(Path(__file__).resolve().parents[2] / "examples" / "hello_job")
FUNCTION = "gcp:cloudfunctionsv2/function:Function"
SECRET_MEMBER = "gcp:secretmanager/secretIamMember:SecretIamMember"


def _args(**extra: Any) -> DedupScheduledJobArgs:
    args: DedupScheduledJobArgs = {"schedule": "0 3 * * *", "region": "us-central1", "job_source": HELLO,
                                   "job": "jobs:run"}
    args.update(extra)  # type: ignore[typeddict-item]
    return args


def _real_job() -> DedupScheduledJobArgs:
    return _args(
        env={"REPORT_BUCKET": "acme-reports"},
        secret_env={"DB_PASSWORD": {"secret": "db-password", "version": "3"}},
        secret_files=[{"secret": "projects/p1/secrets/sa-key", "path": "/secrets/sa/key.json"}],
        cpu="2", memory="2Gi", labels={"team": "data"},
        vpc={"network": "default", "subnetwork": "default", "egress": "PRIVATE_RANGES_ONLY"},
        job_roles=[{"role": "roles/storage.objectCreator", "resource": "buckets/acme-reports"}],
    )


def _deploy(args: DedupScheduledJobArgs) -> list[RegisteredResource]:
    return run_program(lambda: DedupScheduledJob("nightly", args), {"gcp:project": "p1"})


def _function(resources: list[RegisteredResource]) -> dict[str, Any]:
    """The inputs of the function a source deploy builds and serves the handler with."""
    (function,) = [r.inputs for r in resources if r.type == FUNCTION]
    return function


def test_a_real_job_gets_its_env_secrets_memory_labels_vpc_and_roles() -> None:
    resources = _deploy(_real_job())
    function = _function(resources)
    config = function["serviceConfig"]
    assert config["environmentVariables"]["REPORT_BUCKET"] == "acme-reports"
    assert config["secretEnvironmentVariables"] == [
        {"key": "DB_PASSWORD", "projectId": "p1", "secret": "db-password", "version": "3"}]
    assert "DB_PASSWORD" not in config["environmentVariables"], "a secret is never a plain value"
    # the handler learns which values to scrub by name and path, never by value
    assert config["environmentVariables"]["DEDUP_SECRET_ENV"] == "DB_PASSWORD"
    assert config["environmentVariables"]["DEDUP_SECRET_FILES"] == "/secrets/sa/key.json"
    assert (config["availableCpu"], config["availableMemory"]) == ("2", "2Gi")
    assert config["secretVolumes"] == [{"mountPath": "/secrets/sa", "projectId": "p1", "secret": "sa-key",
                                        "versions": [{"path": "key.json", "version": "latest"}]}]
    assert config["directVpcEgress"] == "VPC_EGRESS_PRIVATE_RANGES_ONLY"
    assert config["directVpcNetworkInterfaces"] == [{"network": "default", "subnetwork": "default"}]
    assert function["labels"] == {"managed-by": "scheduler-dedup", "team": "data"}
    for typ in ("gcp:storage/bucket:Bucket", "gcp:artifactregistry/repository:Repository"):
        (child,) = [r.inputs for r in resources if r.type == typ]
        assert child["labels"] == {"managed-by": "scheduler-dedup", "team": "data"}, typ
    apis = {r.inputs["service"] for r in resources if r.type == "gcp:projects/service:Service"}
    assert {"secretmanager.googleapis.com", "compute.googleapis.com"} <= apis


def test_the_runtime_identity_reads_exactly_the_named_secrets() -> None:
    resources = _deploy(_real_job())
    grants = [r for r in resources if r.type == SECRET_MEMBER]
    assert sorted((g.inputs["secretId"], g.inputs["role"]) for g in grants) == [
        ("db-password", "roles/secretmanager.secretAccessor"), ("sa-key", "roles/secretmanager.secretAccessor")]
    assert all(g.inputs["member"].startswith("serviceAccount:nightly-runtime@") for g in grants)
    project_roles = [r.inputs["role"] for r in resources if r.type == "gcp:projects/iAMMember:IAMMember"]
    assert not any("secretmanager" in role for role in project_roles), "no project-wide secret access"
    (function,) = [r for r in resources if r.type == FUNCTION]
    assert {g.urn for g in grants} <= set(function.dependencies), "the first revision may read its secrets"


def test_a_job_role_is_one_iam_member_on_the_named_resource_with_a_clear_name() -> None:
    resources = _deploy(_args(job_roles=[
        {"role": "roles/storage.objectCreator", "resource": "buckets/acme-reports"},
        {"role": "roles/pubsub.publisher", "resource": "projects/p1/topics/reports"},
        {"role": "roles/bigquery.dataEditor", "resource": "projects/p1/datasets/reports"},
    ]))
    named = {r.name: r for r in resources if "-job-role-" in r.name}
    assert sorted((r.type, r.inputs["role"]) for r in named.values()) == [
        ("gcp:bigquery/datasetIamMember:DatasetIamMember", "roles/bigquery.dataEditor"),
        ("gcp:pubsub/topicIAMMember:TopicIAMMember", "roles/pubsub.publisher"),
        ("gcp:storage/bucketIAMMember:BucketIAMMember", "roles/storage.objectCreator")]
    bucket = next(r for r in named.values() if r.type.startswith("gcp:storage"))
    assert bucket.name.startswith("nightly-job-role-storage-objectcreator-") and bucket.inputs["bucket"] == "acme-reports"
    assert all(r.inputs["member"].startswith("serviceAccount:nightly-runtime@") for r in named.values())


def test_a_connector_and_a_memorystore_store_egress() -> None:
    config = _function(_deploy(_args(vpc={"connector": "projects/p1/locations/us-central1/connectors/sql",
                                          "egress": "ALL_TRAFFIC"})))["serviceConfig"]
    assert (config["vpcConnector"], config["vpcConnectorEgressSettings"]) == (
        "projects/p1/locations/us-central1/connectors/sql", "ALL_TRAFFIC")

    def on_store() -> None:
        store = DedupStore("runs", {"kind": "memorystore", "location": "us-central1"})
        DedupScheduledJob("nightly", _args(store=store, vpc={"egress": "ALL_TRAFFIC"},  # type: ignore[typeddict-item]
                                           secret_files=[{"secret": "tls", "path": "/secrets/tls/cert.pem"}]))

    config = _function(run_program(on_store, {"gcp:project": "p1"}))["serviceConfig"]
    assert config["directVpcEgress"] == "VPC_EGRESS_ALL_TRAFFIC"
    assert config["directVpcNetworkInterfaces"][0]["network"] == "projects/p1/global/networks/default"
    assert [v["mountPath"] for v in config["secretVolumes"]] == [
        "/secrets/redis-auth", "/secrets/redis-ca", "/secrets/tls"], "the store's mounts and the job's together"


def _errors(**extra: Any) -> dict[str, str]:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("nightly", _args(**extra), default_project="p1")
    errors = info.value.errors if isinstance(info.value, DedupConfigErrors) else [info.value]
    return {e.field: str(e) for e in errors}


def test_every_mistake_of_the_job_config_is_refused_at_once_naming_field_and_fix() -> None:
    found = _errors(
        env={"PORT": "8080", "DEDUP_LEASE_SECONDS": "10", "A=B": "x", "X_GOOGLE_FOO": "1", "": "y", "N": 3,
             "THREADS": "4"},
        secret_env={"PASSWORD": {"secret": "projects/other/secrets/pw"}, "K_SERVICE": {"secret": "s"},
                    "TOKEN": {"secret": "tok", "version": "v2"}},
        secret_files=[{"secret": "a", "path": "/etc/a"}, {"secret": "b", "path": "relative/b"},
                      {"secret": "c", "path": "/secrets/x/c"}, {"secret": "d", "path": "/secrets/x/d"}],
        cpu="0.5", labels={"Team": "x", "env": "Prod"},
        vpc={"connector": "projects/p1/locations/europe-west1/connectors/c"},
        job_roles=[{"role": "storage.admin", "resource": "buckets/b"}, {"role": "roles/x", "resource": "gs://b"}],
    )
    assert "set by Cloud Run itself" in found["env.PORT"] and "set by Cloud Run itself" in found["secret_env.K_SERVICE"]
    assert "the dedup handler's" in found["env.DEDUP_LEASE_SECONDS"] and "component input" in found["env.DEDUP_LEASE_SECONDS"]
    assert "the dedup handler's" in found["env.THREADS"]
    assert "'='" in found["env.A=B"] and "X_GOOGLE_" in found["env.X_GOOGLE_FOO"] and "empty" in found["env."]
    assert "quote it" in found["env.N"]
    assert "project 'other'" in found["secret_env.PASSWORD.secret"] and "own project" in found["secret_env.PASSWORD.secret"]
    assert "'3' (pinned) or 'latest'" in found["secret_env.TOKEN.version"]
    assert "folder the container" in found["secret_files[0].path"]
    assert "absolute file path" in found["secret_files[1].path"]
    assert "already holds secret_files[2]" in found["secret_files[3].path"]
    assert "1, 2, 4, 6 or 8" in found["cpu"] and "concurrency 1" in found["cpu"]
    assert "label key" in found["labels.Team"] and "label value" in found["labels.env"]
    assert "europe-west1, the job in us-central1" in found["vpc.connector"]
    assert "roles/NAME" in found["job_roles[0].role"] and "buckets/B" in found["job_roles[1].resource"]


@pytest.mark.parametrize(("cpu", "memory", "field", "fix"), [
    ("1", "8Gi", "cpu", "set cpu to 2"),
    ("2", "16Gi", "cpu", "set cpu to 4"),
    ("4", "1Gi", "memory", "at least 2Gi"),
    ("8", "2Gi", "memory", "at least 4Gi"),
    (None, "5Gi", "cpu", "set cpu to 2"),
    ("1", "64Mi", "memory", "set memory to at least 512Mi"),
    ("8", "40Gi", "memory", "at most 32Gi, with 8 CPU"),
    (None, "64Gi", "memory", "at most 32Gi, with 8 CPU; set memory to 32Gi or less"),  # the reported input
    (None, "20Gi", "cpu", "set cpu to 6"),
    ("3", None, "cpu", "1, 2, 4, 6 or 8"),
    ("3", "20Gi", "cpu", "1, 2, 4, 6 or 8, at least 6 for 20Gi of memory"),
    (None, "2GB", "memory", "not a memory size"),
])
def test_cpu_and_memory_outside_cloud_run_limits_are_refused(cpu: str | None, memory: str | None, field: str,
                                                             fix: str) -> None:
    found = _errors(**{k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None})
    assert list(found) == [field] and fix in found[field], found
    assert "cloud.google.com/run/docs/configuring/services/" in found[field]


def test_memory_past_the_maximum_names_the_cpu_each_size_needs_and_a_bad_cpu_is_refused_with_it() -> None:
    found = _errors(cpu="3", memory="64Gi")
    assert set(found) == {"cpu", "memory"}, found
    assert "more than 4Gi needs cpu 2, more than 8Gi 4, more than 16Gi 6, more than 24Gi 8" in found["memory"]


@pytest.mark.parametrize(("cpu", "memory"), [("1", "4Gi"), ("2", "8Gi"), ("4", "16Gi"), ("6", "24Gi"), ("8", "32Gi"),
                                             (None, "512Mi"), ("8", "4Gi")])
def test_cpu_and_memory_within_cloud_run_limits_pass(cpu: str | None, memory: str) -> None:
    s = resolve_settings("nightly", _args(memory=memory, **({"cpu": cpu} if cpu else {})), default_project="p1")
    assert s.job_config.limits.memory == memory


def test_a_credential_looking_plain_value_gets_an_advisory_naming_secret_manager() -> None:
    s = resolve_settings("nightly", _args(env={"DB_PASSWORD": "hunter2", "REPORT_BUCKET": "acme-reports",
                                               "DATABASE_URL": "postgres://app:s3cret@10.0.0.3/db"}),
                         default_project="p1")
    flagged = [a for a in s.advisories if "Secret Manager" in a]
    assert len(flagged) == 2 and any("env.DB_PASSWORD" in a for a in flagged) and any(
        "env.DATABASE_URL" in a and "its value" in a for a in flagged)
    assert not any("REPORT_BUCKET" in a for a in s.advisories)


def test_cloud_run_only_job_config_is_refused_beside_app_engine() -> None:
    found = _errors(app_engine={"service": "dedup"}, secret_env={"PW": {"secret": "pw"}})
    assert "cannot be used with app_engine" in found["secret_env"]


def test_with_a_memorystore_store_the_vpc_is_the_stores() -> None:
    store = {"kind": "memorystore", "project": "p1", "collections": ["scheduler_runs"], "redis_host": "10.0.0.3",
             "redis_port": 6378, "auth_secret": "a", "ca_secret": "c", "network": "projects/p1/global/networks/n",
             "subnetwork": "s"}
    found = _errors(store=store, vpc={"network": "other"})
    assert "the Memorystore store's network is the job's" in found["vpc.network"]


def test_more_environment_variables_than_cloud_run_takes_are_refused() -> None:
    found = _errors(env={f"V{i}": "x" for i in range(990)})
    assert "Cloud Run takes at most 1000" in found["env"]


def test_the_stack_config_of_a_real_job_deploys_and_its_mistakes_name_their_keys(tmp_path: Path) -> None:
    from scheduler_dedup.infra.stack.mock_run import run_stack_config

    root = Path(__file__).resolve().parents[2]
    resources = run_stack_config(root / "Pulumi.example-nightly-report.yaml")
    config = _function(resources)["serviceConfig"]
    assert "REPORT_BUCKET" in config["environmentVariables"]
    assert [v["key"] for v in config["secretEnvironmentVariables"]] == ["DB_PASSWORD"]
    assert (config["availableCpu"], config["availableMemory"]) == ("1", "2Gi")
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text((root / "Pulumi.example-nightly-report.yaml").read_text().replace(
        "REPORT_BUCKET: acme-reports", "PORT: '8080'").replace("memory: 2Gi", "memory: 8Gi"))
    with pytest.raises(DedupConfigError) as info:
        run_stack_config(bad, project_file=root / "Pulumi.yaml")
    text = str(info.value)
    assert "(stack config scheduler-dedup:env)" in text and "(stack config scheduler-dedup:cpu)" in text, text


def test_the_real_job_example_passes_every_rule_of_the_policy_pack() -> None:
    """What ``scheduler-dedup check --stack example-nightly-report`` runs, with every rule raised to mandatory."""
    from scheduler_dedup.policies.offline.check import check_stack_config
    from scheduler_dedup.policies.rules import RULES

    root = Path(__file__).resolve().parents[2]
    every = {rule.name: "mandatory" for rule in RULES}
    assert beyond_function_cpu(check_stack_config(root / "Pulumi.example-nightly-report.yaml", root / "Pulumi.yaml",
                                                  every)) == []



def test_variables_that_redirect_the_handler_are_refused_as_job_env_at_once() -> None:
    """The handler's environment is the component's: a job's env or secret_env may not point its store, credentials,
    metadata server, TLS trust or proxy elsewhere (any case)."""
    found = _errors(env={"FIRESTORE_EMULATOR_HOST": "10.0.0.9:8080", "GCE_METADATA_HOST": "10.0.0.9",
                         "REQUESTS_CA_BUNDLE": "/app/ca.pem", "https_proxy": "http://10.0.0.9:3128"},
                    secret_env={"GOOGLE_APPLICATION_CREDENTIALS": {"secret": "key"}})
    for field in ("env.FIRESTORE_EMULATOR_HOST", "env.GCE_METADATA_HOST", "env.REQUESTS_CA_BUNDLE", "env.https_proxy",
                  "secret_env.GOOGLE_APPLICATION_CREDENTIALS"):
        assert "redirects" in found[field] and "https://" in found[field], found


def test_what_moves_the_handlers_credentials_file_is_refused_at_once() -> None:
    """Application Default Credentials read ``$HOME/.config/gcloud/application_default_credentials.json`` before the
    runtime account: a job's HOME, or a secret file mounted in a home folder, would swap the handler's credentials
    as GOOGLE_APPLICATION_CREDENTIALS does. The resolver and TLS variables redirect it too."""
    found = _errors(env={"HOME": "/secrets/adc", "LOCALDOMAIN": "evil.example", "SSLKEYLOGFILE": "/mnt/keys"},
                    secret_env={"CLOUDSDK_CONTEXT_AWARE_CERTIFICATE_CONFIG_FILE_PATH": {"secret": "c"}},
                    secret_files=[{"secret": "adc", "path": "/root/.config/gcloud/application_default_credentials.json"},
                                  {"secret": "adc2", "path": "/home/cnb/.config/gcloud/application_default_credentials.json"}])
    for field in ("env.HOME", "env.LOCALDOMAIN", "env.SSLKEYLOGFILE",
                  "secret_env.CLOUDSDK_CONTEXT_AWARE_CERTIFICATE_CONFIG_FILE_PATH"):
        assert "redirects" in found[field] and "https://" in found[field], found
    assert "home folder" in found["secret_files[0].path"] and "home folder" in found["secret_files[1].path"], found
