"""``DedupStore(kind="memorystore")`` under Pulumi mocks: the instance as a dedup store needs it, the secrets a job
mounts, its network path, the pack clean; the docs' recipes (a Python program, two stack configs) deploy."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob, DedupStore
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program, run_stack_config
from scheduler_dedup.policies.offline.check import resources_from_registered
from scheduler_dedup.policies.rules import RULES, evaluate
from tests.paths import ROOT, HELLO_JOB
from tests.infra.served import beyond_function_cpu, handler_env, handler_of

HELLO = str(HELLO_JOB)
REDIS = "gcp:redis/instance:Instance"
SERVICE = "gcp:cloudrunv2/service:Service"


def _job(name: str, **extra: Any) -> dict[str, Any]:
    """A job as the examples documented as good make it: alerting on, one instance kept (the advisory rules)."""
    return {"schedule": "0 3 * * *", "region": "us-central1", "job_source": HELLO, "job": "jobs:run",
            "alerts": {"notification_channels": ["projects/p1/notificationChannels/1"]}, "min_instance_count": 1,
            **extra}


def _recipe() -> None:
    """One Memorystore store, one job on it."""
    store = DedupStore("runs", {"kind": "memorystore", "location": "us-central1"})
    DedupScheduledJob("nightly", _job("nightly", store=store))  # type: ignore[arg-type]


def test_the_docs_program_passes_every_mandatory_rule() -> None:
    """docs/stores.md's program, exactly."""
    def program() -> None:
        store = DedupStore("runs", {"kind": "memorystore", "location": "us-central1"})
        DedupScheduledJob("nightly", {"schedule": "0 3 * * *", "region": "us-central1",  # type: ignore[typeddict-item]
                                      "job_source": HELLO, "job": "jobs:run", "store": store})

    resources = run_program(program, {"gcp:project": "p1"})
    assert [f for f in evaluate(resources_from_registered(resources)) if f.level == "mandatory"] == []


def _env(service: RegisteredResource) -> dict[str, Any]:
    return handler_env(service)


def _clean(resources: list[RegisteredResource], stack_outputs: Any = None) -> None:
    every = {rule.name: "mandatory" for rule in RULES}
    findings = beyond_function_cpu(evaluate(resources_from_registered(resources), every))
    assert findings == [], [(f.rule, f.message) for f in findings]


def test_the_instance_is_a_dedup_store_and_the_job_reaches_it_by_its_secrets_and_network() -> None:
    resources = run_program(_recipe, {"gcp:project": "p1"})
    (instance,) = [r.inputs for r in resources if r.type == REDIS]
    assert {k: instance[k] for k in ("tier", "redisVersion", "redisConfigs", "authEnabled", "transitEncryptionMode",
                                     "persistenceConfig", "authorizedNetwork", "connectMode", "region")} == {
        "tier": "STANDARD_HA", "redisVersion": "REDIS_7_2", "redisConfigs": {"maxmemory-policy": "noeviction"},
        "authEnabled": True, "transitEncryptionMode": "SERVER_AUTHENTICATION",
        "persistenceConfig": {"persistenceMode": "RDB", "rdbSnapshotPeriod": "ONE_HOUR"},
        "authorizedNetwork": "projects/p1/global/networks/default", "connectMode": "DIRECT_PEERING",
        "region": "us-central1"}
    versions = {r.name: r.inputs for r in resources if r.type == "gcp:secretmanager/secretVersion:SecretVersion"}
    assert set(versions) == {"runs-redis-auth-version", "runs-redis-ca-version"}
    ca_file = str(versions["runs-redis-ca-version"]["secretData"])
    assert "mock" in ca_file and "next" in ca_file, "the CA file trusts every CA the instance lists (a rotation)"
    service = handler_of(resources)
    env = _env(service)
    assert {k: env[k] for k in env if "REDIS" in k or k == "DEDUP_STORE"} == {
        "DEDUP_STORE": "redis", "DEDUP_REDIS_URL": "rediss://10.128.0.3:6378/0",
        "DEDUP_REDIS_AUTH_FILE": "/secrets/redis-auth/auth", "DEDUP_REDIS_CA_FILE": "/secrets/redis-ca/ca.pem",
        "DEDUP_REDIS_WAIT_TIMEOUT_MS": "500"}
    assert not any("auth-string" in str(v) for v in env.values()), "the AUTH string is never an env value"
    config = service.inputs["serviceConfig"]  # the function a source deploy builds
    assert config["directVpcEgress"] == "VPC_EGRESS_PRIVATE_RANGES_ONLY"
    assert config["directVpcNetworkInterfaces"] == [
        {"network": "projects/p1/global/networks/default", "subnetwork": "default"}]
    assert {v["mountPath"]: v["secret"] for v in config["secretVolumes"]} == {
        "/secrets/redis-auth": "runs-dedup-auth", "/secrets/redis-ca": "runs-dedup-ca"}
    grants = [r.inputs for r in resources if "IamMember" in r.type or r.type == "gcp:projects/iAMMember:IAMMember"]
    secret_grants = [g for g in grants if g.get("role") == "roles/secretmanager.secretAccessor"]
    assert sorted(g["secretId"] for g in secret_grants) == ["runs-dedup-auth", "runs-dedup-ca"]
    assert all(g["member"] == "serviceAccount:nightly-runtime@p1.iam.gserviceaccount.com" for g in secret_grants)
    assert not [g for g in grants if g.get("role") == "roles/datastore.user"], "a Redis job needs no Firestore role"
    assert not [r for r in resources if r.type.startswith("gcp:firestore/")]
    _clean(resources)


def test_the_deploy_archive_of_a_job_on_redis_carries_the_redis_client() -> None:
    import io
    import zipfile

    resources = run_program(_recipe, {"gcp:project": "p1"})
    (archive,) = [r.inputs for r in resources if r.type == "gcp:storage/bucketObject:BucketObject"]
    path = archive["source"].path
    with zipfile.ZipFile(path) as zf:
        assert "redis==" in zf.read("requirements.txt").decode()
        assert "scheduler_dedup/handler/stores/redis/store.py" in zf.namelist()
    del io


@pytest.mark.parametrize(("args", "field", "fix"), [
    ({"kind": "memcache", "location": "us-central1"}, "kind", "firestore, memorystore"),
    ({"kind": "memorystore", "location": "nam5"}, "location", "us-central1"),
    ({"kind": "memorystore", "location": "us-central1", "memory_size_gb": 0}, "memory_size_gb", "1 to 300"),
    ({"kind": "memorystore", "location": "us-central1", "database_id": "x"}, "database_id", "not an input"),
    ({"kind": "memorystore", "location": "us-central1", "wait_timeout_ms": -1}, "wait_timeout_ms", "0 (no WAIT)"),
])
def test_an_invalid_memorystore_input_fails_at_preview(args: dict[str, Any], field: str, fix: str) -> None:
    registered: list[RegisteredResource] = []
    with pytest.raises(DedupConfigError) as caught:
        registered = run_program(lambda: DedupStore("runs", args), {"gcp:project": "p1"})  # type: ignore[arg-type]
    assert caught.value.field == field and fix in str(caught.value)
    assert not [r for r in registered if r.type == REDIS]


def test_the_stack_config_recipe_deploys_a_store_and_a_job_on_it() -> None:
    store = run_stack_config(ROOT / "Pulumi.example-memorystore-store.yaml")
    assert store.exports["kind"] == "memorystore" and store.exports["redis_port"] == 6378
    assert [r.inputs["tier"] for r in store if r.type == REDIS] == ["STANDARD_HA"]
    _clean(list(store))
    job = run_stack_config(ROOT / "Pulumi.example-job-on-memorystore.yaml",
                           stack_outputs={"acme/scheduler-dedup/redis-store": store.exports})
    service = handler_of(list(job))
    env = _env(service)
    assert env["DEDUP_STORE"] == "redis" and env["DEDUP_REDIS_URL"] == f"rediss://{store.exports['redis_host']}:6378/0"
    assert env["DEDUP_REDIS_WAIT_TIMEOUT_MS"] == "500"
    assert service.inputs["serviceConfig"]["directVpcEgress"] == "VPC_EGRESS_PRIVATE_RANGES_ONLY"
    assert not [r for r in job if r.type.startswith(("gcp:firestore/", "gcp:redis/"))], "the store stack owns them"
    _clean(list(job))
