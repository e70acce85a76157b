"""Never own what the stack did not create: the project's ``(default)`` Firestore database is adopted, never created
(refused at preview, by component, stack program and policy pack), and what holds run records and was created by the
stack (a database, a Spanner or Memorystore instance) is protected by default, so ``destroy`` cannot delete it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi_gcp as gcp
import pytest

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.component import DedupScheduledJob
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from scheduler_dedup.infra.stores.store import DedupStore
from scheduler_dedup.policies.offline.check import check_program, check_stack_config
from tests.paths import ROOT

pytestmark = pytest.mark.unit

JOB = {"schedule": "0 * * * *", "region": "europe-west1", "image": "europe-docker.pkg.dev/p1/r/h:1", "job": "jobs:run"}
CONFIG = {"gcp:project": "p1"}


def _of(resources: list[RegisteredResource], type_: str) -> list[RegisteredResource]:
    return [r for r in resources if r.type == type_]


def test_a_job_creating_the_default_database_is_refused_naming_create_database_and_the_fix() -> None:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("nightly", {**JOB, "database_id": "(default)", "create_database": True}, default_project="p1")
    assert info.value.field == "create_database" and "create_database: false" in str(info.value)


def test_a_store_creating_the_default_database_is_refused_naming_create_database_and_the_fix() -> None:
    with pytest.raises(DedupConfigError) as info:
        run_program(lambda: DedupStore("shared", {"location": "eur3", "database_id": "(default)"}), CONFIG)
    assert info.value.field == "create_database" and "create_database: false" in str(info.value)


def test_the_default_database_is_adopted_with_its_ttl_policy_and_no_database_resource() -> None:
    resources = run_program(lambda: DedupScheduledJob("nightly", {  # type: ignore[typeddict-item]
        **JOB, "database_id": "(default)", "create_database": False}), CONFIG)
    assert _of(resources, "gcp:firestore/database:Database") == []
    (ttl,) = _of(resources, "gcp:firestore/field:Field")[:1]
    assert ttl.inputs["database"] == "(default)"


def test_preview_of_a_stack_config_creating_the_default_database_names_the_stack_key(tmp_path: Path) -> None:
    text = (ROOT / "Pulumi.example.yaml").read_text().replace("scheduler-dedup:databaseId: hello-dedup-runs",
                                                               "scheduler-dedup:databaseId: (default)")
    stack = tmp_path / "Pulumi.default-db.yaml"
    stack.write_text(text)
    findings = [f for f in check_stack_config(stack, ROOT / "Pulumi.yaml") if f.level == "mandatory"]
    assert [f.rule for f in findings] == ["component-config"]
    assert "createDatabase" in findings[0].message and "(default)" in findings[0].message


def test_the_pack_refuses_a_hand_written_default_database() -> None:
    def raw() -> None:
        gcp.firestore.Database("default-db", name="(default)", location_id="eur3", type="FIRESTORE_NATIVE")
        gcp.firestore.Database("own-db", name="runs", location_id="eur3", type="FIRESTORE_NATIVE")
    findings = [f for f in check_program(raw, CONFIG) if f.rule == "firestore-default-database-adopted"]
    assert [f.resource.name for f in findings if f.resource] == ["default-db"]


def test_a_created_firestore_database_is_protected_until_protection_is_lifted() -> None:
    (db,) = _of(run_program(lambda: DedupScheduledJob("nightly", JOB), CONFIG),  # type: ignore[arg-type]
                "gcp:firestore/database:Database")
    assert db.protect is True and db.inputs["deletionPolicy"] == "DELETE"
    (off,) = _of(run_program(lambda: DedupScheduledJob("nightly", {**JOB, "protect_database": False}),  # type: ignore[typeddict-item]
                             CONFIG), "gcp:firestore/database:Database")
    assert off.protect is False


@pytest.mark.parametrize(("args", "instance_type"), [
    ({"kind": "spanner", "location": "europe-west1"}, "gcp:spanner/instance:Instance"),
    ({"kind": "memorystore", "location": "europe-west1"}, "gcp:redis/instance:Instance"),
])
def test_an_instance_the_store_creates_is_protected_by_default(args: dict[str, Any], instance_type: str) -> None:
    """Deleting a Spanner instance deletes every database in it, other apps' too; a Memorystore instance holds every
    job's records: both stay under Pulumi protect until protect_database is false."""
    (instance,) = _of(run_program(lambda: DedupStore("shared", args), CONFIG), instance_type)  # type: ignore[arg-type]
    assert instance.protect is True
    (lifted,) = _of(run_program(lambda: DedupStore("shared", {**args, "protect_database": False}),  # type: ignore[arg-type]
                                CONFIG), instance_type)
    assert lifted.protect is False


def test_a_job_in_an_adopted_spanner_instance_owns_its_database_only() -> None:
    resources = run_program(lambda: DedupScheduledJob("nightly", {  # type: ignore[typeddict-item]
        **JOB, "store_kind": "spanner", "spanner_instance": "shared-instance"}), CONFIG)
    assert _of(resources, "gcp:spanner/instance:Instance") == []
    (db,) = _of(resources, "gcp:spanner/database:Database")
    assert db.inputs["instance"] == "shared-instance" and db.protect is True
    own = run_program(lambda: DedupScheduledJob("nightly", {**JOB, "store_kind": "spanner"}), CONFIG)  # type: ignore[typeddict-item]
    assert [r.protect for r in _of(own, "gcp:spanner/instance:Instance")] == [True]


def _exempt(resources: list[RegisteredResource]) -> dict[str, list[str]]:
    """Collection -> fields whose single-field indexes a ``gcp.firestore.Field`` turns off (``indexConfig`` empty)."""
    found: dict[str, list[str]] = {}
    for r in _of(resources, "gcp:firestore/field:Field"):
        if r.inputs.get("indexConfig") == {}:
            found.setdefault(r.inputs["collection"], []).append(r.inputs["field"])
    return found


def test_every_growing_field_is_exempt_from_single_field_indexing_one_exemption_after_another() -> None:
    """tests/stores/test_firestore_index_exemptions.py finds the fields on real writes; here the component's own
    store and a DedupStore exempt each, one Field after another (two at once on a collection fail)."""
    from scheduler_dedup.handler.stores.firestore.schema import UNINDEXED_FIELDS

    own = run_program(lambda: DedupScheduledJob("nightly", JOB), CONFIG)  # type: ignore[arg-type]
    assert _exempt(own) == {"scheduler_runs": list(UNINDEXED_FIELDS)}
    shared = run_program(lambda: DedupStore("shared", {"location": "eur3", "collections": ["a_runs", "b_runs"]}),
                         CONFIG)
    assert _exempt(shared) == {"a_runs": list(UNINDEXED_FIELDS), "b_runs": list(UNINDEXED_FIELDS)}
    fields = _of(own, "gcp:firestore/field:Field")
    assert [f.inputs["field"] for f in fields if "ttlConfig" in f.inputs] == ["expire_at"]
    for before, after in zip(fields, fields[1:]):
        assert before.urn in after.dependencies


def test_a_store_with_more_collections_than_the_database_has_index_exemptions_for_is_refused() -> None:
    from scheduler_dedup.handler.stores.firestore.schema import UNINDEXED_FIELDS
    from scheduler_dedup.infra.stores.firestore import MAX_FIELD_CONFIGS

    most = MAX_FIELD_CONFIGS // len(UNINDEXED_FIELDS)
    run_program(lambda: DedupStore("fits", {"location": "eur3", "collections": [f"c{n}" for n in range(most)]}), CONFIG)
    with pytest.raises(DedupConfigError) as info:
        run_program(lambda: DedupStore("too-many", {"location": "eur3",
                                                    "collections": [f"c{n}" for n in range(most + 1)]}), CONFIG)
    assert info.value.field == "collections" and f"at most {most}" in str(info.value)
