"""Rules on the run-record store. Firestore: a TTL policy on every dedup collection's expiry field, one owner per
TTL policy (in this stack, or declared in another). Spanner: a row deletion policy on every run records' table, its
retention (read from the DDL) outlasting the retries, the data role scoped to the database, drop protection. Both:
record retention that outlasts the job's retries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.stores import spanner_schema
from scheduler_dedup.policies import limits
from scheduler_dedup.policies.readings import read_retry
from scheduler_dedup.policies.model import Resource, get, is_unknown
from scheduler_dedup.policies.rules.base import _env_seconds, _env_shown, _fmt, _seconds_cfg
from scheduler_dedup.policies.topology import (
    FIRESTORE_FIELD,
    Identities,
    Topology,
    env_value,
    service_env,
)

SPANNER_DATABASE = "gcp:spanner/database:Database"
_ENV_STORE = "DEDUP_STORE"


def store_of(service: Resource) -> Any:
    """The run store a dedup service uses (env ``DEDUP_STORE``, default ``firestore``); UNKNOWN while unknown."""
    return env_value(service_env(service), _ENV_STORE, "firestore") or "firestore"


def _firestore_services(topology: Topology) -> list[Resource]:
    """Dedup services known to keep their records in Firestore (the Firestore rules' concern)."""
    return [s for s in topology.dedup_services() if store_of(s) == "firestore"]


# ---------------------------------------------------------------- dedup-firestore-ttl

def _database_id(value: Any) -> Any:
    if isinstance(value, str) and not is_unknown(value) and "databases/" in value:
        return value.rsplit("databases/", 1)[1].split("/")[0]
    return value


def dedup_firestore_ttl(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Every dedup collection has a Firestore TTL policy on its expiry field.

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
    for service in _firestore_services(topology):
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
    """At most one ``gcp:firestore/field:Field`` with ``ttlConfig`` per project, database, collection group and field.

    A TTL policy is one setting of one collection group's field (https://cloud.google.com/firestore/docs/ttl).
    Two Field resources for it are two owners of one setting: ``pulumi destroy`` (or a replacement) of either
    removes the policy, and the field's index exemption, for both, and nothing reports it: run records then
    live forever. Projects compare as written (a Field without ``project`` only with others without one, since
    the provider's project is not in the stack's resources); unknown values are not compared.
    """
    owners: dict[tuple[Any, ...], Resource] = {}
    findings: list[tuple[Resource | None, str]] = []
    for resource in resources:
        if resource.type != FIRESTORE_FIELD or get(resource.props, "ttlConfig") is None:
            continue
        key = (get(resource.props, "project"), _database_id(get(resource.props, "database")) or limits.DEFAULT_DATABASE,
               get(resource.props, "collection"), get(resource.props, "field"))
        if any(is_unknown(part) for part in key):
            continue
        first = owners.setdefault(key, resource)
        if first is not resource:
            _, database, collection, field_name = key
            findings.append((resource, f"Field {resource.name} and Field {first.name} both manage the TTL policy of "
                                       f"{field_name!r} in collection group {collection!r} of database {database!r}: "
                                       "destroying either removes it for both. Keep one owner: a DedupStore (one per "
                                       "database) and store= on every job that uses it"))
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
    is unknown or unreadable (see :func:`~scheduler_dedup.policies.readings.read_retry`).

    The arithmetic is :func:`scheduler_dedup.infra.schedule.retry_window_seconds`, the one the component uses.
    """
    reading = read_retry(job_props)
    return None if reading.problems else reading.window_at_least()


def dedup_retention_covers_retries(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """``DEDUP_RETENTION_SECONDS`` (default 604800 = 7 days) outlasts the retry window of each job calling the service.

    A run record deleted by the TTL policy before Scheduler's last retry lets that retry run the job a
    second time. The window is :func:`~scheduler_dedup.infra.schedule.retry_window_seconds` of the job's
    retry settings (:func:`~scheduler_dedup.policies.readings.read_retry`); a setting that cannot be read is
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


# ---------------------------------------------------------------- Spanner: what the stack's databases hold

def _is_run_table(statement: str) -> bool:
    """True for a ``CREATE TABLE`` with the run records' signature (the version column, attempt id and expiry)."""
    import re

    lowered = statement.lower()
    return (lowered.lstrip().startswith("create table")
            and all(re.search(rf"\b{c}\b", lowered) for c in (spanner_schema.VERSION_COLUMN, "attempt_id",
                                                                spanner_schema.TTL_COLUMN)))


def _spanner_tables(database: Resource) -> dict[str, spanner_schema.DeletionPolicy | None] | None:
    """Lower-cased run table name -> its row deletion policy, of a ``gcp:spanner/database:Database``; None while its
    ``ddls`` are unknown."""
    ddls = get(database.props, "ddls")
    if ddls is None:
        return {}
    if is_unknown(ddls) or not isinstance(ddls, list) or any(not isinstance(d, str) or is_unknown(d) for d in ddls):
        return None
    policies = spanner_schema.deletion_policies(ddls)
    run_tables = {t for statement in ddls if _is_run_table(statement)
                  for t in spanner_schema.deletion_policies([statement])}
    return {t: p for t, p in policies.items() if t in run_tables}


def _spanner_services(topology: Topology) -> list[tuple[Resource, Any, Any, Any]]:
    """``(service, instance, database, table)`` of each dedup service on Spanner (values may be UNKNOWN)."""
    found = []
    for service in topology.dedup_services():
        if store_of(service) != "spanner":
            continue
        env = service_env(service)
        found.append((service, env_value(env, "DEDUP_SPANNER_INSTANCE", None),
                      env_value(env, "DEDUP_SPANNER_DATABASE", None),
                      env_value(env, limits.ENV_COLLECTION, limits.DEFAULT_COLLECTION)))
    return found


def _database_of(resources: Sequence[Resource], instance: Any, database: Any) -> list[Resource]:
    """The stack's Spanner databases that may be ``instance``/``database`` (unknown values match)."""
    return [r for r in resources if r.type == SPANNER_DATABASE
            and _same(_last(get(r.props, "instance")), _last(instance)) and _same(get(r.props, "name"), database)]


def _last(value: Any) -> Any:
    return value.rsplit("/", 1)[-1] if isinstance(value, str) and not is_unknown(value) else value


_POLICY_FIX = f"{spanner_schema.row_deletion_policy()}"


# ---------------------------------------------------------------- spanner-row-deletion-policy

def spanner_row_deletion_policy(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Every Spanner run records' table has a row deletion policy (https://cloud.google.com/spanner/docs/ttl).

    Checked in each ``gcp:spanner/database:Database`` of the stack (its ``ddls``: ``CREATE TABLE ... ROW DELETION
    POLICY (...)``, or an ``ALTER TABLE ... ADD ROW DELETION POLICY`` after it, not dropped later) for every table with
    the run records' columns, and for every dedup service with ``DEDUP_STORE=spanner``: its table
    (``DEDUP_COLLECTION``) in its database (``DEDUP_SPANNER_INSTANCE``/``DEDUP_SPANNER_DATABASE``) must be one of
    them, unless the service declares where its store lives (``DEDUP_TTL_OWNER``). Unknown values pass.
    """
    findings: list[tuple[Resource | None, str]] = []
    for database in (r for r in resources if r.type == SPANNER_DATABASE):
        for table, policy in (_spanner_tables(database) or {}).items():
            if policy is None:
                findings.append((database, f"table {table} of Spanner database {get(database.props, 'name')} holds run "
                                           f"records but has no row deletion policy: add {_POLICY_FIX} to its CREATE "
                                           "TABLE (or ALTER TABLE ... ADD ...), as spanner_schema's DDL has, or "
                                           "records are never deleted"))
    for service, instance, db, table in _spanner_services(Topology.of(resources)):
        candidates = _database_of(resources, instance, db)
        if any(_spanner_tables(c) is None or is_unknown(table) for c in candidates):
            continue
        if any(isinstance(table, str) and table.lower() in (_spanner_tables(c) or {}) for c in candidates):
            continue
        owner = env_value(service_env(service), limits.ENV_TTL_OWNER, None)
        if isinstance(owner, str) and not is_unknown(owner) and owner.strip():
            continue
        where = f"database {db!r} of instance {instance!r}"
        findings.append((service, f"service {service.name} keeps run records in Spanner table {table!r} of {where}, "
                                  "but no gcp:spanner/database:Database of this stack creates that table with a row "
                                  f"deletion policy: create it with the DDL of spanner_schema (DedupStore kind=spanner, "
                                  "or `scheduler-dedup store init --store spanner`), with "
                                  f"{_POLICY_FIX}; or, if a store stack owns it, say so with env "
                                  f"{limits.ENV_TTL_OWNER} (the component sets it when given store=)"))
    return findings


# ---------------------------------------------------------------- spanner-retention-covers-retries

def spanner_retention_covers_retries(resources: Sequence[Resource],
                                     config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A Spanner run records' table keeps each record for longer than the job's retry window, by its DDL.

    The row deletion policy ``OLDER_THAN(column, INTERVAL n DAY)`` deletes a row n days after ``column``. On
    ``expire_at`` (which the handler sets to the run's end plus ``DEDUP_RETENTION_SECONDS``) a record lives
    ``DEDUP_RETENTION_SECONDS`` + n days; on another column (``claimed_at``, ``create_time``...) only n days from
    that moment, whatever ``DEDUP_RETENTION_SECONDS`` says. A record deleted before Scheduler's last retry lets that
    retry run the job again. Deletion lags (typically within 72 hours) only make records live longer, so they are
    not counted. Config ``marginSeconds`` (default 0) adds slack.
    """
    margin = _seconds_cfg(config, "marginSeconds")
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service, instance, db, table in _spanner_services(topology):
        if not isinstance(table, str) or is_unknown(table):
            continue
        policies = [(c, (_spanner_tables(c) or {}).get(table.lower())) for c in _database_of(resources, instance, db)]
        retention, error = _env_seconds(service, limits.ENV_RETENTION, limits.DEFAULT_RETENTION_S)
        for database, policy in policies:
            if policy is None or error or not isinstance(retention, float):
                continue
            kept = policy.interval_days * 86400.0 + (retention if policy.column == spanner_schema.TTL_COLUMN else 0.0)
            for pairing in topology.jobs_of(service):
                window = read_retry(pairing.job.props).window_at_least()
                if window is None or kept >= window + margin:
                    continue
                ddl = f"OLDER_THAN({policy.column}, INTERVAL {policy.interval_days} DAY)"
                findings.append((database, f"table {table} of Spanner database {get(database.props, 'name')} deletes "
                                           f"records by {ddl}: about {_fmt(kept)} after "
                                           f"{'the run finished' if policy.column == spanner_schema.TTL_COLUMN else policy.column}, "
                                           f"shorter than job {pairing.job.name}'s retry window {_fmt(window)}"
                                           + (f" plus {_fmt(margin)}" if margin else "") + ": a late retry would find "
                                           f"no record and run again. Use {_POLICY_FIX} (the handler puts the "
                                           f"retention in expire_at) or a longer interval" + pairing.note))
    return findings


# ---------------------------------------------------------------- spanner-data-role-database-scoped

_INSTANCE_IAM = ("gcp:spanner/instanceIAMMember:InstanceIAMMember", "gcp:spanner/instanceIAMBinding:InstanceIAMBinding",
                 "gcp:spanner/instanceIAMPolicy:InstanceIAMPolicy")


def spanner_data_role_database_scoped(resources: Sequence[Resource],
                                      config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup identity's Spanner roles are granted on its database only (``gcp:spanner/databaseIAMMember``), never
    on a Spanner instance, a project, a folder or an organization without an IAM condition.

    ``roles/spanner.databaseUser`` on the instance or the project reads and writes every database there
    (https://cloud.google.com/spanner/docs/iam#roles): a job's runtime identity needs one database. A grant with an
    IAM condition (e.g. on ``resource.name``) is narrowed on purpose and passes.
    """
    from scheduler_dedup.policies.rules.iam import _is_container_level_iam, _members

    identities = Identities.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for resource in resources:
        instance_level = resource.type in _INSTANCE_IAM
        if not instance_level and not _is_container_level_iam(resource.type):
            continue
        condition = get(resource.props, "condition")
        if not instance_level and condition not in (None, {}) and not is_unknown(condition):
            continue
        by_role: dict[str, list[str]] = {}
        for role, member in _members(resource.props):
            if role is not None:
                by_role.setdefault(role, []).append(member)
        for role, members in by_role.items():
            if not role.startswith("roles/spanner."):
                continue
            scope = "Spanner instance" if instance_level else "whole project, folder or organization"
            for member, what in identities.in_grant(resource, members):
                findings.append((resource, f"{member}, the dedup job's {what} account, is granted {role} on the "
                                           f"{scope}: grant it on the store's database only "
                                           "(gcp:spanner/databaseIAMMember, as the component does), so the job "
                                           "cannot read or write other databases"))
    return findings


# ---------------------------------------------------------------- spanner-store-drop-protection

def spanner_store_drop_protection(resources: Sequence[Resource],
                                  config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A Spanner database holding run records has drop protection (``enableDropProtection: true``,
    https://cloud.google.com/spanner/docs/prevent-database-deletion): dropping it forgets which runs completed, and
    every retry still in flight would then run its job again. Unknown values pass."""
    findings: list[tuple[Resource | None, str]] = []
    for database in (r for r in resources if r.type == SPANNER_DATABASE):
        if not _spanner_tables(database):
            continue
        protected = get(database.props, "enableDropProtection")
        if protected is True or is_unknown(protected):
            continue
        findings.append((database, f"Spanner database {get(database.props, 'name')} holds run records without drop "
                                   "protection: set enableDropProtection=true (DedupStore kind=spanner does by "
                                   "default; deletion_protection=true on a job's own database), so no destroy or "
                                   "console click forgets which runs completed"))
    return findings
