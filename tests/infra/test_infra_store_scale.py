"""Fifty jobs on one store in one stack, under Pulumi mocks: what each job adds, and what the stack shares.

Prints a table (run with ``-s`` to see it): per job and for the whole stack, how many resources, service
accounts, databases, TTL fields and IAM members were registered. Fails if a shared resource is registered twice,
if a grant reaches wider than one job needs, or if running the program again without one job (what destroying
that job's resources leaves) changes any of the store's resources.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pytest
from rich.console import Console
from rich.table import Table

from scheduler_dedup.infra import DedupScheduledJob, DedupStore
from scheduler_dedup.infra.job.component import TYPE_TOKEN as JOB_TYPE
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from scheduler_dedup.infra.stores.store import TYPE_TOKEN as STORE_TYPE
from tests.paths import HELLO_JOB

HELLO = str(HELLO_JOB)
PROJECT = "p1"
JOBS = [f"job-{n:02d}" for n in range(50)]
REMOVED = "job-17"
SCHED = f"jobs-scheduler@{PROJECT}.iam.gserviceaccount.com"
BUILD = f"jobs-build@{PROJECT}.iam.gserviceaccount.com"
ACCOUNT, DATABASE, FIELD = "gcp:serviceaccount/account:Account", "gcp:firestore/database:Database", "gcp:firestore/field:Field"


def _kind(n: int) -> str:
    """Every tenth job deploys from source, every tenth (offset 5) starts a workflow, the rest run an image."""
    return "source" if n % 10 == 0 else "workflow" if n % 10 == 5 else "image"


def _job_args(name: str, n: int, store: DedupStore) -> dict[str, Any]:
    args: dict[str, Any] = {"schedule": f"{n % 60} * * * *", "region": "us-central1", "store": store,
                            "scheduler_service_account_email": SCHED}
    if _kind(n) == "source":
        return {**args, "job_source": HELLO, "job": "jobs:run", "build_service_account_email": BUILD}
    if _kind(n) == "workflow":
        # a proxy target deploys the bare handler from source: it is built too
        return {**args, "workflow_target": {"workflow": f"projects/{PROJECT}/locations/us-central1/workflows/{name}"},
                "build_service_account_email": BUILD}
    return {**args, "image": "us-docker.pkg.dev/p1/images/handler:1", "job": "jobs:run"}


def _program(jobs: list[str]) -> None:
    # The shared identities and their one project-level grant: owned once, here, never by a job.
    gcp.serviceaccount.Account("jobs-scheduler", gcp.serviceaccount.AccountArgs(account_id="jobs-scheduler", project=PROJECT))
    build = gcp.serviceaccount.Account("jobs-build", gcp.serviceaccount.AccountArgs(account_id="jobs-build", project=PROJECT))
    gcp.projects.IAMMember("jobs-build-log-writer", gcp.projects.IAMMemberArgs(
        project=PROJECT, role="roles/logging.logWriter", member=build.member))
    store = DedupStore("shared", {"location": "nam5"})
    for name in jobs:
        DedupScheduledJob(name, _job_args(name, JOBS.index(name), store))  # type: ignore[arg-type]


def _is_grant(r: RegisteredResource) -> bool:
    return r.type.lower().endswith("iammember")


def _identity(r: RegisteredResource) -> tuple[Any, ...] | None:
    """What GCP knows a resource by, for the kinds several owners could register; None for per-owner resources."""
    i = r.inputs
    if r.type == DATABASE:
        return (r.type, i.get("project"), i["name"])
    if r.type == FIELD:
        return (r.type, i.get("project"), i.get("database"), i["collection"], i["field"])
    if r.type == "gcp:firestore/index:Index":
        return (r.type, i.get("project"), i.get("database"), i["collection"], str(i["fields"]))
    if r.type == "gcp:projects/service:Service":
        return (r.type, i.get("project"), i["service"])
    if r.type == ACCOUNT:
        return (r.type, i.get("project"), i["accountId"])
    if _is_grant(r):
        target = i.get("name") or i.get("bucket") or i.get("repository") or i.get("project")
        return (r.type, target, i["role"], i["member"], str(i.get("condition")))
    return None


def _owner(r: RegisteredResource, components: dict[str, str]) -> str:
    return components.get(r.parent, "(stack)")


def _counts(resources: list[RegisteredResource]) -> Counter[str]:
    return Counter({
        "resources": sum(1 for r in resources if r.custom),
        "service accounts": sum(1 for r in resources if r.type == ACCOUNT),
        "databases": sum(1 for r in resources if r.type == DATABASE),
        "TTL fields": sum(1 for r in resources if r.type == FIELD and "ttlConfig" in r.inputs),
        "IAM members": sum(1 for r in resources if _is_grant(r)),
    })


@pytest.fixture(scope="module")
def stack() -> list[RegisteredResource]:
    return run_program(lambda: _program(JOBS), {"gcp:project": PROJECT})


def test_fifty_jobs_on_one_store_share_one_database_and_ttl_policy(stack: list[RegisteredResource]) -> None:
    components = {r.urn: r.name for r in stack if r.type in (JOB_TYPE, STORE_TYPE)}
    by_owner: dict[str, list[RegisteredResource]] = {}
    for r in stack:
        if r.custom:
            by_owner.setdefault(_owner(r, components), []).append(r)
    columns = ["resources", "service accounts", "databases", "TTL fields", "IAM members"]
    table = Table(title=f"{len(JOBS)} jobs on one DedupStore, one stack (Pulumi mocks)")
    for column in ["scope", *columns]:
        table.add_column(column, justify="left" if column == "scope" else "right")
    for owner in ["(stack)", "shared", *JOBS]:
        kind = {"(stack)": "shared accounts", "shared": "DedupStore"}.get(owner) or _kind(JOBS.index(owner))
        counts = _counts(by_owner.get(owner, []))
        table.add_row(f"{owner} ({kind})", *[str(counts[c]) for c in columns])
    total = _counts(stack)
    table.add_row("whole stack", *[str(total[c]) for c in columns], style="bold")
    Console(width=120).print(table)

    assert total["databases"] == 1 and total["TTL fields"] == 1, "one database, one TTL policy per collection"
    # no more than one new service account per added job: the runtime identity; the shared two are the stack's
    assert total["service accounts"] == len(JOBS) + 2
    assert all(_counts(by_owner[job])["service accounts"] == 1 for job in JOBS)
    assert not [r for job in JOBS for r in by_owner[job] if r.type.startswith(("gcp:firestore/", "gcp:projects/service"))]


def test_no_shared_resource_is_registered_twice(stack: list[RegisteredResource]) -> None:
    identities = Counter(key for key in map(_identity, stack) if key is not None)
    assert [key for key, count in identities.items() if count > 1] == []


def test_no_grant_reaches_wider_than_one_job_needs(stack: list[RegisteredResource]) -> None:
    components = {r.urn: r.name for r in stack if r.type == JOB_TYPE}
    database = 'resource.name == "projects/p1/databases/scheduler-dedup"'
    for grant in (r for r in stack if _is_grant(r)):
        i, job = grant.inputs, components.get(grant.parent)
        if job is None:  # the stack's own: the shared build account's log writer grant, once
            assert (i["role"], i["member"]) == ("roles/logging.logWriter", f"serviceAccount:{BUILD}")
            continue
        runtime = f"serviceAccount:{job}-runtime@{PROJECT}.iam.gserviceaccount.com"
        if grant.type == "gcp:projects/iAMMember:IAMMember":
            # project-level grants only with a condition naming one database or one workflow
            assert i["member"] == runtime, (job, i)
            expression = i["condition"]["expression"]
            if i["role"] == "roles/datastore.user":
                assert expression == database
            else:
                workflow = f"projects/{PROJECT}/locations/us-central1/workflows/{job}"
                assert i["role"] == "roles/workflows.invoker" and expression.startswith(f'resource.name == "{workflow}"')
        elif grant.type == "gcp:cloudrunv2/serviceIamMember:ServiceIamMember" and i["role"] == "roles/run.viewer":
            assert (i["member"], i["name"]) == (runtime, job), "each runtime account reads its own service's policy only"
        elif grant.type == "gcp:cloudrunv2/serviceIamMember:ServiceIamMember":
            assert (i["role"], i["member"], i["name"]) == ("roles/run.invoker", f"serviceAccount:{SCHED}", job), \
                "the shared Scheduler account may invoke each job's own service, nothing else"
        else:  # a source deploy's build grants, on that job's own bucket and repository
            assert i["member"] == f"serviceAccount:{BUILD}" and i["role"] in (
                "roles/storage.objectViewer", "roles/artifactregistry.writer")
            assert str(i.get("bucket") or i.get("repository")).startswith(job), (job, i)


def test_a_run_without_one_job_keeps_every_store_resource(stack: list[RegisteredResource]) -> None:
    """What `pulumi destroy` of one job's resources leaves: the program without that job registers the store's
    database, TTL policy and indexes unchanged, and the other jobs unchanged."""
    after = run_program(lambda: _program([j for j in JOBS if j != REMOVED]), {"gcp:project": PROJECT})
    before_by_urn = {r.urn: r for r in stack}
    after_by_urn = {r.urn: r for r in after}
    removed = {urn for urn in before_by_urn if urn not in after_by_urn}
    assert removed and all(f"{REMOVED}" in urn.rsplit("::", 1)[1] for urn in removed), sorted(removed)
    assert not set(after_by_urn) - set(before_by_urn)
    store_urn = next(r.urn for r in stack if r.type == STORE_TYPE)
    store_children = [urn for urn, r in before_by_urn.items() if r.parent == store_urn]
    assert {before_by_urn[u].type for u in store_children} >= {DATABASE, FIELD, "gcp:firestore/index:Index"}
    for urn in after_by_urn:
        assert _comparable(after_by_urn[urn].inputs) == _comparable(before_by_urn[urn].inputs), urn


def _comparable(value: Any) -> Any:
    """Inputs with file assets as their file's name (the archive object's name already carries its SHA-256)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, pulumi.FileAsset):
        return ("FileAsset", Path(str(value.path)).name)
    return value


def test_the_same_fifty_jobs_without_a_store_hit_the_quotas(stack: list[RegisteredResource]) -> None:
    """Today's default, for comparison: each job its own database, TTL policy and three accounts."""
    def islands() -> None:
        for n, name in enumerate(JOBS):
            args = _job_args(name, n, None)  # type: ignore[arg-type]
            for shared in ("store", "scheduler_service_account_email", "build_service_account_email"):
                args.pop(shared, None)
            DedupScheduledJob(name, args)  # type: ignore[arg-type]

    alone = _counts(run_program(islands, {"gcp:project": PROJECT}))
    shared = _counts(stack)
    table = Table(title="the same 50 jobs: each its own store vs one DedupStore")
    for column in ["", "resources", "service accounts", "databases", "TTL fields", "IAM members"]:
        table.add_column(column, justify="right" if column else "left")
    for label, counts in (("each job its own store and accounts", alone), ("one DedupStore, shared accounts", shared)):
        table.add_row(label, *[str(counts[c]) for c in ("resources", "service accounts", "databases", "TTL fields", "IAM members")])
    Console(width=120).print(table)
    # default quota of 100 service accounts per project; at most 100 Firestore databases, one in the free tier
    assert alone["service accounts"] > 100 and alone["databases"] == 50
    assert shared["service accounts"] < 100 and shared["databases"] == 1
