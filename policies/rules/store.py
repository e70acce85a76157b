"""Rules on the run-record store: in Firestore, a TTL policy on every dedup collection's expiry field, one owner per
TTL policy (in this stack, or declared in another), the composite index the run check's query needs, and a location
Firestore is offered in; in Memorystore for Redis, an instance that neither loses nor evicts records and that only its
jobs can read; on every store, record retention that outlasts the job's retries. The Spanner store's rules are in
:mod:`.spanner`; :func:`store_of` tells each service's store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.stores.firestore.schema import RUN_HISTORY_INDEXES
from scheduler_dedup.handler.stores.registry import DEFAULT_STORE, FIRESTORE, REDIS
from scheduler_dedup.infra.project.locations import region_problem
from scheduler_dedup.infra.stores.ttl_policy import second_ttl_owner, ttl_policy_key

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.readings import read_retry
from scheduler_dedup.policies.reading.model import Resource, get, is_unknown
from scheduler_dedup.policies.rules.base import _calls_run_check, _env_seconds, _env_shown, _fmt, _seconds_cfg
from scheduler_dedup.policies.reading.topology import (
    FIRESTORE_FIELD,
    Topology,
    env_value,
    service_env,
)

_ENV_STORE = "DEDUP_STORE"


def store_of(service: Resource) -> Any:
    """The run store a dedup service uses (env ``DEDUP_STORE``, default ``firestore``); UNKNOWN while unknown."""
    return env_value(service_env(service), _ENV_STORE, DEFAULT_STORE) or DEFAULT_STORE


def _firestore_services(topology: Topology) -> list[Resource]:
    """Dedup services known to keep their records in Firestore (the Firestore rules' concern; a service whose store
    is unknown at preview is not judged yet)."""
    return [s for s in topology.dedup_services() if store_of(s) == FIRESTORE.id]


# ---------------------------------------------------------------- dedup-firestore-ttl

def _database_id(value: Any) -> Any:
    if isinstance(value, str) and not is_unknown(value) and "databases/" in value:
        return value.rsplit("databases/", 1)[1].split("/")[0]
    return value


def dedup_firestore_ttl(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Every dedup collection has a Firestore TTL policy on its expiry field.

    Services on another store (env ``DEDUP_STORE`` not ``firestore``; Redis expires each record itself) need none.
    The collection and database come from each dedup service's env ``DEDUP_COLLECTION`` (default
    ``scheduler_runs``) and ``DEDUP_DATABASE`` (default ``(default)``); the expiry field is config
    ``expiryField`` (default ``expire_at``, the field the handler writes). Required: a
    ``gcp:firestore/field:Field`` with that ``collection``, ``field`` and ``database`` and ``ttlConfig`` set
    (https://cloud.google.com/firestore/docs/ttl). Without it, run records are never deleted. Unknown
    values in a Field count as a match. A service that has no such Field in this stack but declares where its
    TTL policy lives (env ``DEDUP_TTL_OWNER``, set by the component given a shared store) is
    ``dedup-ttl-owner-declared``'s concern instead.
    """
    expiry = str(config.get("expiryField") or limits.EXPIRY_FIELD)
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in _firestore_services(topology):  # Redis and Spanner records expire by their own rules
        collection, database, candidates = _ttl_fields_of(service, topology, expiry)
        if any(get(f.props, "ttlConfig") is not None for f in candidates):
            continue
        owner = env_value(service_env(service), limits.ENV_TTL_OWNER, None)
        if not candidates and isinstance(owner, str) and not is_unknown(owner) and owner.strip():
            continue  # declared, known and non-empty: the TTL policy lives in another stack
        where = f"collection {collection!r}" if not is_unknown(collection) else "its collection"
        db = f"database {database!r}" if not is_unknown(database) else "its database"
        if candidates:
            findings.append((candidates[0], f"Field {expiry} of {where} in {db} has no ttlConfig: set ttlConfig={{}} so "
                                             f"Firestore deletes run records after {expiry} (service {service.name})"))
        else:
            findings.append((service, f"service {service.name} keeps run records in {where} of {db}, but no "
                                      f"gcp:firestore/field:Field gives {expiry} a TTL policy: add a Field with "
                                      f"collection={collection if not is_unknown(collection) else '<DEDUP_COLLECTION>'!r}, "
                                      f"field={expiry!r}, database={database if not is_unknown(database) else '<DEDUP_DATABASE>'!r}, "
                                      "ttlConfig={} (and indexConfig={} to skip its single-field indexes); or, "
                                      f"if a shared store in another stack owns it, say so with env "
                                      f"{limits.ENV_TTL_OWNER} (the component sets it when given store=)"))
    return findings


def _ttl_fields_of(service: Resource, topology: Topology, expiry: str) -> tuple[Any, Any, list[Resource]]:
    """``(collection, database id, Fields of this stack that may be its expiry field)`` of a dedup service."""
    env = service_env(service)
    collection = env_value(env, limits.ENV_COLLECTION, limits.DEFAULT_COLLECTION)
    database = _database_id(env_value(env, limits.ENV_DATABASE, limits.DEFAULT_DATABASE))
    project = env_value(env, "GOOGLE_CLOUD_PROJECT", None)
    candidates = [f for f in topology.fields if _matches(f, collection, expiry, database) and _same_project(f, project)]
    return collection, database, candidates


# ---------------------------------------------------------------- firestore-ttl-single-owner

def firestore_ttl_single_owner(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """At most one ``gcp:firestore/field:Field`` with ``ttlConfig`` per project, database and collection group, whatever
    its field.

    Firestore allows one TTL field per collection group ("You can mark only one field per collection group as a TTL
    field", https://cloud.google.com/firestore/docs/ttl, Limits and constraints), so a TTL policy is one setting of
    a collection group (:func:`scheduler_dedup.infra.stores.ttl_policy.ttl_policy_key`, the component's key too). A
    second Field with a TTL there, on the same or another field (``delete_after``), is refused by Firestore or
    takes it over, and two owners of one setting remove it for each other on destroy: run records then live
    forever. Projects compare as written (a Field without ``project`` only with others without one, since the
    provider's project is not in the stack's resources); unknown values are not compared.
    """
    owners: dict[tuple[Any, ...], Resource] = {}
    findings: list[tuple[Resource | None, str]] = []
    for resource in resources:
        if resource.type != FIRESTORE_FIELD or get(resource.props, "ttlConfig") is None:
            continue
        database = _database_id(get(resource.props, "database")) or limits.DEFAULT_DATABASE
        key = ttl_policy_key(get(resource.props, "project"), database, get(resource.props, "collection"))
        if any(is_unknown(part) for part in key) or is_unknown(get(resource.props, "field")):
            continue
        first = owners.setdefault(key, resource)
        if first is not resource:
            findings.append((resource, second_ttl_owner(
                f"Field {first.name}", f"Field {resource.name}", str(get(first.props, "field")),
                str(get(resource.props, "field")), str(key[2]), str(database))))
    return findings


# ---------------------------------------------------------------- dedup-ttl-owner-declared

def dedup_ttl_owner_declared(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup service whose TTL policy is not in this stack says where it lives, and it is not also here.

    The pack sees one stack; a shared store's TTL policy is in another. A service without a TTL Field in the stack
    declares the owner in env ``DEDUP_TTL_OWNER`` (the component sets ``DedupStore <name>`` or the store stack's
    name); without it, ``dedup-firestore-ttl`` fails. This rule checks the declaration: it is not empty; when config
    ``knownOwners`` lists the store stacks of the organisation, it is one of them; and the stack does not own the
    same TTL policy as well (two owners: destroying this stack would remove the store's policy).
    """
    expiry = str(config.get("expiryField") or limits.EXPIRY_FIELD)
    known = [o for o in config.get("knownOwners") or [] if isinstance(o, str)]
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in _firestore_services(topology):
        owner = env_value(service_env(service), limits.ENV_TTL_OWNER, None)
        if owner is None or is_unknown(owner):
            continue
        collection, database, candidates = _ttl_fields_of(service, topology, expiry)
        here = [f for f in candidates if get(f.props, "ttlConfig") is not None]
        if not str(owner).strip():
            findings.append((service, f"service {service.name}: env {limits.ENV_TTL_OWNER} is empty: name where the TTL "
                                      f"policy of its run records lives, e.g. 'stack acme/scheduler-dedup/store'"))
        elif known and owner not in known:
            findings.append((service, f"service {service.name} says its TTL policy lives in {owner!r}, which is not one "
                                      f"of the known owners ({', '.join(known)}): point the job at one of those stores, "
                                      "or add it to this rule's knownOwners"))
        if here:
            findings.append((here[0], f"service {service.name} says its TTL policy lives in {owner!r}, but this stack "
                                      f"also manages it (Field {here[0].name}): two owners of one TTL policy. Remove the "
                                      f"Field from this stack, or {limits.ENV_TTL_OWNER} from the service"))
    return findings


def _same_project(field_resource: Resource, project: Any) -> bool:
    """False only when both the Field's ``project`` and the handler's ``GOOGLE_CLOUD_PROJECT`` are known and differ
    (a Field without ``project`` uses the provider's project, which the handler's usually is)."""
    f_project = get(field_resource.props, "project")
    if not isinstance(f_project, str) or is_unknown(f_project) or not isinstance(project, str) or is_unknown(project):
        return True
    return f_project == project


def _matches(field_resource: Resource, collection: Any, expiry: str, database: Any) -> bool:
    f_collection = get(field_resource.props, "collection")
    f_field = get(field_resource.props, "field")
    f_database = _database_id(get(field_resource.props, "database"))
    if f_database is None:
        f_database = limits.DEFAULT_DATABASE
    return (_same(f_collection, collection) and _same(f_field, expiry) and _same(f_database, database))


def _same(a: Any, b: Any) -> bool:
    return is_unknown(a) or is_unknown(b) or a == b


# ---------------------------------------------------------------- dedup-retention-covers-retries

def job_retry_window_seconds(job_props: Mapping[str, Any]) -> float | None:
    """The longest time, in seconds, from a run's first attempt until Scheduler stops retrying it; None if a value
    is unknown or unreadable (see :func:`~scheduler_dedup.policies.reading.readings.read_retry`).

    The arithmetic is :func:`scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds`, the one the component uses.
    """
    reading = read_retry(job_props)
    return None if reading.problems else reading.window_at_least()


def dedup_retention_covers_retries(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """``DEDUP_RETENTION_SECONDS`` (default 604800 = 7 days) outlasts the retry window of each job calling the service.

    A run record deleted by the TTL policy before Scheduler's last retry lets that retry run the job a
    second time. The window is :func:`~scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds` of the job's
    retry settings (:func:`~scheduler_dedup.policies.reading.readings.read_retry`); a setting that cannot be read is
    a finding of its own, and the window is still checked with it counted at its lowest (0 s), so what can
    be read is checked. Config ``marginSeconds`` (default 0) adds slack.
    """
    margin = _seconds_cfg(config, "marginSeconds")
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        retention, error = _env_seconds(service, limits.ENV_RETENTION, limits.DEFAULT_RETENTION_S)
        if error:
            findings.append((service, error))
        for pairing in topology.jobs_of(service):
            reading = read_retry(pairing.job.props)
            findings += [(pairing.job, f"job {pairing.job.name}: {problem}; the retry window cannot be known, so "
                                       "record retention cannot be checked against it" + pairing.note)
                         for problem in reading.problems]
            window = reading.window_at_least()
            if window is None or not isinstance(retention, float) or retention >= window + margin:
                continue
            span = f"at least {_fmt(window)} (counting unreadable settings as 0s)" if reading.problems else _fmt(window)
            shown = _env_shown(service, limits.ENV_RETENTION, retention)
            findings.append((pairing.job, f"env {limits.ENV_RETENTION}={shown} of service {service.name} is "
                                          f"shorter than job {pairing.job.name}'s retry window {span}"
                                          + (f" plus {_fmt(margin)}" if margin else "") + ": a late retry would find "
                                          f"no record and run again. Set {limits.ENV_RETENTION} to at least "
                                          f"{window + margin:g} (604800 = 7 days is usual) or shorten retryConfig"
                                          + pairing.note))
    return findings


# ---------------------------------------------------------------- dedup-run-check-index

FIRESTORE_INDEX = "gcp:firestore/index:Index"


def _has_fields(index: Resource, fields: Sequence[tuple[str, str]]) -> bool | None:
    """True when the Index's ``fields`` are ``fields`` in order (paths and orders), None when not known yet."""
    given = get(index.props, "fields")
    if is_unknown(given):
        return None
    if not isinstance(given, list) or len(given) < len(fields):
        return False
    pairs = [(get(f, "fieldPath"), get(f, "order")) for f in given]
    if any(is_unknown(v) for pair in pairs for v in pair):
        return None
    return [(path, order) for path, order in pairs if path != "__name__"] == list(fields)


def dedup_run_check_index(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Where a watchdog calls the handler's run check, its collection has the composite index the check's query
    needs: ``job_name`` ascending, ``schedule_time`` descending, collection scope
    (:data:`scheduler_dedup.handler.stores.firestore.schema.RUN_HISTORY_INDEXES`, the index the component and a DedupStore
    create).

    The Firestore emulator does not enforce composite indexes; production does: without it every check fails with
    ``FailedPrecondition``, is answered ``store_error``, logs no heartbeat, and the watchdog-silent alert fires.
    A service whose records live in a store of another stack (env ``DEDUP_TTL_OWNER``; the store creates the index
    with its TTL policy) passes; unknown values pass.
    """
    topology = Topology.of(resources)
    indexes = [r for r in resources if r.type == FIRESTORE_INDEX]
    findings: list[tuple[Resource | None, str]] = []
    for service in _firestore_services(topology):  # Redis and Spanner index their own records
        env = service_env(service)
        if env_value(env, limits.ENV_TTL_OWNER, None) is not None:
            continue  # another stack's store
        watchdogs = [p for p in topology.jobs_of(service) if _calls_run_check(p.job)]
        if not watchdogs:
            continue
        collection = env_value(env, limits.ENV_COLLECTION, limits.DEFAULT_COLLECTION)
        database = _database_id(env_value(env, limits.ENV_DATABASE, limits.DEFAULT_DATABASE))
        for fields in RUN_HISTORY_INDEXES:
            matches = []
            for index in indexes:
                scope = get(index.props, "queryScope")
                same = (_same(get(index.props, "collection"), collection)
                        and _same(_database_id(get(index.props, "database")) or limits.DEFAULT_DATABASE, database)
                        and (scope is None or _same(scope, "COLLECTION")))
                matches.append(same and _has_fields(index, fields) is not False)
            if any(matches):
                continue
            spelled = ", ".join(f"{path} {order}" for path, order in fields)
            where = f"collection {collection!r}" if not is_unknown(collection) else "its collection"
            findings.append((watchdogs[0].job, f"job {watchdogs[0].job.name} calls the run check of service "
                                               f"{service.name}, whose query on {where} needs a composite index "
                                               f"({spelled}, query scope COLLECTION) that this stack does not create: "
                                               "in production every check would fail with FailedPrecondition, log no "
                                               "heartbeat and raise the watchdog-silent alert (the emulator does not "
                                               "enforce indexes). Add a gcp.firestore.Index with collection="
                                               f"{collection!r}, database={database!r}, query_scope='COLLECTION' and "
                                               f"fields {spelled} (DedupScheduledJob and DedupStore create it)"
                                               + watchdogs[0].note))
    return findings


# ---------------------------------------------------------------- firestore-database-location

FIRESTORE_DATABASE = "gcp:firestore/database:Database"


def firestore_database_location(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A Firestore database's ``locationId`` is one Firestore is offered in, a region or a multi-region
    (:func:`scheduler_dedup.infra.project.locations.region_problem`, the component's check too). Unknown values pass."""
    location = get(resource.props, "locationId")
    if resource.type != FIRESTORE_DATABASE or not isinstance(location, str) or is_unknown(location):
        return []
    problem = region_problem(location, ("Firestore",))
    return [f"locationId {problem}"] if problem else []


# ---------------------------------------------------------------- Memorystore for Redis run stores

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
