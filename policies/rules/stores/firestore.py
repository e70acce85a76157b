"""Rules on a run-record store in Firestore: a TTL policy on every dedup collection's expiry field, one owner per TTL
policy (in this stack, or declared in another), the composite index the run check's query needs, and a location
Firestore is offered in, and no stack owning the project's (default) database. The Firestore store's registration names
this module (``pack_rules``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.stores.firestore.schema import RUN_HISTORY_INDEXES
from scheduler_dedup.handler.stores.registry import FIRESTORE
from scheduler_dedup.infra.project.locations import region_problem
from scheduler_dedup.infra.stores.ownership import default_database_problem
from scheduler_dedup.infra.stores.ttl_policy import second_ttl_owner, ttl_policy_key

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.model import Resource, get, is_unknown
from scheduler_dedup.policies.rules.base import _calls_run_check, rule
from scheduler_dedup.policies.rules.store import same as _same, store_of
from scheduler_dedup.policies.reading.topology import (
    FIRESTORE_FIELD,
    Topology,
    env_value,
    service_env,
)


def _firestore_services(topology: Topology) -> list[Resource]:
    """Dedup services known to keep their records in Firestore (the Firestore rules' concern; a service whose store
    is unknown at preview is not judged yet)."""
    return [s for s in topology.dedup_services() if store_of(s) == FIRESTORE.id]


# ---------------------------------------------------------------- dedup-firestore-ttl

def _database_id(value: Any) -> Any:
    if isinstance(value, str) and not is_unknown(value) and "databases/" in value:
        return value.rsplit("databases/", 1)[1].split("/")[0]
    return value


@rule(name="dedup-firestore-ttl", enforcement="mandatory",
      description="Every dedup collection (DEDUP_COLLECTION/DEDUP_DATABASE of a dedup Cloud Run service) has a "
                  "Firestore TTL policy on its expiry field.",
      config_schema={"expiryField": {"type": "string", "default": limits.EXPIRY_FIELD,
                                     "description": "the run records' expiry timestamp field"}})
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

@rule(name="firestore-ttl-single-owner", enforcement="mandatory",
      description="At most one Firestore TTL Field per project, database and collection group in a stack, whatever "
                  "its field: Firestore allows one TTL field per collection group, and two owners remove it for each "
                  "other on destroy.")
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

@rule(name="dedup-ttl-owner-declared", enforcement="advisory",
      description="A dedup service whose TTL policy lives in another stack (env DEDUP_TTL_OWNER) names a known owner "
                  "and is not also given a TTL Field in this stack.",
      config_schema={"expiryField": {"type": "string", "default": limits.EXPIRY_FIELD,
                                     "description": "the run records' expiry timestamp field"},
                     "knownOwners": {"type": "array", "items": {"type": "string"}, "default": [],
                                     "description": "accepted DEDUP_TTL_OWNER values, e.g. the store stacks' names (empty: any)"}})
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


@rule(name="dedup-run-check-index", enforcement="mandatory",
      description="Where a watchdog calls the handler's run check, its collection has the composite index the "
                  "check's query needs (job_name ascending, schedule_time descending).")
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


@rule(name="firestore-database-location", enforcement="mandatory",
      description="A Firestore database's locationId is one Firestore is offered in.")
def firestore_database_location(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A Firestore database's ``locationId`` is one Firestore is offered in, a region or a multi-region
    (:func:`scheduler_dedup.infra.project.locations.region_problem`, the component's check too). Unknown values pass."""
    location = get(resource.props, "locationId")
    if resource.type != FIRESTORE_DATABASE or not isinstance(location, str) or is_unknown(location):
        return []
    problem = region_problem(location, ("Firestore",))
    return [f"locationId {problem}"] if problem else []


# ---------------------------------------------------------------- firestore-default-database-adopted

@rule(name="firestore-default-database-adopted", enforcement="mandatory",
      description="No stack creates the project's (default) Firestore database: it is adopted, never owned.")
def firestore_default_database_adopted(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """No ``gcp.firestore.Database`` named ``(default)``
    (:func:`scheduler_dedup.infra.stores.ownership.default_database_problem`, the component's check too)."""
    name = get(resource.props, "name")
    if resource.type != FIRESTORE_DATABASE or not isinstance(name, str) or is_unknown(name):
        return []
    problem = default_database_problem(name, True)
    return [f"name {problem.replace('create_database: false', 'no Database resource')}"] if problem else []
