"""The Spanner store's rules (policies/rules/stores/spanner.py) on engine-shaped (camelCase) properties: the row deletion
policy exists, its retention (read from the DDL) outlasts the retry window, the data role is database-scoped, and
the advisory on drop protection; and the Firestore TTL rules leave Spanner services alone."""

from __future__ import annotations

import pytest

from typing import Any

from scheduler_dedup.handler.stores.spanner import schema as spanner_schema
from scheduler_dedup.policies.reading.model import UNKNOWN

from .conftest import job, res, run, service

DATABASE = "gcp:spanner/database:Database"
RUNTIME = "runtime@p.iam.gserviceaccount.com"
SPANNER_ENV = {"DEDUP_STORE": "spanner", "DEDUP_SPANNER_INSTANCE": "inst", "DEDUP_SPANNER_DATABASE": "dedup",
               "DEDUP_COLLECTION": "scheduler_runs", "GOOGLE_CLOUD_PROJECT": "p"}


def spanner_service(**env: str) -> Any:
    svc = service(env={**SPANNER_ENV, **env})
    template = {**svc.props["template"], "serviceAccount": RUNTIME}
    return res(svc.type, svc.name, {**svc.props, "template": template})


def database(ddls: Any = None, **props: Any) -> Any:
    base: dict[str, Any] = {"instance": "inst", "name": "dedup", "project": "p", "enableDropProtection": True,
                            "ddls": spanner_schema.ddl_statements("scheduler_runs") if ddls is None else ddls}
    base.update(props)
    return res(DATABASE, "db", base)


def without_policy(table: str = "scheduler_runs") -> list[str]:
    create, index, *added = spanner_schema.ddl_statements(table)
    return [create.replace(",\n  " + spanner_schema.row_deletion_policy(), ""), index, *added]


def grant(typ: str, role: str = "roles/spanner.databaseUser", **props: Any) -> Any:
    return res(typ, "grant", {"role": role, "member": f"serviceAccount:{RUNTIME}", **props})


# ------------------------------------------------------------------ dedup-firestore-ttl on a Spanner service

def test_firestore_ttl_rules_leave_a_spanner_service_alone() -> None:
    stack = [job(), spanner_service(), database()]
    assert run("dedup-firestore-ttl", stack) == []
    assert run("dedup-ttl-owner-declared", [job(), spanner_service(DEDUP_TTL_OWNER="")]) == []


# ------------------------------------------------------------------ spanner-row-deletion-policy

def test_row_deletion_policy_compliant() -> None:
    assert run("spanner-row-deletion-policy", [job(), spanner_service(), database()]) == []
    # a store stack: the database alone
    assert run("spanner-row-deletion-policy", [database()]) == []
    # the policy added by a later statement counts
    added = [*without_policy(), f"ALTER TABLE scheduler_runs ADD {spanner_schema.row_deletion_policy()}"]
    assert run("spanner-row-deletion-policy", [database(ddls=added)]) == []
    # a shared store in another stack, declared
    assert run("spanner-row-deletion-policy", [job(), spanner_service(DEDUP_TTL_OWNER="stack acme/store")]) == []


def test_row_deletion_policy_violations() -> None:
    missing = run("spanner-row-deletion-policy", [database(ddls=without_policy())])
    assert len(missing) == 1 and "ROW DELETION POLICY (OLDER_THAN(expire_at, INTERVAL 0 DAY))" in missing[0].message
    dropped = [*spanner_schema.ddl_statements("scheduler_runs"), "ALTER TABLE scheduler_runs DROP ROW DELETION POLICY"]
    assert len(run("spanner-row-deletion-policy", [database(ddls=dropped)])) == 1
    # the service's table is not in the stack's database, and no owner elsewhere is declared
    other = run("spanner-row-deletion-policy", [job(), spanner_service(DEDUP_COLLECTION="nightly"), database()])
    assert len(other) == 1 and "nightly" in other[0].message and "DEDUP_TTL_OWNER" in other[0].message
    nothing = run("spanner-row-deletion-policy", [job(), spanner_service()])
    assert len(nothing) == 1 and "store init" in nothing[0].message


def test_row_deletion_policy_unknowns_pass() -> None:
    assert run("spanner-row-deletion-policy", [job(), spanner_service(), database(ddls=UNKNOWN)]) == []
    assert run("spanner-row-deletion-policy", [job(), spanner_service(DEDUP_SPANNER_DATABASE=UNKNOWN),  # type: ignore[arg-type]
                                               database()]) == []


# ------------------------------------------------------------------ spanner-retention-covers-retries

def _policy_on(column: str, days: int) -> list[str]:
    create, index, *added = without_policy()
    return [create + f",\n  ROW DELETION POLICY (OLDER_THAN({column}, INTERVAL {days} DAY))", index, *added]


RETRYING = job(retryConfig={"retryCount": 5.0, "minBackoffDuration": "3600s", "maxBackoffDuration": "86400s",
                            "maxDoublings": 5.0, "maxRetryDuration": "0s"})  # retries for over a day


def test_retention_read_from_the_ddl_covers_the_retry_window() -> None:
    # expire_at holds DEDUP_RETENTION_SECONDS (7 days by default): plenty
    assert run("spanner-retention-covers-retries", [RETRYING, spanner_service(), database()]) == []
    # deleting by the claim time after 30 days: plenty too
    assert run("spanner-retention-covers-retries", [RETRYING, spanner_service(),
                                                    database(ddls=_policy_on("claimed_at", 30))]) == []


def test_retention_read_from_the_ddl_shorter_than_the_retry_window() -> None:
    short = run("spanner-retention-covers-retries", [RETRYING, spanner_service(),
                                                     database(ddls=_policy_on("claimed_at", 1))])
    assert len(short) == 1 and "OLDER_THAN(claimed_at, INTERVAL 1 DAY)" in short[0].message
    assert "retry window" in short[0].message
    margin = run("spanner-retention-covers-retries", [RETRYING, spanner_service(), database()],
                 {"marginSeconds": 30 * 86400})
    assert len(margin) == 1


# ------------------------------------------------------------------ spanner-data-role-database-scoped

def test_data_role_on_the_database_is_fine() -> None:
    stack = [job(), spanner_service(), database(),
             grant("gcp:spanner/databaseIAMMember:DatabaseIAMMember", instance="inst", database="dedup")]
    assert run("spanner-data-role-database-scoped", stack) == []
    conditional = grant("gcp:projects/iAMMember:IAMMember", project="p",
                        condition={"title": "t", "expression": 'resource.name == "projects/p/instances/inst/databases/dedup"'})
    assert run("spanner-data-role-database-scoped", [job(), spanner_service(), conditional]) == []


def test_data_role_on_the_project_or_instance_is_refused() -> None:
    for typ in ("gcp:projects/iAMMember:IAMMember", "gcp:spanner/instanceIAMMember:InstanceIAMMember",
                "gcp:spanner/instanceIAMBinding:InstanceIAMBinding"):
        props = {"members": [f"serviceAccount:{RUNTIME}"], "member": None} if "Binding" in typ else {}
        found = run("spanner-data-role-database-scoped", [job(), spanner_service(), grant(typ, **props)])
        assert len(found) == 1 and "gcp:spanner/databaseIAMMember" in found[0].message, typ
    reader = run("spanner-data-role-database-scoped",
                 [job(), spanner_service(), grant("gcp:projects/iAMMember:IAMMember", role="roles/spanner.databaseReader")])
    assert len(reader) == 1
    someone_else = res("gcp:projects/iAMMember:IAMMember", "g", {"role": "roles/spanner.databaseUser",
                                                                "member": "user:ana@example.com"})
    assert run("spanner-data-role-database-scoped", [job(), spanner_service(), someone_else]) == []


# ------------------------------------------------------------------ spanner-store-drop-protection

def test_drop_protection_advisory() -> None:
    assert run("spanner-store-drop-protection", [database()]) == []
    found = run("spanner-store-drop-protection", [database(enableDropProtection=False)])
    assert len(found) == 1 and found[0].level == "advisory" and "enableDropProtection" in found[0].message
    assert len(run("spanner-store-drop-protection", [database(enableDropProtection=None)])) == 1
    assert run("spanner-store-drop-protection", [database(enableDropProtection=UNKNOWN)]) == []
    unrelated = database(ddls=["CREATE TABLE t (k STRING(10)) PRIMARY KEY (k)"], enableDropProtection=False)
    assert run("spanner-store-drop-protection", [unrelated]) == [], "only databases holding run records"


def test_a_table_created_if_not_exists_is_read_like_any_other() -> None:
    """``CREATE TABLE IF NOT EXISTS`` (GoogleSQL DDL) creates the run records' table too: its policy is read, so a
    compliant one passes and one deleting by another column is checked against the retry window."""
    def if_not_exists(ddls: list[str]) -> list[str]:
        return [d.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS") for d in ddls]

    compliant = if_not_exists(spanner_schema.ddl_statements("scheduler_runs"))
    assert run("spanner-row-deletion-policy", [job(), spanner_service(), database(ddls=compliant)]) == []
    assert len(run("spanner-row-deletion-policy", [database(ddls=if_not_exists(without_policy()))])) == 1
    short = run("spanner-retention-covers-retries", [RETRYING, spanner_service(),
                                                     database(ddls=if_not_exists(_policy_on("claimed_at", 1)))])
    assert len(short) == 1 and "OLDER_THAN(claimed_at, INTERVAL 1 DAY)" in short[0].message


def test_a_condition_on_the_request_alone_is_no_database_scope() -> None:
    timed = grant("gcp:projects/iAMMember:IAMMember", project="p",
                  condition={"title": "t", "expression": 'request.time < timestamp("2030-01-01T00:00:00Z")'})
    findings = run("spanner-data-role-database-scoped", [job(), spanner_service(), timed])
    assert len(findings) == 1 and "grant it on the store's database only" in findings[0].message


@pytest.mark.parametrize("expression", ['resource.name.startsWith("projects/p/")',
                                        'resource.name.startsWith("projects/p/instances/inst/")',
                                        'resource.name == "projects/p/instances/inst"'])
def test_a_condition_pinning_a_project_or_instance_is_no_database_scope(expression: str) -> None:
    """A pin narrows only to databases: the project or instance pinned holds every database in it."""
    wide = grant("gcp:projects/iAMMember:IAMMember", project="p", condition={"title": "t", "expression": expression})
    assert len(run("spanner-data-role-database-scoped", [job(), spanner_service(), wide])) == 1
