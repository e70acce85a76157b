"""The TTL policy has exactly one owner: one Field per collection group and field in a stack, and a service whose
TTL lives in another stack (a shared store) says where, without also owning it here."""

from __future__ import annotations

from typing import Any

from scheduler_dedup.infra import DedupScheduledJob, DedupStore
from scheduler_dedup.infra.stack.mock_run import run_program
from scheduler_dedup.policies.reading.model import UNKNOWN, Resource
from scheduler_dedup.policies.offline.check import check_program
from scheduler_dedup.policies.rules import RULES_BY_NAME, Finding, evaluate

FIELD = "gcp:firestore/field:Field"
SERVICE = "gcp:cloudrunv2/service:Service"
HELLO_JOB = {"schedule": "*/15 * * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p1/r/h:1", "job": "jobs:run"}


def res(typ: str, name: str, props: dict[str, Any]) -> Resource:
    return Resource(type=typ, name=name, urn=f"urn:pulumi:s::p::{typ}::{name}", props=props, dependencies={})


def ttl(name: str, **props: Any) -> Resource:
    base: dict[str, Any] = {"project": "p1", "database": "runs", "collection": "scheduler_runs", "field": "expire_at",
                            "ttlConfig": {}, "indexConfig": {}}
    return res(FIELD, name, {**base, **props})


def service(name: str = "svc", **env: Any) -> Resource:
    values = {"GOOGLE_CLOUD_PROJECT": "p1", "DEDUP_DATABASE": "runs", "DEDUP_COLLECTION": "scheduler_runs", **env}
    envs = [{"name": k, "value": v} for k, v in values.items()]
    return res(SERVICE, name, {"template": {"timeout": "300s", "containers": [{"image": "i", "envs": envs}]}})


def run(rule: str, resources: list[Resource], config: dict[str, Any] | None = None) -> list[Finding]:
    return evaluate(resources, {rule: config} if config else None, rules=[RULES_BY_NAME[rule]])


def test_two_ttl_fields_for_one_collection_group_are_two_owners() -> None:
    findings = run("firestore-ttl-single-owner", [ttl("a-ttl"), ttl("b-ttl")])
    assert [(f.level, f.resource.name if f.resource else None) for f in findings] == [("mandatory", "b-ttl")]
    assert "a-ttl" in findings[0].message and "DedupStore" in findings[0].message
    # a full database resource name is the same database
    assert run("firestore-ttl-single-owner", [ttl("a-ttl"), ttl("b-ttl", database="projects/p1/databases/runs")])


def test_a_second_ttl_field_on_another_field_of_the_collection_group_is_a_second_owner() -> None:
    """Firestore allows one TTL field per collection group: a Field with a TTL on delete_after beside the one on
    expire_at is a second owner, whatever the field's name (the good and the bad example)."""
    [finding] = run("firestore-ttl-single-owner", [ttl("runs-ttl"), ttl("cleanup-ttl", field="delete_after")])
    assert finding.level == "mandatory" and finding.resource is not None and finding.resource.name == "cleanup-ttl"
    assert "TTL fields 'expire_at' and 'delete_after'" in finding.message
    assert "one TTL field per collection group" in finding.message
    assert run("firestore-ttl-single-owner", [ttl("runs-ttl"), ttl("cleanup-ttl", field="delete_after",
                                                                     collection="sessions")]) == []


def test_one_owner_per_key_is_fine_and_unknowns_are_not_compared() -> None:
    distinct = [ttl("a"), ttl("b", collection="other"), ttl("c", database="db2"), ttl("d", project="p2")]
    assert run("firestore-ttl-single-owner", distinct) == []
    assert run("firestore-ttl-single-owner", [ttl("a"), ttl("b", collection=UNKNOWN)]) == []
    no_policy = {k: v for k, v in ttl("b").props.items() if k != "ttlConfig"}
    assert run("firestore-ttl-single-owner", [ttl("a"), res(FIELD, "b", no_policy)]) == [], "an index-only Field owns no TTL"


def test_a_service_whose_ttl_lives_elsewhere_passes_the_mandatory_rule_only_when_it_says_so() -> None:
    assert run("dedup-firestore-ttl", [service()]), "no TTL here and nothing said: mandatory finding"
    declared = service(DEDUP_TTL_OWNER="stack acme/scheduler-dedup/store")
    assert run("dedup-firestore-ttl", [declared]) == []
    assert run("dedup-ttl-owner-declared", [declared]) == []
    msg = run("dedup-firestore-ttl", [service()])[0].message
    assert "DEDUP_TTL_OWNER" in msg, "the fix for a store in another stack is named"
    # only a known, non-empty declaration exempts (an unknown or empty one proves nothing)
    assert run("dedup-firestore-ttl", [service(DEDUP_TTL_OWNER=UNKNOWN)])
    assert run("dedup-firestore-ttl", [service(DEDUP_TTL_OWNER="")])


def test_the_declaration_is_checked_against_known_owners_and_against_a_second_owner_here() -> None:
    declared = service(DEDUP_TTL_OWNER="stack acme/scheduler-dedup/store")
    known = {"knownOwners": ["stack acme/scheduler-dedup/prod-store"]}
    findings = run("dedup-ttl-owner-declared", [declared], known)
    assert len(findings) == 1 and findings[0].level == "advisory" and "knownOwners" in findings[0].message
    assert run("dedup-ttl-owner-declared", [declared], {"knownOwners": ["stack acme/scheduler-dedup/store"]}) == []
    both = run("dedup-ttl-owner-declared", [declared, ttl("job-ttl")])
    assert len(both) == 1 and both[0].resource and both[0].resource.name == "job-ttl" and "two owners" in both[0].message
    empty = run("dedup-ttl-owner-declared", [service(DEDUP_TTL_OWNER=" ")])
    assert len(empty) == 1 and "is empty" in empty[0].message


def test_component_stacks_pass_the_ttl_rules_with_and_without_a_store() -> None:
    names = ("dedup-firestore-ttl", "firestore-ttl-single-owner", "dedup-ttl-owner-declared")

    def one_store() -> None:
        store = DedupStore("shared", {"location": "nam5"})
        for job in ("job-a", "job-b"):
            DedupScheduledJob(job, {**HELLO_JOB, "store": store})  # type: ignore[typeddict-item]

    def job_stack() -> None:
        store = {"project": "p1", "database_id": "scheduler-dedup", "collections": ["scheduler_runs"],
                 "ttl_owner": "stack acme/scheduler-dedup/store"}
        DedupScheduledJob("job-c", {**HELLO_JOB, "store": store})  # type: ignore[typeddict-item]

    for program in (one_store, job_stack, lambda: DedupScheduledJob("solo", HELLO_JOB)):  # type: ignore[arg-type]
        assert [f for f in check_program(program, {"gcp:project": "p1"}) if f.rule in names] == []
    registered = run_program(job_stack, {"gcp:project": "p1"})
    assert not [r for r in registered if r.type == FIELD], "the job stack owns no TTL policy, and says where it is"
