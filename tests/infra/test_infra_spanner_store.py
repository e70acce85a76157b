"""The component on Spanner, under Pulumi mocks: a DedupStore of kind spanner (instance, database with the schema's
DDL, drop protection), jobs on it with a database-scoped grant, a job with a Spanner database of its own, the root
stack's two-line recipe, and every refusal at preview."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from scheduler_dedup.handler.stores.spanner import schema as spanner_schema
from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob, DedupStore
from scheduler_dedup.infra.job.component import TYPE_TOKEN as JOB_TYPE
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program, run_stack_config
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.stores.store import store_apis
from scheduler_dedup.policies.offline.check import resources_from_registered
from scheduler_dedup.policies.rules import evaluate
from tests.paths import ROOT, HELLO_JOB
from tests.infra.served import beyond_function_cpu, handler_env, handler_of

HELLO = str(HELLO_JOB)
INSTANCE, DATABASE = "gcp:spanner/instance:Instance", "gcp:spanner/database:Database"
MEMBER = "gcp:spanner/databaseIAMMember:DatabaseIAMMember"
STORE_STACK = "acme/scheduler-dedup/store"


def _job(name: str, **extra: Any) -> dict[str, Any]:
    """A job as the examples documented as good make it: a daily run (its retries end before the next), one instance
    kept (the advisory rules ``scheduler-runs-overlap`` and ``dedup-scale-in``)."""
    return {"schedule": "0 3 * * *", "region": "us-central1", "job_source": HELLO, "job": "jobs:run",
            "min_instance_count": 1, **extra}


def _of(resources: list[RegisteredResource], typ: str) -> list[RegisteredResource]:
    return [r for r in resources if r.type == typ]


def _env(resources: list[RegisteredResource], job: str) -> dict[str, str]:
    return handler_env(handler_of(resources, job))


def test_a_spanner_store_is_the_smallest_regional_instance_and_a_protected_database_with_the_ddl() -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        store = DedupStore("runs", {"kind": "spanner", "location": "europe-west1",  # type: ignore[typeddict-item]
                                    "collections": ["nightly", "hourly"]})
        keys = ["kind", "project", "instance_id", "database_id", "database_resource_name", "location", "collections"]
        pulumi.Output.all(*[getattr(store, k) for k in keys]).apply(lambda v: outputs.update(zip(keys, v)))

    resources = run_program(program, {"gcp:project": "p1"})
    (instance,) = _of(resources, INSTANCE)
    assert {k: instance.inputs[k] for k in ("name", "config", "processingUnits", "edition", "project")} == {
        "name": "scheduler-dedup", "config": "regional-europe-west1", "processingUnits": 100, "edition": "STANDARD",
        "project": "p1"}
    (database,) = _of(resources, DATABASE)
    assert database.inputs["ddls"] == [*spanner_schema.ddl_statements("nightly"), *spanner_schema.ddl_statements("hourly")]
    assert database.inputs["enableDropProtection"] is True and database.inputs["databaseDialect"] == "GOOGLE_STANDARD_SQL"
    assert outputs == {"kind": "spanner", "project": "p1", "instance_id": "scheduler-dedup",
                       "database_id": "scheduler-dedup",
                       "database_resource_name": "projects/p1/instances/scheduler-dedup/databases/scheduler-dedup",
                       "location": "regional-europe-west1", "collections": ["nightly", "hourly"]}
    apis = {r.inputs["service"] for r in resources if r.type == "gcp:projects/service:Service"}
    assert apis == set(store_apis("spanner")) and "spanner.googleapis.com" in apis
    assert "firestore.googleapis.com" not in apis and not _of(resources, MEMBER)
    assert evaluate(resources_from_registered(resources)) == []


def test_a_spanner_store_adopts_an_instance_and_creates_only_its_database() -> None:
    resources = run_program(lambda: DedupStore("runs", {  # type: ignore[typeddict-item]
        "kind": "spanner", "location": "us-central1", "instance_id": "acme-prod", "create_instance": False}),
        {"gcp:project": "p1"})
    assert not _of(resources, INSTANCE)
    (database,) = _of(resources, DATABASE)
    assert database.inputs["instance"] == "acme-prod"


def test_jobs_on_a_spanner_store_get_database_user_on_that_database_only() -> None:
    def program() -> None:
        store = DedupStore("shared", {"kind": "spanner", "location": "us-central1"})  # type: ignore[typeddict-item]
        for job in ("job-a", "job-b"):
            DedupScheduledJob(job, _job(job, store=store))  # type: ignore[arg-type]

    resources = run_program(program, {"gcp:project": "p1"})
    assert len(_of(resources, DATABASE)) == 1 and len(_of(resources, INSTANCE)) == 1
    grants = [r.inputs for r in _of(resources, MEMBER)]
    assert sorted(g["member"] for g in grants) == [f"serviceAccount:{j}-runtime@p1.iam.gserviceaccount.com"
                                                   for j in ("job-a", "job-b")]
    assert all((g["role"], g["instance"], g["database"]) == ("roles/spanner.databaseUser", "scheduler-dedup",
                                                             "scheduler-dedup") for g in grants)
    project_roles = [r.inputs["role"] for r in resources if r.type == "gcp:projects/iAMMember:IAMMember"]
    assert not [role for role in project_roles if "spanner" in role or "datastore" in role], project_roles
    for job in ("job-a", "job-b"):
        env = _env(resources, job)
        assert {k: env[k] for k in ("DEDUP_STORE", "DEDUP_SPANNER_INSTANCE", "DEDUP_SPANNER_DATABASE")} == {
            "DEDUP_STORE": "spanner", "DEDUP_SPANNER_INSTANCE": "scheduler-dedup",
            "DEDUP_SPANNER_DATABASE": "scheduler-dedup"}
        assert "DEDUP_DATABASE" not in env
    job = next(r for r in resources if r.type == JOB_TYPE and r.name == "job-a")
    assert not [r for r in resources if r.parent == job.urn and r.type.startswith(("gcp:spanner/instance",
                                                                                   "gcp:spanner/database:",
                                                                                   "gcp:projects/service"))]
    assert beyond_function_cpu(evaluate(resources_from_registered(resources), {"dedup-job-alerting": "disabled"})) == []


def test_a_job_puts_its_own_table_on_a_spanner_database_without_a_store() -> None:
    """``store_kind="spanner"`` and an existing instance: the job creates a database of its own there, with its
    table's DDL, and grants itself databaseUser on it; without ``spanner_instance`` it creates the instance too."""
    resources = run_program(lambda: DedupScheduledJob("solo", _job(  # type: ignore[arg-type]
        "solo", store_kind="spanner", spanner_instance="acme-prod", collection="solo_runs")), {"gcp:project": "p1"})
    assert not _of(resources, INSTANCE)
    (database,) = _of(resources, DATABASE)
    assert (database.inputs["instance"], database.inputs["name"]) == ("acme-prod", "solo-dedup")
    assert database.inputs["ddls"] == spanner_schema.ddl_statements("solo_runs")
    (grant,) = [r.inputs for r in _of(resources, MEMBER)]
    assert (grant["instance"], grant["database"], grant["role"]) == ("acme-prod", "solo-dedup",
                                                                     "roles/spanner.databaseUser")
    env = _env(resources, "solo")
    assert (env["DEDUP_STORE"], env["DEDUP_SPANNER_INSTANCE"], env["DEDUP_COLLECTION"]) == ("spanner", "acme-prod",
                                                                                           "solo_runs")
    archive = next(r for r in resources if r.type == "gcp:storage/bucketObject:BucketObject")
    assert archive is not None  # the archive pins the Spanner client only (tests/infra/test_infra_archive.py)
    own = run_program(lambda: DedupScheduledJob("solo", _job("solo", store_kind="spanner")),  # type: ignore[arg-type]
                      {"gcp:project": "p1"})
    (instance,) = _of(own, INSTANCE)
    assert (instance.inputs["name"], instance.inputs["processingUnits"]) == ("solo-dedup", 100)


@pytest.mark.parametrize(("store", "field", "match"), [
    ({"kind": "spanner", "location": "us-central1", "processing_units": 150}, "processing_units", "steps of 100"),
    ({"kind": "spanner", "location": "us-central1", "create_instance": False, "processing_units": 200},
     "processing_units", "created instance only"),
    ({"kind": "spanner", "location": "us-central1", "create_database": False}, "create_database", "always creates"),
    ({"kind": "spanner", "location": "us-central1", "database_id": "Bad_DB"}, "database_id", "Spanner database id"),
    ({"kind": "spanner", "location": "us-central1", "collections": ["select"]}, "collections", "reserved keyword"),
    ({"kind": "spanner", "location": "us-central1", "collections": ["Runs", "runs"]}, "collections", "twice"),
    ({"location": "eur3", "processing_units": 100}, "processing_units", "kind to 'spanner'"),
    ({"kind": "bigtable", "location": "eur3"}, "kind", "not a store kind"),
    ({"location": "eur3", "memory_size_gb": 1}, "memory_size_gb", "kind to 'memorystore'"),
    ({"location": "eur3", "instance_id": "x1"}, "instance_id", "kind to 'memorystore' or 'spanner'"),
    ({"kind": "spanner", "location": "us-central1", "memory_size_gb": 1}, "memory_size_gb", "Spanner DedupStore"),
])
def test_a_spanner_store_refuses_bad_inputs_at_preview(store: dict[str, Any], field: str, match: str) -> None:
    with pytest.raises(DedupConfigError, match=match) as info:
        run_program(lambda: DedupStore("s", store), {"gcp:project": "p1"})  # type: ignore[arg-type]
    assert info.value.field == field


@pytest.mark.parametrize(("extra", "field"), [
    ({"spanner_instance": "acme"}, "spanner_instance"),  # without store_kind=spanner
    ({"store_kind": "spanner", "create_database": False}, "create_database"),
    ({"store_kind": "spanner", "collection": "has-dash"}, "collections"),
    ({"store_kind": "mongodb"}, "store_kind"),
    ({"store_kind": "firestore", "store": {"kind": "spanner", "project": "p1", "instance_id": "i1",
                                           "database_id": "d1", "collections": ["scheduler_runs"]}}, "store_kind"),
    ({"store": {"kind": "spanner", "project": "p1", "database_id": "d1", "collections": ["scheduler_runs"]}},
     "store.instance_id"),
    ({"store": {"project": "p1", "instance_id": "i1", "database_id": "d1", "collections": ["scheduler_runs"]}},
     "store.instance_id"),  # a Spanner store's output on a Firestore store
    ({"store_kind": "memorystore"}, "store_kind"),  # a Memorystore store is a DedupStore of its own
    ({"store": {"kind": pulumi.Output.from_input("spanner"), "project": "p1", "instance_id": "i1",
                "database_id": "d1", "collections": ["scheduler_runs"]}}, "store.kind"),  # known at preview only
])
def test_a_job_refuses_contradictory_spanner_inputs(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("j", _job("j", **extra), default_project="p1")
    assert info.value.field == field, str(info.value)


def test_the_two_line_recipe_deploys_a_job_on_a_spanner_store_stack_and_every_rule_passes() -> None:
    """docs/stores.md: a Spanner store stack, then a job stack that names it in two lines (storeStack, storeKind)."""
    store = run_stack_config(ROOT / "Pulumi.example-spanner-store.yaml")
    assert store.exports["kind"] == "spanner" and store.exports["instance_id"] == "scheduler-dedup"
    job = run_stack_config(ROOT / "Pulumi.example-job-on-spanner-store.yaml", stack_outputs={STORE_STACK: store.exports})
    env = _env(job, "nightly-report")
    assert (env["DEDUP_STORE"], env["DEDUP_SPANNER_INSTANCE"], env["DEDUP_SPANNER_DATABASE"]) == (
        "spanner", "scheduler-dedup", "scheduler-dedup")
    assert not _of(job, DATABASE) and not _of(job, INSTANCE) and len(_of(job, MEMBER)) == 1
    assert evaluate(resources_from_registered(store)) == []
    assert beyond_function_cpu(evaluate(resources_from_registered(job))) == []


def test_a_job_stack_naming_a_firestore_store_stack_as_spanner_is_refused() -> None:
    store = run_stack_config(ROOT / "Pulumi.example-store.yaml")
    # raised where the store stack's kind output resolves (the engine wraps it in the resource's ValueError)
    with pytest.raises(ValueError, match="is a firestore store, but this stack's storeKind is spanner"):
        run_stack_config(ROOT / "Pulumi.example-job-on-spanner-store.yaml", stack_outputs={STORE_STACK: {
            **store.exports, "instance_id": "x"}})


def test_an_app_engine_job_on_its_own_spanner_database_gets_the_same_store_environment() -> None:
    """The App Engine version is given the store's settings as the Cloud Run service is, and the grant on the
    database; every mandatory rule passes."""
    resources = run_program(lambda: DedupScheduledJob("nightly", _job(  # type: ignore[arg-type]
        "nightly", store_kind="spanner", spanner_instance="acme-prod", app_engine={"service": "dedup"})),
        {"gcp:project": "p1"})
    (version,) = _of(resources, "gcp:appengine/standardAppVersion:StandardAppVersion")
    env = version.inputs["envVariables"]
    assert (env["DEDUP_STORE"], env["DEDUP_SPANNER_INSTANCE"], env["DEDUP_SPANNER_DATABASE"]) == (
        "spanner", "acme-prod", "nightly-dedup")
    assert "DEDUP_DATABASE" not in env
    (grant,) = [r.inputs for r in _of(resources, MEMBER)]
    assert (grant["instance"], grant["database"]) == ("acme-prod", "nightly-dedup")
    found = evaluate(resources_from_registered(resources), {"dedup-job-alerting": "disabled"})
    assert [f for f in found if f.level == "mandatory"] == []
