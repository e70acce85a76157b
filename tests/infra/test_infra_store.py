"""One store, many jobs: ``DedupStore`` owns the database, the TTL policy and the run history indexes; jobs only get their grant."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from scheduler_dedup.handler.core.record import TTL_FIELD
from scheduler_dedup.handler.stores.firestore.schema import RUN_HISTORY_INDEXES
from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob, DedupStore
from scheduler_dedup.infra.job.component import TYPE_TOKEN as JOB_TYPE
from scheduler_dedup.infra.stack.mock_run import STACK_REFERENCE, RegisteredResource, run_program, run_stack_config
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.stores.firestore import resolve_store_settings
from scheduler_dedup.infra.stores.store import TYPE_TOKEN as STORE_TYPE, store_apis
from scheduler_dedup.policies.offline.check import resources_from_registered
from scheduler_dedup.policies.rules import evaluate
from tests.paths import ROOT, HELLO_JOB
from tests.infra.served import beyond_function_cpu, handler_env, handler_of

HELLO = str(HELLO_JOB)
FIELD = "gcp:firestore/field:Field"


def _ttl_keys(resources: list[RegisteredResource]) -> Counter[tuple[str, str, str, str]]:
    """How many TTL Field resources manage each (project, database, collection, field)."""
    return Counter(
        (r.inputs.get("project", ""), r.inputs.get("database", "(default)"), r.inputs["collection"], r.inputs["field"])
        for r in resources if r.type == FIELD and "ttlConfig" in r.inputs
    )


def _job(name: str, **extra: Any) -> dict[str, Any]:
    return {"schedule": "*/15 * * * *", "region": "us-central1", "job_source": HELLO, "job": "jobs:run", **extra}


def test_two_jobs_adopting_one_database_never_make_two_owners_of_one_ttl_policy() -> None:
    """Two components, create_database=False, same database and collection: two Field resources would manage
    one real TTL setting, and destroying either stack would remove it for both. The second job is refused
    at preview with the fix (a shared DedupStore), so at most one TTL owner is ever registered."""
    registered: list[RegisteredResource] = []

    def program() -> None:
        DedupScheduledJob("job-a", _job("job-a", create_database=False, database_id="shared-db"))  # type: ignore[arg-type]
        DedupScheduledJob("job-b", _job("job-b", create_database=False, database_id="shared-db"))  # type: ignore[arg-type]

    with pytest.raises(DedupConfigError) as info:
        registered = run_program(program, {"gcp:project": "p1"})
    assert info.value.field == "store" and "DedupStore" in str(info.value), str(info.value)
    assert all(count <= 1 for count in _ttl_keys(registered).values())


def test_a_job_without_a_store_cannot_take_a_collection_a_store_of_the_program_owns() -> None:
    def program() -> None:
        DedupStore("shared", {"location": "eur3", "create_database": False})
        DedupScheduledJob("job-a", _job("job-a", create_database=False))  # type: ignore[arg-type]

    with pytest.raises(DedupConfigError, match="DedupStore shared and DedupScheduledJob job-a both set a TTL policy") as info:
        run_program(program, {"gcp:project": "p1"})
    assert info.value.field == "store"


def _grants(resources: list[RegisteredResource]) -> list[RegisteredResource]:
    return [r for r in resources if r.type.lower().endswith("iammember")]


def _env(resources: list[RegisteredResource], job: str) -> dict[str, str]:
    return handler_env(handler_of(resources, job))


def test_the_same_jobs_sharing_a_store_register_one_ttl_policy_and_one_database() -> None:
    def program() -> None:
        store = DedupStore("shared", {"location": "eur3"})
        for job in ("job-a", "job-b"):
            DedupScheduledJob(job, _job(job, store=store))  # type: ignore[arg-type]

    resources = run_program(program, {"gcp:project": "p1"})
    assert _ttl_keys(resources) == {("p1", "scheduler-dedup", "scheduler_runs", TTL_FIELD): 1}
    assert [r.name for r in resources if r.type == "gcp:firestore/database:Database"] == ["shared-db"]
    store = next(r for r in resources if r.type == STORE_TYPE)
    firestore = [r for r in resources if r.type.startswith("gcp:firestore/")]
    assert firestore and all(r.parent == store.urn for r in firestore), "the store owns every Firestore resource"
    for job in ("job-a", "job-b"):
        env = _env(resources, job)
        assert (env["DEDUP_DATABASE"], env["DEDUP_COLLECTION"]) == ("scheduler-dedup", "scheduler_runs")
        assert "DEDUP_TTL_OWNER" not in env, "the TTL policy is in this stack: nothing to declare"


def test_store_owns_one_ttl_policy_and_the_history_indexes_per_collection() -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        store = DedupStore("runs", {"location": "nam5", "collections": ["nightly", "hourly"], "database_id": "runs-db"})
        keys = ["project", "database_id", "database_resource_name", "location", "collections", "ttl_field"]
        pulumi.Output.all(*[getattr(store, k) for k in keys]).apply(lambda v: outputs.update(zip(keys, v)))

    resources = run_program(program, {"gcp:project": "p1"})
    assert _ttl_keys(resources) == {("p1", "runs-db", c, TTL_FIELD): 1 for c in ("nightly", "hourly")}
    indexes = [r.inputs for r in resources if r.type == "gcp:firestore/index:Index"]
    expected = [[{"fieldPath": f, "order": o} for f, o in fields] for fields in RUN_HISTORY_INDEXES]
    for collection in ("nightly", "hourly"):
        assert [i["fields"] for i in indexes if i["collection"] == collection] == expected
    assert all(i["database"] == "runs-db" and i["queryScope"] == "COLLECTION" for i in indexes)
    db = next(r for r in resources if r.type == "gcp:firestore/database:Database").inputs
    assert (db["name"], db["locationId"], db["type"]) == ("runs-db", "nam5", "FIRESTORE_NATIVE")
    assert outputs == {"project": "p1", "database_id": "runs-db", "database_resource_name": "projects/p1/databases/runs-db",
                       "location": "nam5", "collections": ["nightly", "hourly"], "ttl_field": TTL_FIELD}
    apis = {r.inputs["service"] for r in resources if r.type == "gcp:projects/service:Service"}
    assert apis == set(store_apis()) and not _grants(resources), "a store grants nothing: each job grants its own"


def test_a_job_without_a_store_creates_the_history_indexes_too() -> None:
    resources = run_program(lambda: DedupScheduledJob("solo", _job("solo")), {"gcp:project": "p1"})  # type: ignore[arg-type]
    indexes = [r for r in resources if r.type == "gcp:firestore/index:Index"]
    assert [[(f["fieldPath"], f["order"]) for f in r.inputs["fields"]] for r in indexes] == [list(f) for f in RUN_HISTORY_INDEXES]
    assert all((r.inputs["database"], r.inputs["collection"]) == ("solo-dedup", "scheduler_runs") for r in indexes)
    assert {r.name for r in resources if r.type == "gcp:firestore/database:Database" or r.inputs.get("ttlConfig") == {}} \
        == {"solo-ttl", "solo-db"}


def test_a_job_on_a_store_gets_only_its_own_grant_on_that_database() -> None:
    def program() -> None:
        store = DedupStore("shared", {"location": "eur3", "database_id": "dedup-runs"})
        DedupScheduledJob("report", _job("report", store=store))  # type: ignore[arg-type]

    resources = run_program(program, {"gcp:project": "p1"})
    job = next(r for r in resources if r.type == JOB_TYPE)
    owned = [r for r in resources if r.parent == job.urn]
    assert not [r for r in owned if r.type.startswith(("gcp:firestore/", "gcp:projects/service"))]
    datastore = [r.inputs for r in _grants(owned) if r.inputs["role"] == "roles/datastore.user"]
    assert datastore == [{
        "project": "p1", "role": "roles/datastore.user", "member": "serviceAccount:report-runtime@p1.iam.gserviceaccount.com",
        "condition": {"title": "only dedup-runs", "expression": 'resource.name == "projects/p1/databases/dedup-runs"',
                      "description": "scheduler-dedup: Firestore access limited to the dedup database"},
    }]


def test_store_outputs_from_a_stack_reference_are_checked_when_they_resolve() -> None:
    """The job stack reads the store's outputs as Outputs; a collection the store does not own fails the run."""
    def program(collection: str) -> None:
        ref = pulumi.StackReference("acme/scheduler-dedup/store")
        store = {"project": ref.require_output("project"), "database_id": ref.require_output("database_id"),
                 "collections": ref.require_output("collections"), "ttl_owner": "stack acme/scheduler-dedup/store"}
        DedupScheduledJob("report", _job("report", store=store, collection=collection))  # type: ignore[arg-type]

    outputs = {"acme/scheduler-dedup/store": {"project": "p1", "database_id": "dedup-runs", "collections": ["scheduler_runs"]}}
    resources = run_program(lambda: program("scheduler_runs"), {"gcp:project": "p1"}, stack_outputs=outputs)
    env = _env(resources, "report")
    assert (env["DEDUP_DATABASE"], env["DEDUP_TTL_OWNER"]) == ("dedup-runs", "stack acme/scheduler-dedup/store")
    assert not [r for r in resources if r.type.startswith("gcp:firestore/")]
    # Raised inside the output, so the engine reports it and `pulumi preview` fails. Run in a child process:
    # every consumer of the failed output leaves an unretrieved future that asyncio reports at exit.
    code = textwrap.dedent(f"""
        import pulumi
        from scheduler_dedup.infra import DedupScheduledJob
        from scheduler_dedup.infra.stack.mock_run import run_program
        def program():
            ref = pulumi.StackReference("acme/scheduler-dedup/store")
            store = {{k: ref.require_output(k) for k in ("project", "database_id", "collections")}}
            DedupScheduledJob("report", {_job("report", collection="other_runs")!r} | {{"store": store}})
        run_program(program, {{"gcp:project": "p1"}}, stack_outputs={outputs!r})
    """)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert child.returncode != 0
    assert "collection: 'other_runs' is not a collection of the store (scheduler_runs)" in child.stderr


@pytest.mark.parametrize(("key", "value"), [("database_id", "mine"), ("create_database", True), ("database_location", "eur3")])
def test_a_job_on_a_store_refuses_database_inputs(key: str, value: Any) -> None:
    store = {"project": "p1", "database_id": "dedup-runs", "collections": ["scheduler_runs"]}
    with pytest.raises(DedupConfigError, match="the database is the store's") as info:
        resolve_settings("report", _job("report", store=store, **{key: value}), default_project="p1")
    assert info.value.field == key


def test_a_job_on_a_store_refuses_a_collection_the_store_does_not_own_at_preview() -> None:
    store = {"project": "p1", "database_id": "dedup-runs", "collections": ["a_runs", "b_runs"]}
    with pytest.raises(DedupConfigError, match="not a collection of the store") as info:
        resolve_settings("report", _job("report", store=store), default_project="p1")
    assert info.value.field == "collection"
    only = {**store, "collections": ["b_runs"]}
    assert resolve_settings("report", _job("report", store=only), default_project="p1").collection == "b_runs"


def test_shared_scheduler_and_build_accounts_replace_the_dedicated_ones() -> None:
    sched, build = "jobs-scheduler@p1.iam.gserviceaccount.com", "jobs-build@p1.iam.gserviceaccount.com"
    resources = run_program(lambda: DedupScheduledJob("report", _job(  # type: ignore[arg-type]
        "report", scheduler_service_account_email=sched, build_service_account_email=build)), {"gcp:project": "p1"})
    accounts = [r.name for r in resources if r.type == "gcp:serviceaccount/account:Account"]
    assert accounts == ["report-runtime"], "only the runtime identity stays dedicated"
    by_member: dict[str, set[str]] = {}
    for grant in _grants(resources):
        by_member.setdefault(grant.inputs["member"], set()).add(f"{grant.inputs['role']} {grant.type}")
    assert by_member[f"serviceAccount:{sched}"] == {"roles/run.invoker gcp:cloudrunv2/serviceIamMember:ServiceIamMember"}
    assert by_member[f"serviceAccount:{build}"] == {
        "roles/storage.objectViewer gcp:storage/bucketIAMMember:BucketIAMMember",
        "roles/artifactregistry.writer gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
    }, "no project-wide log writer grant per job on a shared account"
    env = _env(resources, "report")
    assert env["DEDUP_ALLOWED_CALLERS"] == sched
    assert "DEDUP_ALLOWED_CALLER_IDS" not in env, "a shared account's unique id is not known to the component"
    function = handler_of(resources).inputs  # the shared account builds the function
    assert function["buildConfig"]["serviceAccount"] == f"projects/p1/serviceAccounts/{build}"
    job = next(r for r in resources if r.type == "gcp:cloudscheduler/job:Job").inputs
    assert job["httpTarget"]["oidcToken"]["serviceAccountEmail"] == sched


def test_a_shared_account_must_be_a_service_account_email() -> None:
    with pytest.raises(DedupConfigError, match="not a service account email") as info:
        resolve_settings("report", _job("report", scheduler_service_account_email="alice@example.com"), default_project="p1")
    assert info.value.field == "scheduler_service_account_email"


STORE_STACK = "acme/scheduler-dedup/store"
STORE_EXPORTS = {"project": "my-project-id", "database_id": "scheduler-dedup", "collections": ["scheduler_runs"]}


def test_root_program_store_stack_then_a_job_stack_that_names_it() -> None:
    """The deploying page's flow: `pulumi up` the store stack once, then a job stack whose config names it (two lines)."""
    store = run_stack_config(ROOT / "Pulumi.example-store.yaml")
    assert store.exports == {
        "kind": "firestore", "instance_id": "",
        "project": "my-project-id", "database_id": "scheduler-dedup", "location": "eur3",
        "database_resource_name": "projects/my-project-id/databases/scheduler-dedup",
        "collections": ["scheduler_runs"], "ttl_field": TTL_FIELD,
    }
    assert {r.type for r in store if r.custom} >= {"gcp:firestore/database:Database", FIELD, "gcp:firestore/index:Index"}
    assert not [r for r in store if r.type.startswith(("gcp:cloudrunv2", "gcp:cloudscheduler", "gcp:serviceaccount"))]

    job = run_stack_config(ROOT / "Pulumi.example-job-on-store.yaml", stack_outputs={STORE_STACK: store.exports})
    assert [r.inputs["name"] for r in job if r.type == STACK_REFERENCE] == [STORE_STACK]
    assert not [r for r in job if r.type.startswith(("gcp:firestore/", "gcp:projects/service"))]
    env = _env(job, "nightly-report")
    assert (env["DEDUP_DATABASE"], env["DEDUP_COLLECTION"]) == ("scheduler-dedup", "scheduler_runs")
    assert env["DEDUP_TTL_OWNER"] == f"stack {STORE_STACK}"
    grant = next(r.inputs for r in _grants(job) if r.inputs["role"] == "roles/datastore.user")
    assert grant["condition"]["expression"] == f'resource.name == "{store.exports["database_resource_name"]}"'
    assert job.exports["database_name"] == "scheduler-dedup"


def test_the_job_on_store_example_passes_the_policy_pack() -> None:
    store = run_stack_config(ROOT / "Pulumi.example-store.yaml")
    job = run_stack_config(ROOT / "Pulumi.example-job-on-store.yaml", stack_outputs={STORE_STACK: store.exports})
    # both are documented as good: every rule passes, advisory ones included (the job sets alerting)
    assert beyond_function_cpu(evaluate(resources_from_registered(job))) == []
    assert evaluate(resources_from_registered(store)) == []


@pytest.mark.parametrize(("key", "value", "field"), [
    ("scheduler-dedup:databaseId", "mine", "databaseId"), ("scheduler-dedup:createDatabase", "true", "createDatabase"),
])
def test_a_job_stack_on_a_store_refuses_database_settings_naming_the_key(tmp_path: Path, key: str, value: str,
                                                                        field: str) -> None:
    config = yaml.safe_load((ROOT / "Pulumi.example-job-on-store.yaml").read_text())
    config["config"][key] = value
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    with pytest.raises(DedupConfigError, match=f"the database is the store's.*stack config scheduler-dedup:{field}"):
        run_stack_config(bad, project_file=ROOT / "Pulumi.yaml", stack_outputs={STORE_STACK: STORE_EXPORTS})


def test_a_store_stack_refuses_job_settings(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "Pulumi.example-store.yaml").read_text())
    config["config"]["scheduler-dedup:jobSource"] = "examples/hello_job"
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    with pytest.raises(DedupConfigError, match="a store stack .* deploys no job: remove stack config scheduler-dedup:jobSource"):
        run_stack_config(bad, project_file=ROOT / "Pulumi.yaml")


@pytest.mark.parametrize(("example", "key", "value", "match"), [
    # a store stack's key in a job stack would be read by nobody
    ("Pulumi.example-job-on-store.yaml", "spannerProcessingUnits", 200, "is a setting of a store stack"),
    ("Pulumi.example-job-on-store.yaml", "redisMemorySizeGb", 2, "is a setting of a store stack"),
    # another kind's key in a store stack
    ("Pulumi.example-store.yaml", "redisMemorySizeGb", 2, "is a Memorystore setting, which a firestore store"),
    ("Pulumi.example-store.yaml", "createSpannerInstance", False, "is a Spanner setting, which a firestore store"),
    ("Pulumi.example-spanner-store.yaml", "redisNetwork", "n", "is a Memorystore setting, which a spanner store"),
    ("Pulumi.example-memorystore-store.yaml", "spannerInstance", "i", "is a Firestore or Spanner database setting, which a memorystore store"),
])
def test_a_stack_refuses_the_keys_its_kind_does_not_read(tmp_path: Path, example: str, key: str, value: Any,
                                                        match: str) -> None:
    config = yaml.safe_load((ROOT / example).read_text())
    config["config"][f"scheduler-dedup:{key}"] = value
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    with pytest.raises(DedupConfigError, match=f"stack config scheduler-dedup:{key} {match}"):
        run_stack_config(bad, project_file=ROOT / "Pulumi.yaml", stack_outputs={STORE_STACK: STORE_EXPORTS})


def test_offline_check_answers_the_store_stack_reference_from_the_store_config() -> None:
    from rich.console import Console

    from scheduler_dedup.policies.offline.check import run_check

    job, store = ROOT / "Pulumi.example-job-on-store.yaml", ROOT / "Pulumi.example-store.yaml"
    quiet = Console(file=open(os.devnull, "w"), width=200)  # noqa: SIM115 - closed with the console
    assert run_check(None, job, stack_refs=[(STORE_STACK, store)], console=quiet) == 0
    missing = Console(record=True, width=300)
    assert run_check(None, job, console=missing) == 2  # a usage error: the check lacks an input, the stack has no violation
    assert f"--stack-ref {STORE_STACK}=" in missing.export_text()


def test_jobs_on_a_store_with_alerts_enable_no_api_twice() -> None:
    """The store enables every API its jobs need, alerting's too: fifty jobs must not register fifty of each."""
    def program() -> None:
        store = DedupStore("shared", {"location": "eur3"})
        for job in ("job-a", "job-b"):
            DedupScheduledJob(job, _job(job, store=store, alerts={  # type: ignore[arg-type]
                "notification_channels": ["projects/p1/notificationChannels/1"]}))

    resources = run_program(program, {"gcp:project": "p1"})
    apis = Counter(r.inputs["service"] for r in resources if r.type == "gcp:projects/service:Service")
    assert set(apis) >= {"logging.googleapis.com", "monitoring.googleapis.com"} and set(apis.values()) == {1}


def test_a_store_given_as_a_list_of_outputs_is_checked_when_it_resolves() -> None:
    """Another language's SDK may pass the collections as a list whose items are outputs."""
    def program() -> None:
        store = DedupStore("shared", {"location": "eur3", "collections": ["a_runs", "b_runs"]})
        ref = {"project": store.project, "database_id": store.database_id,
               "collections": [store.collections.apply(lambda c: c[0]), store.collections.apply(lambda c: c[1])]}
        DedupScheduledJob("report", _job("report", store=ref, collection="b_runs"))  # type: ignore[arg-type]

    resources = run_program(program, {"gcp:project": "p1"})
    env = _env(resources, "report")
    assert (env["DEDUP_DATABASE"], env["DEDUP_COLLECTION"]) == ("scheduler-dedup", "b_runs")


@pytest.mark.parametrize(("args", "field", "fix"), [
    ({"location": "Not A Location"}, "location", "use e.g. 'nam5'"),
    ({"location": "nam5", "collections": []}, "collections", "non-empty list"),
    ({"location": "nam5", "collections": ["runs", "runs"]}, "collections", "twice"),
    ({"location": "nam5", "collections": ["a/b"]}, "collections", "DEDUP_COLLECTION"),
    ({"location": "nam5", "database_id": "X"}, "database_id", "DEDUP_DATABASE"),
    ({"location": "nam5", "create_database": "yes"}, "create_database", "true or false"),
])
def test_store_inputs_are_checked_naming_the_field(args: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(DedupConfigError) as info:
        resolve_store_settings(args, default_project="p1")
    assert info.value.field == field and fix in str(info.value), str(info.value)


@pytest.mark.parametrize(("store", "field", "fix"), [
    ({"location": "nam5", "colections": ["runs"]}, "colections", "valid inputs are collections, create_database"),
    ({"location": "nam5", "wait_timeout_ms": 5}, "wait_timeout_ms", "set kind to 'memorystore', or remove it"),
])
def test_a_store_input_of_no_kind_or_of_another_kind_is_named(store: dict[str, Any], field: str, fix: str) -> None:
    """The keys are checked against the kind's component piece (its registration's), before any child exists."""
    with pytest.raises(DedupConfigError) as info:
        run_program(lambda: DedupStore("s", store), {"gcp:project": "p1"})  # type: ignore[arg-type]
    assert info.value.field == field and fix in str(info.value), str(info.value)


def test_the_readmes_one_program_snippet_runs_under_mocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The "One store, many jobs" Python snippet of the deploying page, as written, with the job folders it names."""
    page = (ROOT / "docs" / "deploying.md").read_text()
    section = page[page.index("## One store, many jobs"):]
    snippet = section[section.index("```python\n") + len("```python\n"):]
    snippet = snippet[:snippet.index("```")]
    for name in ("nightly-report", "hourly-sync"):
        (tmp_path / "jobs" / name).mkdir(parents=True)
        (tmp_path / "jobs" / name / "job.py").write_text("def run(scheduled):\n    return {'ok': True}\n")
    monkeypatch.chdir(tmp_path)
    registered = run_program(lambda: exec(snippet, {}), {"gcp:project": "my-project"})
    assert sorted(r.name for r in registered if r.type == JOB_TYPE) == ["hourly-sync", "nightly-report"]
    assert [r.name for r in registered if r.type == STORE_TYPE] == ["shared"]


def test_each_kinds_inputs_and_outputs_are_keys_of_the_typed_inputs() -> None:
    """Each store's piece names which of DedupStoreArgs (and of a job's DedupStoreRefArgs) are its: together every
    key, none outside them, so an input added to the TypedDict belongs to some kind."""
    from scheduler_dedup.infra.args import DedupStoreArgs, DedupStoreRefArgs, input_keys
    from scheduler_dedup.infra.stores.store import STORE_KINDS, piece

    for keys, typed in (("KEYS", DedupStoreArgs), ("REF_KEYS", DedupStoreRefArgs)):
        by_kind = {kind: getattr(piece(kind), keys) for kind in STORE_KINDS}
        assert all(own <= set(input_keys(typed)) for own in by_kind.values()), by_kind
        assert set().union(*by_kind.values()) == set(input_keys(typed)), keys


def test_each_kinds_piece_brings_what_a_job_asks_of_it() -> None:
    """The job asks each store's piece for its part of the store (``infra/stores/base.py``'s ``JOB_PIECE``), so a
    piece that lacks one fails here, not in the first job on that store; a store-only job input is the input of one
    store alone."""
    from scheduler_dedup.infra.args import DedupScheduledJobArgs, input_keys
    from scheduler_dedup.infra.stores.base import JOB_PIECE
    from scheduler_dedup.infra.stores.store import STORE_KINDS, piece

    for kind in STORE_KINDS:
        missing = [name for name in JOB_PIECE if not hasattr(piece(kind), name)]
        if piece(kind).OWN_REFUSAL is None:
            missing += [] if hasattr(piece(kind), "resolve_own") else ["resolve_own"]
        assert not missing, f"{kind}: {missing}"
    keys = [key for kind in STORE_KINDS for key in piece(kind).JOB_KEYS]
    assert len(keys) == len(set(keys)) and set(keys) <= set(input_keys(DedupScheduledJobArgs)), keys


def test_the_handler_pins_the_scheduler_account_the_component_makes_by_its_unique_id() -> None:
    resources = run_program(lambda: DedupScheduledJob("report", _job("report")),  # type: ignore[arg-type]
                            {"gcp:project": "p1"})
    [sched] = [r for r in resources if r.type == "gcp:serviceaccount/account:Account" and r.name == "report-sched"]
    env = _env(resources, "report")
    assert env["DEDUP_ALLOWED_CALLER_IDS"] == sched.state["uniqueId"] and env["DEDUP_ALLOWED_CALLER_IDS"].isdigit()
