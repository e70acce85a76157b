"""Every name the component derives is one Google accepts, checked at preview by one table of naming rules
(infra/project/resource_names.py): a component named ``google-ads-sync`` deploys or fails at preview, never at ``up``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi_gcp as gcp
import pytest

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.component import DedupScheduledJob
from scheduler_dedup.infra.job.job_names import bucket_name, derive_job_names, name_problems
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.project.resource_names import NAME_RULES, NAMED_FIELDS, name_problem
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program
from scheduler_dedup.infra.stores.store import DedupStore
from scheduler_dedup.policies.offline.check import check_program, check_stack_config
from tests.paths import HELLO_JOB, ROOT

pytestmark = pytest.mark.unit

#: Names Google refuses, one or more per rule, with a word the message must hold.
REFUSED = [
    ("bucket", "google-ads-sync-source-1234abcd", "google"), ("bucket", "goog-reports", "goog"),
    ("bucket", "my-g00gle-bucket", "google"), ("bucket", "ab", "3-63"), ("bucket", "x" * 64, "3-63"),
    ("bucket", "Upper-case", "lower-case"), ("bucket", "-starts-with-dash", "starting"),
    ("service_account_id", "short", "6-30"), ("service_account_id", "a" * 31, "6-30"),
    ("service_account_id", "1-starts-digit", "starting with a letter"), ("service_account_id", "ends-dash-", "ending"),
    ("service", "s" * 50, "1-49"), ("service", "Service", "lower-case"), ("service", "ends-", "not ending"),
    ("repository", "r" * 64, "1-63"), ("repository", "9images", "starting with a letter"),
    ("scheduler_job", "a job", "letters"), ("scheduler_job", "j" * 501, "1-500"),
    ("secret", "a/b", "letters"), ("secret", "s" * 256, "1-255"),
    ("log_metric", "/leading-slash", "not starting"), ("log_metric", "m" * 101, "1-100"),
    ("alert_policy", "", "1-512"), ("alert_policy", "a" * 513, "1-512"),
    ("firestore_database", "abc", "4-63"), ("firestore_database", "1abcd", "starting with a letter"),
    ("firestore_database", "a" * 64, "4-63"),
    ("spanner_instance", "a", "2-64"), ("spanner_instance", "i" * 65, "2-64"),
    ("spanner_database", "d" * 31, "2-30"), ("spanner_database", "db_", "not ending"),
    ("memorystore_instance", "r" * 41, "2-40"), ("memorystore_instance", "Redis", "lower-case"),
    ("app_engine_version", "ah-builtin", "ah-"), ("app_engine_version", "default", "reserved"),
]
ACCEPTED = [("bucket", "acme-reports_1"), ("service_account_id", "hello-runtime"), ("service", "h"),
            ("repository", "hello-images"), ("scheduler_job", "Hello_job-1"), ("secret", "hello-dedup-auth"),
            ("log_metric", "scheduler-dedup/hello/deliveries"), ("alert_policy", "scheduler-dedup hello: failed"),
            ("firestore_database", "(default)"), ("firestore_database", "hello-dedup"), ("spanner_instance", "ab"),
            ("spanner_database", "hello_dedup"), ("memorystore_instance", "hello-dedup"),
            ("app_engine_version", "dedup-0123456789abcdef")]


@pytest.mark.parametrize(("kind", "name", "says"), REFUSED)
def test_the_table_refuses_what_google_refuses_naming_the_rule_and_its_page(kind: str, name: str, says: str) -> None:
    problem = name_problem(kind, name)
    assert problem is not None, (kind, name)
    assert NAME_RULES[kind].source.split()[0] in problem and NAME_RULES[kind].resource in problem
    assert says is None or says in problem


@pytest.mark.parametrize(("kind", "name"), ACCEPTED)
def test_the_table_accepts_what_google_accepts(kind: str, name: str) -> None:
    assert name_problem(kind, name) is None


def test_every_rule_cites_a_google_page() -> None:
    assert set(NAME_RULES) == {kind for _, kind in NAMED_FIELDS.values()}
    for rule in NAME_RULES.values():
        assert rule.source.startswith("https://cloud.google.com/"), rule


#: Prefixes that hit an edge of some rule: the shortest, the longest, "google" and its look-alikes, digits at the end.
EDGE_PREFIXES = ("a", "x" * 40, "google-ads-sync", "goog", "ads-google", "g00gle-x", "a" + "-b" * 19 + "9", "my-job-2")


@pytest.mark.parametrize("prefix", EDGE_PREFIXES)
def test_every_derived_name_of_an_edge_prefix_is_one_google_accepts(prefix: str) -> None:
    names = derive_job_names(prefix, prefix, "p1", "europe-west1")
    assert [(what, name_problem(kind, value)) for what, kind, value in names.each() if name_problem(kind, value)] == []
    assert name_problems(names, "name") == []


def test_a_source_bucket_name_is_stable_distinct_per_project_and_region_and_never_holds_google() -> None:
    assert bucket_name("hello", "p1", "europe-west1") == bucket_name("hello", "p1", "europe-west1")
    assert len({bucket_name("hello", p, r) for p in ("p1", "p2") for r in ("europe-west1", "us-central1")}) == 4
    assert bucket_name("hello", "p1", "europe-west1").startswith("hello-source-")
    hashed = bucket_name("google-ads-sync", "p1", "europe-west1")
    assert "goog" not in hashed and hashed.startswith("dedup-source-")
    assert bucket_name("google-ads-sync", "p1", "europe-west1") != bucket_name("google-ads-sync", "p2", "europe-west1")


def _named(resources: list[RegisteredResource]) -> list[tuple[str, str, Any]]:
    """``(type, logical name, name input)`` of every resource whose type has a name rule."""
    return [(r.type, r.name, r.inputs.get(NAMED_FIELDS[r.type][0])) for r in resources if r.type in NAMED_FIELDS]


def _refused(resources: list[RegisteredResource]) -> list[tuple[str, str, Any, str | None]]:
    """Every named resource whose name is left to autonaming (None) or refused by the table."""
    return [(t, n, v, None if v is None else name_problem(NAMED_FIELDS[t][1], v)) for t, n, v in _named(resources)
            if v is None or name_problem(NAMED_FIELDS[t][1], v)]


ALERTS = {"notification_channels": ["projects/p1/notificationChannels/1"]}


@pytest.mark.parametrize("name", ["google-ads-sync", "goog", "a", "x" * 40])
def test_a_source_deployed_job_with_alerts_names_every_resource_as_google_accepts(name: str) -> None:
    """The whole graph under mocks: every bucket, account, service, repository, job, metric and alert policy has
    an explicit name (none left to autonaming, whose random tail the table cannot see) that the table accepts."""
    resources = run_program(lambda: DedupScheduledJob(name, {  # type: ignore[typeddict-item]
        "schedule": "0 * * * *", "region": "europe-west1", "job_source": str(HELLO_JOB), "job": "jobs:run",
        "alerts": ALERTS}), {"gcp:project": "p1"})
    named = _named(resources)
    assert {t for t, _, _ in named} >= {"gcp:storage/bucket:Bucket", "gcp:serviceaccount/account:Account",
                                        "gcp:cloudscheduler/job:Job", "gcp:logging/metric:Metric",
                                        "gcp:monitoring/alertPolicy:AlertPolicy", "gcp:firestore/database:Database"}
    assert _refused(resources) == []
    (bucket,) = [v for t, _, v in named if t == "gcp:storage/bucket:Bucket"]
    assert "goog" not in bucket


@pytest.mark.parametrize("kind", ["spanner", "memorystore"])
def test_a_store_of_each_kind_names_its_database_instance_and_secrets_as_google_accepts(kind: str) -> None:
    store_args: dict[str, Any] = {"kind": kind, "location": "europe-west1"}
    resources = run_program(lambda: DedupStore("google-ads-sync-" + "x" * 24, store_args),  # type: ignore[arg-type]
                            {"gcp:project": "p1"})
    assert _named(resources) and _refused(resources) == []


def test_an_alert_display_name_google_would_refuse_fails_at_preview_naming_name() -> None:
    with pytest.raises(DedupConfigError) as info:
        resolve_settings("n" * 450, {"schedule": "0 * * * *", "region": "europe-west1", "image": "i:1",
                                     "job": "jobs:run", "resource_prefix": "short"}, default_project="p1")
    assert info.value.field == "name" and "alert policy display name" in str(info.value)


def test_the_offline_check_passes_google_ads_sync_and_refuses_a_hand_written_google_bucket(tmp_path: Path) -> None:
    """``scheduler-dedup check``: the stack named google-ads-sync passes every rule (so preview and up agree); a
    hand-written stack whose bucket holds "google", or is left to autonaming from such a name, is refused."""
    config = (ROOT / "Pulumi.example.yaml").read_text().replace("scheduler-dedup:name: hello-dedup",
                                                                  "scheduler-dedup:name: google-ads-sync")
    stack = tmp_path / "Pulumi.google.yaml"
    stack.write_text(config)
    assert [f for f in check_stack_config(stack, ROOT / "Pulumi.yaml") if f.level == "mandatory"] == []

    def raw() -> None:
        gcp.storage.Bucket("named", name="google-ads-sync-source", location="EU")
        gcp.storage.Bucket("google-ads-sync-source", location="EU")  # autonamed from its logical name
        gcp.storage.Bucket("fine", name="acme-reports", location="EU")
    findings = [f for f in check_program(raw, {"gcp:project": "p1"}) if f.rule == "gcp-resource-names"]
    assert sorted(f.resource.name for f in findings if f.resource) == ["google-ads-sync-source", "named"]
    assert all("google" in f.message and f.level == "mandatory" for f in findings)


def test_scheduler_dedup_check_refuses_a_name_google_would_refuse_naming_the_stack_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``scheduler-dedup check`` prints and exits with: a component name whose alert policy display names
    would pass Monitoring's 512 characters fails the check, naming scheduler-dedup:name; google-ads-sync passes."""
    from rich.console import Console

    from scheduler_dedup.policies.offline.check import run_check

    monkeypatch.chdir(ROOT)
    example = (ROOT / "Pulumi.example.yaml").read_text()
    for name, prefix, code in (("google-ads-sync", "", 0), ("n" * 450, "ads-sync", 1)):
        stack = tmp_path / f"Pulumi.{len(name)}.yaml"
        stack.write_text(example.replace("scheduler-dedup:name: hello-dedup", f"scheduler-dedup:name: {name}" + (
            f"\n  scheduler-dedup:resourcePrefix: {prefix}" if prefix else "")))
        console = Console(record=True, width=300)
        assert run_check(None, stack, console=console) == code, console.export_text()
        if code:
            assert "alert policy display name" in console.export_text()
