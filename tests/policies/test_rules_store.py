"""The Firestore and Memorystore stores' rules (policies/rules/stores/firestore.py, memorystore.py) and every store's
(policies/rules/store.py) on engine-shaped (camelCase) properties: compliant, violating, missing/unknown, and config
override."""

from __future__ import annotations

from typing import Any

from scheduler_dedup.policies.reading.model import UNKNOWN, Resource
from scheduler_dedup.policies.rules import job_retry_window_seconds

from .conftest import FIELD, JOB, RUN_URL, SERVICE, good_stack, job, public_config_job, res, run, service, ttl_field


# ------------------------------------------------------------------ dedup-firestore-ttl

def test_firestore_ttl_compliant() -> None:
    named = service(env={"DEDUP_COLLECTION": "runs", "DEDUP_DATABASE": "dedup-db"})
    assert run("dedup-firestore-ttl", good_stack()) == []
    assert run("dedup-firestore-ttl", [job(), named, ttl_field(collection="runs", database="projects/p/databases/dedup-db")]) == []


def test_firestore_ttl_violations() -> None:
    missing = run("dedup-firestore-ttl", [job(), service()])
    assert len(missing) == 1 and "collection='scheduler_runs'" in missing[0].message and "ttlConfig={}" in missing[0].message
    wrong_db = run("dedup-firestore-ttl", [job(), service(env={"DEDUP_DATABASE": "dedup-db"}), ttl_field()])
    assert len(wrong_db) == 1 and "database='dedup-db'" in wrong_db[0].message
    no_ttl = {k: v for k, v in ttl_field().props.items() if k != "ttlConfig"}
    findings = run("dedup-firestore-ttl", [job(), service(), res(FIELD, "ttl", no_ttl)])
    assert len(findings) == 1 and findings[0].resource and findings[0].resource.type == FIELD


def test_firestore_ttl_service_without_dedup_env_but_called_by_a_job_counts() -> None:
    assert run("dedup-firestore-ttl", [job(), service(env={})])
    assert run("dedup-firestore-ttl", [service(env={})]) == [], "an unrelated service needs no TTL"


def test_firestore_ttl_unknown_values() -> None:
    assert run("dedup-firestore-ttl", [job(), service(env={"DEDUP_DATABASE": UNKNOWN}),  # type: ignore[dict-item]
                                       ttl_field(database="db")]) == []
    assert run("dedup-firestore-ttl", [job(), service(), ttl_field(database=UNKNOWN)]) == []


def test_firestore_ttl_config_expiry_field() -> None:
    assert run("dedup-firestore-ttl", good_stack(), {"expiryField": "expires"})
    assert run("dedup-firestore-ttl", [job(), service(), ttl_field(field="expires")], {"expiryField": "expires"}) == []


def test_a_ttl_field_in_another_project_does_not_count() -> None:
    svc = service(env={"DEDUP_COLLECTION": "scheduler_runs", "GOOGLE_CLOUD_PROJECT": "p1"})
    assert run("dedup-firestore-ttl", [job(), svc, ttl_field(project="some-other-project")])
    assert run("dedup-firestore-ttl", [job(), svc, ttl_field(project="p1")]) == []
    assert run("dedup-firestore-ttl", [job(), svc, ttl_field()]) == []  # provider's project


# ------------------------------------------------------------------ dedup-retention-covers-retries

def test_retry_window_arithmetic() -> None:
    # Cloud Tasks/Scheduler example: min 10 s, max 300 s, 3 doublings -> 10, 20, 40, 80, 160, 240, 300 ...
    props = {"attemptDeadline": "60s", "retryConfig": {"retryCount": 5.0, "minBackoffDuration": "10s",
                                                       "maxBackoffDuration": "300s", "maxDoublings": 3.0}}
    assert job_retry_window_seconds(props) == (10 + 20 + 40 + 80 + 160) + 6 * 60
    assert job_retry_window_seconds({}) == 180  # one attempt, default deadline, no retries
    with_duration = {"attemptDeadline": "60s", "retryConfig": {"retryCount": 1.0, "maxRetryDuration": "7200s"}}
    assert job_retry_window_seconds(with_duration) == 7200 + 60
    assert job_retry_window_seconds({"retryConfig": {"retryCount": UNKNOWN}}) is None


def test_retention_covers_retries() -> None:
    retrying = job(retryConfig={"retryCount": 5.0, "maxBackoffDuration": "3600s"})
    assert run("dedup-retention-covers-retries", [retrying, service(), ttl_field()]) == []
    short = run("dedup-retention-covers-retries", [retrying, service(env={"DEDUP_RETENTION_SECONDS": "900"})])
    assert len(short) == 1 and "DEDUP_RETENTION_SECONDS to at least" in short[0].message
    assert short[0].resource and short[0].resource.type == JOB


def test_retention_unknowns_and_override() -> None:
    assert run("dedup-retention-covers-retries", [job(retryConfig=UNKNOWN), service(env={"DEDUP_RETENTION_SECONDS": "1"})]) == []
    assert run("dedup-retention-covers-retries", [job(), service(env={"DEDUP_RETENTION_SECONDS": UNKNOWN})]) == []  # type: ignore[dict-item]
    assert run("dedup-retention-covers-retries", good_stack(), {"marginSeconds": 10 ** 7})


def test_an_unreadable_duration_is_a_mandatory_finding_and_the_rest_is_still_checked() -> None:
    """'1m' is not a duration Scheduler accepts ("seconds ending in 's'"): the mandatory rule says so, and still finds
    that a 600 s retention cannot cover maxRetryDuration 3600 s."""
    stack = [public_config_job("1m"), service(env={"DEDUP_RETENTION_SECONDS": "600"})]
    messages = [f.message for f in run("dedup-retention-covers-retries", stack)]
    assert all(f.level == "mandatory" for f in run("dedup-retention-covers-retries", stack))
    assert any("retryConfig.minBackoffDuration '1m' is not a duration in seconds" in m and '"180s"' in m
               for m in messages), messages
    assert any("DEDUP_RETENTION_SECONDS=600" in m and "at least 3780s" in m for m in messages), messages
    readable = [f.message for f in run("dedup-retention-covers-retries",
                                       [public_config_job("60s"), service(env={"DEDUP_RETENTION_SECONDS": "600"})])]
    assert len(readable) == 1 and "retry window 3780s" in readable[0]


# ------------------------------------------------------------------ dedup-run-check-index, firestore-database-location

INDEX = "gcp:firestore/index:Index"


def _index(**props: Any) -> Any:
    base = {"collection": "scheduler_runs", "database": "(default)", "queryScope": "COLLECTION",
            "fields": [{"fieldPath": "job_name", "order": "ASCENDING"},
                       {"fieldPath": "schedule_time", "order": "DESCENDING"}]}
    base.update(props)
    return res(INDEX, "history", base)


def test_a_watchdog_without_the_run_check_s_composite_index_is_mandatory() -> None:
    watchdog = res(JOB, "watchdog", {"schedule": "7 * * * *", "httpTarget": {"uri": f"{RUN_URL}/dedup/run-check"}})
    stack = [job(), watchdog, service(), ttl_field()]
    [bad] = run("dedup-run-check-index", stack)
    assert bad.level == "mandatory" and bad.resource is watchdog and "FailedPrecondition" in bad.message
    assert "job_name ASCENDING, schedule_time DESCENDING" in bad.message
    assert run("dedup-run-check-index", [*stack, _index()]) == []
    wrong = _index(fields=[{"fieldPath": "schedule_time", "order": "DESCENDING"}])
    assert run("dedup-run-check-index", [*stack, wrong]), "an index on other fields does not serve the query"
    assert run("dedup-run-check-index", [job(), service(), ttl_field()]) == [], "no watchdog: no run check query"
    elsewhere = service(env={"DEDUP_COLLECTION": "scheduler_runs", "DEDUP_TTL_OWNER": "stack acme/store"})
    assert run("dedup-run-check-index", [job(), watchdog, elsewhere]) == [], "the store's stack creates it"


def test_a_database_location_firestore_lacks_is_mandatory() -> None:
    database = "gcp:firestore/database:Database"
    [bad] = run("firestore-database-location", [res(database, "db", {"locationId": "eur4"})])
    assert bad.level == "mandatory" and "'eur3'" in bad.message
    assert run("firestore-database-location", [res(database, "db", {"locationId": "nam5"})]) == []


# ------------------------------------------------------------------ Memorystore for Redis run stores

REDIS = "gcp:redis/instance:Instance"
STORE_PARENT = "urn:pulumi:s::p::pulumi:pulumi:Stack$scheduler-dedup:index:DedupStore::runs"
ON_REDIS = {"DEDUP_STORE": "redis", "DEDUP_REDIS_URL": "rediss://10.0.0.3:6378/0",
            "DEDUP_REDIS_AUTH_FILE": "/secrets/redis-auth/auth"}


def redis_instance(parent: str | None = STORE_PARENT, **props: object) -> Resource:
    """A dedup store's instance as DedupStore(kind="memorystore") makes it, with ``props`` changed."""
    base: dict[str, object] = {"tier": "STANDARD_HA", "memorySizeGb": 1, "redisVersion": "REDIS_7_2",
                               "redisConfigs": {"maxmemory-policy": "noeviction"}, "authEnabled": True,
                               "transitEncryptionMode": "SERVER_AUTHENTICATION", "host": "10.0.0.3", "port": 6378,
                               "persistenceConfig": {"persistenceMode": "RDB", "rdbSnapshotPeriod": "ONE_HOUR"}}
    base.update(props)
    return Resource(type=REDIS, name="runs-redis", urn=f"urn:pulumi:s::p::{REDIS}::runs-redis", props=base,
                    parent=parent)


MEMORYSTORE_RULES = ("memorystore-dedup-standard-tier", "memorystore-dedup-noeviction", "memorystore-dedup-auth",
                     "memorystore-dedup-transit-encryption", "memorystore-dedup-persistence", "memorystore-dedup-replica")


def test_a_memorystore_store_as_the_component_makes_it_passes_every_rule() -> None:
    stack = [job(), service(env=ON_REDIS), redis_instance()]
    for rule in MEMORYSTORE_RULES:
        assert run(rule, stack) == [], rule
    assert run("dedup-firestore-ttl", stack) == [], "a service on Redis needs no Firestore TTL policy"


def test_a_basic_tier_dedup_store_is_refused() -> None:
    for bad in (redis_instance(tier="BASIC"), redis_instance(tier=None)):  # the API's default tier is BASIC
        findings = run("memorystore-dedup-standard-tier", [job(), service(env=ON_REDIS), bad])
        assert len(findings) == 1 and findings[0].level == "mandatory" and "STANDARD_HA" in findings[0].message
    assert run("memorystore-dedup-standard-tier", [redis_instance(tier=UNKNOWN)]) == []


def test_an_evicting_dedup_store_is_refused() -> None:
    for configs in ({"maxmemory-policy": "volatile-lru"}, {"maxmemory-policy": "allkeys-lru"}, {}, None):
        findings = run("memorystore-dedup-noeviction", [redis_instance(redisConfigs=configs)])
        assert len(findings) == 1 and findings[0].level == "mandatory", configs
        assert "noeviction" in findings[0].message and "volatile-lru" in findings[0].message


def test_a_dedup_store_without_auth_or_transit_encryption_is_refused() -> None:
    for off in ({"authEnabled": False}, {"authEnabled": None}):
        assert len(run("memorystore-dedup-auth", [redis_instance(**off)])) == 1
    for off in ({"transitEncryptionMode": "DISABLED"}, {"transitEncryptionMode": None}):
        findings = run("memorystore-dedup-transit-encryption", [redis_instance(**off)])
        assert len(findings) == 1 and "SERVER_AUTHENTICATION" in findings[0].message


def test_no_persistence_or_no_replica_is_flagged_as_advisory() -> None:
    findings = run("memorystore-dedup-persistence", [redis_instance(persistenceConfig=None)])
    assert len(findings) == 1 and findings[0].level == "advisory" and "RDB" in findings[0].message
    findings = run("memorystore-dedup-replica", [redis_instance(tier="BASIC")])
    assert len(findings) == 1 and findings[0].level == "advisory"
    no_wait = run("memorystore-dedup-replica", [job(), service(env={**ON_REDIS, "DEDUP_REDIS_WAIT_TIMEOUT_MS": "0"}),
                                               redis_instance()])
    assert len(no_wait) == 1 and "WAIT" in no_wait[0].message


def test_which_redis_instances_are_dedup_stores() -> None:
    """A cache of the same stack is none of these rules' business; an instance is a dedup store when a DedupStore
    made it, it is labelled so, or a dedup service on Redis points at it (by its host, or by dependency)."""
    cache = redis_instance(parent=None, tier="BASIC", host="10.9.9.9")
    assert run("memorystore-dedup-standard-tier", [job(), service(env=ON_REDIS), cache]) == []
    labelled = redis_instance(parent=None, tier="BASIC", labels={"scheduler-dedup": "run-store"})
    assert len(run("memorystore-dedup-standard-tier", [labelled])) == 1
    by_host = redis_instance(parent=None, tier="BASIC", host="10.0.0.3")
    assert len(run("memorystore-dedup-standard-tier", [job(), service(env=ON_REDIS), by_host])) == 1
    unknown_url = {**ON_REDIS, "DEDUP_REDIS_URL": UNKNOWN}
    by_dependency = res(SERVICE, "svc", service(env=unknown_url).props, deps={"template": [by_host.urn]})  # type: ignore[dict-item]
    hidden = redis_instance(parent=None, tier="BASIC", host=UNKNOWN)
    assert len(run("memorystore-dedup-standard-tier", [job(), by_dependency, hidden])) == 1
