"""Renaming the component keeps every physical id and the database: protect by default, resource_prefix, aliases."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from scheduler_dedup.infra.job.component import DedupScheduledJob
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from scheduler_dedup.infra.stores.store import DedupStore

JOB = {"schedule": "0 * * * *", "region": "us-central1", "image": "us-docker.pkg.dev/p1/r/h:1", "job": "jobs:run"}
#: The inputs that are GCP resource ids: a change of any replaces the resource.
PHYSICAL = ("name", "accountId", "repositoryId", "database")


def _physical(resources: list[RegisteredResource]) -> list[tuple[str, Any]]:
    return sorted((r.type, tuple(r.inputs.get(k) for k in PHYSICAL)) for r in resources if r.custom)


def _database(resources: list[RegisteredResource]) -> RegisteredResource:
    (database,) = [r for r in resources if r.type == "gcp:firestore/database:Database"]
    return database


def test_the_database_is_protected_by_default() -> None:
    """A plan that replaces or deletes the run records fails at preview instead of running (Pulumi protect)."""
    resources = run_program(lambda: DedupScheduledJob("nightly", JOB), {"gcp:project": "p1"})  # type: ignore[arg-type]
    assert _database(resources).protect is True
    assert not any(r.protect for r in resources if r.type != "gcp:firestore/database:Database")
    off = run_program(lambda: DedupScheduledJob("nightly", {**JOB, "protect_database": False}),  # type: ignore[arg-type]
                      {"gcp:project": "p1"})
    assert _database(off).protect is False
    store = run_program(lambda: DedupStore("shared", {"location": "eur3"}), {"gcp:project": "p1"})
    assert _database(store).protect is True


def test_a_renamed_component_with_its_old_prefix_and_an_alias_keeps_every_physical_id() -> None:
    """Renamed with its old prefix and an alias, the component keeps every physical id: <name>-dedup and its run
    records are not replaced."""
    before = run_program(lambda: DedupScheduledJob("nightly", JOB), {"gcp:project": "p1"})  # type: ignore[arg-type]
    renamed = run_program(lambda: DedupScheduledJob(
        "nightly-report", {**JOB, "resource_prefix": "nightly"},  # type: ignore[typeddict-item]
        opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(name="nightly")])), {"gcp:project": "p1"})
    assert _physical(renamed) == _physical(before)
    assert _database(renamed).inputs["name"] == "nightly-dedup"
    # without the prefix the ids follow the new name: the database would be replaced (and protect refuses it)
    plain = run_program(lambda: DedupScheduledJob("nightly-report", JOB), {"gcp:project": "p1"})  # type: ignore[arg-type]
    assert _database(plain).inputs["name"] == "nightly-report-dedup" and _database(plain).protect


def test_an_invalid_resource_prefix_is_refused_naming_it() -> None:
    from scheduler_dedup.infra.errors import DedupConfigError
    from scheduler_dedup.infra.job.settings import resolve_settings

    with pytest.raises(DedupConfigError) as info:
        resolve_settings("Nightly Report", {**JOB, "resource_prefix": "Bad_Prefix"}, default_project="p1")
    assert info.value.field == "resource_prefix"
    assert resolve_settings("Nightly Report", {**JOB, "resource_prefix": "nightly"},
                            default_project="p1").service_name == "nightly"


def test_the_run_key_location_is_the_first_deploys_region_kept_when_region_moves() -> None:
    """DEDUP_RUN_KEY_LOCATION comes from a time.Static whose triggers (the region) Pulumi keeps as first stored
    (ignore_changes): a region move replaces the service and the Scheduler job, never the pinned key location, so
    both jobs key a fire time to one run (tests/handler/test_region_move.py proves that on the emulator)."""
    from scheduler_dedup.infra.job.component import DedupScheduledJob as Job

    resources = run_program(lambda: Job("nightly", {**JOB, "region": "europe-west4"}), {"gcp:project": "p1"})  # type: ignore[typeddict-item]
    (pin,) = [r for r in resources if r.type == "time:index/static:Static" and r.name == "nightly-key-location"]
    assert pin.inputs["triggers"] == {"region": "europe-west4"} and list(pin.ignore_changes) == ["triggers"]
    (service,) = [r for r in resources if r.type == "gcp:cloudrunv2/service:Service"]
    env = {e["name"]: e.get("value") for e in service.inputs["template"]["containers"][0]["envs"]}
    assert env["DEDUP_RUN_KEY_LOCATION"] == pin.state["triggers"]["region"] == "europe-west4"
    # what a region move keeps: the schedule's start (no fire time before it expected) does not follow the region
    (since,) = [r for r in resources if r.name == "nightly-schedule-since"]
    assert "europe-west4" not in since.inputs["triggers"].values()
