"""Rules on a run-record store in Memorystore for Redis: an instance that neither loses nor evicts records and that
only its jobs can read. The Redis store's registration names this module (``pack_rules``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.stores.registry import REDIS

from scheduler_dedup.policies.reading.model import Resource, get, is_unknown
from scheduler_dedup.policies.rules.base import rule
from scheduler_dedup.policies.rules.store import store_of
from scheduler_dedup.policies.reading.topology import Topology, env_value, service_env


#: The pulumi-gcp type of a Memorystore for Redis instance.
REDIS_INSTANCE = "gcp:redis/instance:Instance"
#: The label that marks an instance as a run store in a stack written by hand (the component sets it too).
RUN_STORE_LABEL = ("scheduler-dedup", "run-store")
_STORE_COMPONENT = "scheduler-dedup:index:DedupStore::"
#: Memorystore's default ``maxmemory-policy`` (https://cloud.google.com/memorystore/docs/redis/supported-redis-configurations).
MEMORYSTORE_DEFAULT_EVICTION = "volatile-lru"


def _on_redis(service: Resource) -> bool:
    return bool(store_of(service) == REDIS.id)


def dedup_redis_instances(resources: Sequence[Resource]) -> list[Resource]:
    """The Memorystore instances that hold run records: a ``DedupStore``'s child, one labelled
    ``scheduler-dedup: run-store``, or one a dedup service on Redis (env ``DEDUP_STORE=redis``) reaches: its
    ``DEDUP_REDIS_URL`` names the instance's host, or (at preview, when the URL is not known yet) the service's
    properties depend on the instance."""
    instances = [r for r in resources if r.type == REDIS_INSTANCE]
    services = [s for s in Topology.of(resources).dedup_services() if _on_redis(s)]
    urls = [env_value(service_env(s), "DEDUP_REDIS_URL", "") for s in services]
    depended = {urn for s in services for urns in s.dependencies.values() for urn in urns}
    found = []
    for instance in instances:
        labels = get(instance.props, "labels") or {}
        host = get(instance.props, "host")
        by_host = isinstance(host, str) and not is_unknown(host) and any(
            isinstance(u, str) and not is_unknown(u) and f"//{host}:" in u for u in urls)
        if (instance.parent and _STORE_COMPONENT in instance.parent) or by_host or instance.urn in depended \
                or (isinstance(labels, Mapping) and labels.get(RUN_STORE_LABEL[0]) == RUN_STORE_LABEL[1]):
            found.append(instance)
    return found


def _each_store(resources: Sequence[Resource], problem: Any) -> list[tuple[Resource | None, str]]:
    """``(instance, message)`` for each dedup store instance ``problem(props)`` finds a message for."""
    findings: list[tuple[Resource | None, str]] = []
    for instance in dedup_redis_instances(resources):
        message = problem(instance.props)
        if message:
            findings.append((instance, f"Memorystore instance {instance.name} holds run records, but {message}"))
    return findings


@rule(name="memorystore-dedup-standard-tier", enforcement="mandatory",
      description="A Memorystore instance holding run records is STANDARD_HA: a Basic Tier instance loses every "
                  "record on a restart or maintenance, and each run of the retry window runs again.")
def memorystore_dedup_standard_tier(resources: Sequence[Resource],
                                    config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup store is ``STANDARD_HA``: a Basic Tier instance (the API's default tier) has no replica and loses
    every record on a restart, a failure or maintenance, and each run of the retry window then runs again
    (https://cloud.google.com/memorystore/docs/redis/redis-tiers: "withstand a cold restart and full cache flush")."""
    def problem(props: Mapping[str, Any]) -> str | None:
        tier = get(props, "tier")
        if is_unknown(tier) or tier == "STANDARD_HA":
            return None
        return (f"its tier is {tier or 'BASIC (the default)'}: a Basic instance loses every record on a restart or "
                "maintenance, and the next delivery of each run runs the job again. Set tier='STANDARD_HA' (a new "
                "instance: a tier cannot be changed in place)")
    return _each_store(resources, problem)


@rule(name="memorystore-dedup-noeviction", enforcement="mandatory",
      description="A Memorystore instance holding run records has maxmemory-policy noeviction: the default "
                  "volatile-lru evicts keys with a TTL, and every run record has one.")
def memorystore_dedup_noeviction(resources: Sequence[Resource],
                                 config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup store's ``maxmemory-policy`` is ``noeviction``: Memorystore's default ``volatile-lru`` evicts keys that
    have a TTL when memory runs short, and every run record has one, so an evicted claim or completion lets the next
    delivery run the job again; with ``noeviction`` a full instance refuses writes (500, retried) instead."""
    def problem(props: Mapping[str, Any]) -> str | None:
        configs = get(props, "redisConfigs")
        if is_unknown(configs):
            return None
        policy = configs.get("maxmemory-policy") if isinstance(configs, Mapping) else None
        if is_unknown(policy) or policy == "noeviction":
            return None
        return (f"its maxmemory-policy is {policy or MEMORYSTORE_DEFAULT_EVICTION + ' (the default)'}, which "
                f"evicts records under memory pressure ({MEMORYSTORE_DEFAULT_EVICTION} evicts exactly the keys with a "
                "TTL, and every run record has one): an evicted claim or completion runs the job again. Set "
                "redisConfigs={'maxmemory-policy': 'noeviction'}")
    return _each_store(resources, problem)


@rule(name="memorystore-dedup-auth", enforcement="mandatory",
      description="A Memorystore instance holding run records has AUTH on.")
def memorystore_dedup_auth(resources: Sequence[Resource],
                           config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup store has AUTH on: without it anything on its network can delete or forge run records."""
    def problem(props: Mapping[str, Any]) -> str | None:
        enabled = get(props, "authEnabled")
        if is_unknown(enabled) or enabled is True:
            return None
        return ("AUTH is off: anything that reaches its network can delete a claim (and run a job again) or forge a "
                "completion. Set authEnabled=True and mount the AUTH string as a file (DEDUP_REDIS_AUTH_FILE)")
    return _each_store(resources, problem)


@rule(name="memorystore-dedup-transit-encryption", enforcement="mandatory",
      description="A Memorystore instance holding run records encrypts in transit (SERVER_AUTHENTICATION).")
def memorystore_dedup_transit_encryption(resources: Sequence[Resource],
                                         config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup store encrypts in transit (``SERVER_AUTHENTICATION``): without TLS the AUTH string crosses the
    network in clear text with every connection."""
    def problem(props: Mapping[str, Any]) -> str | None:
        mode = get(props, "transitEncryptionMode")
        if is_unknown(mode) or mode == "SERVER_AUTHENTICATION":
            return None
        return (f"in-transit encryption is {mode or 'DISABLED (the default)'}: the AUTH string and every record cross "
                "the network in clear text. Set transitEncryptionMode='SERVER_AUTHENTICATION' and use rediss:// with "
                "the server CA (DEDUP_REDIS_CA_FILE)")
    return _each_store(resources, problem)


@rule(name="memorystore-dedup-persistence", enforcement="advisory",
      description="A Memorystore instance holding run records takes RDB snapshots.")
def memorystore_dedup_persistence(resources: Sequence[Resource],
                                  config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Advisory: a dedup store takes RDB snapshots, so a restart of both nodes keeps what the last snapshot had."""
    def problem(props: Mapping[str, Any]) -> str | None:
        mode = get(props, "persistenceConfig.persistenceMode")
        if is_unknown(mode) or mode == "RDB":
            return None
        return ("it has no persistence: if primary and replica restart together, every record is gone and each run of "
                "the retry window runs again. Set persistenceConfig={'persistenceMode': 'RDB', "
                "'rdbSnapshotPeriod': 'ONE_HOUR'}")
    return _each_store(resources, problem)


@rule(name="memorystore-dedup-replica", enforcement="advisory",
      description="A Memorystore instance holding run records has a replica, and the handler waits for it on the "
                  "writes that decide a run (DEDUP_REDIS_WAIT_TIMEOUT_MS not 0).")
def memorystore_dedup_replica(resources: Sequence[Resource],
                              config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Advisory: a dedup store has a replica, and the handler waits for it (``WAIT``) on the writes that decide a
    run: a dedup service on Redis with ``DEDUP_REDIS_WAIT_TIMEOUT_MS=0`` acknowledges claims a failover may lose."""
    def problem(props: Mapping[str, Any]) -> str | None:
        tier, replicas = get(props, "tier"), get(props, "replicaCount")
        if is_unknown(tier) or (tier == "STANDARD_HA" and replicas != 0):
            return None
        return ("it has no replica: nothing survives the primary's loss. Use tier='STANDARD_HA'")
    findings = _each_store(resources, problem)
    for service in Topology.of(resources).dedup_services():
        wait = env_value(service_env(service), "DEDUP_REDIS_WAIT_TIMEOUT_MS", None)
        if _on_redis(service) and isinstance(wait, str) and wait.strip() == "0":
            findings.append((service, f"service {service.name} keeps run records in Redis with "
                                      "DEDUP_REDIS_WAIT_TIMEOUT_MS=0: no claim or completion waits for the replica "
                                      "(WAIT), so a failover can lose ones already acknowledged and run jobs again. "
                                      "Set it to e.g. 500"))
    return findings
