"""Rules on a run-record store in Cloud Spanner: a row deletion policy on every run records' table, its retention (read
from the DDL) outlasting the job's retries, the data role scoped to the store's database, and drop protection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.stores.registry import SPANNER
from scheduler_dedup.handler.stores.spanner import schema as spanner_schema
from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.model import Resource, get, is_unknown
from scheduler_dedup.policies.reading.readings import read_retry
from scheduler_dedup.policies.reading.conditions import condition_scope
from scheduler_dedup.policies.rules.base import _env_seconds, _fmt, _seconds_cfg, rule
from scheduler_dedup.policies.rules.store import same as _same, store_of
from scheduler_dedup.policies.reading.topology import Identities, Topology, env_value, service_env

#: A Spanner database's resource name, any one (https://cloud.google.com/spanner/docs/iam#conditions).
SPANNER_DATABASE_SHAPE = "projects/*/instances/*/databases/*"

SPANNER_DATABASE = "gcp:spanner/database:Database"


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
        if store_of(service) != SPANNER.id:
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

@rule(name="spanner-row-deletion-policy", enforcement="mandatory",
      description="Every Spanner table of run records (in a Spanner database of the stack, or named by a dedup "
                  "service with DEDUP_STORE=spanner) has a ROW DELETION POLICY, so records are deleted.")
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

@rule(name="spanner-retention-covers-retries", enforcement="mandatory",
      description="A Spanner run records' table keeps records, by its row deletion policy's column and interval "
                  "(read from the DDL), for longer than the job's retry window.",
      config_schema={"marginSeconds": {"type": "number", "default": 0, "minimum": 0,
                                       "description": "extra seconds retention must exceed the retry window by"}})
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


@rule(name="spanner-data-role-database-scoped", enforcement="mandatory",
      description="A dedup job's accounts hold Spanner roles on the store's database only, never on an instance or a "
                  "whole project without a condition.")
def spanner_data_role_database_scoped(resources: Sequence[Resource],
                                      config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup identity's Spanner roles are granted on its database only (``gcp:spanner/databaseIAMMember``), never
    on a Spanner instance, a project, a folder or an organization without an IAM condition.

    ``roles/spanner.databaseUser`` on the instance or the project reads and writes every database there
    (https://cloud.google.com/spanner/docs/iam#roles): a job's runtime identity needs one database. A grant with an
    IAM condition pinning ``resource.name`` to databases (or inside them) is narrowed on purpose and passes; one on
    the request alone (``request.time``), or pinning a project or instance (``startsWith("projects/p/")``), is not (:func:`~scheduler_dedup.policies.reading.conditions.condition_scope`).
    """
    from scheduler_dedup.policies.rules.iam import _is_container_level_iam, _members

    identities = Identities.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for resource in resources:
        instance_level = resource.type in _INSTANCE_IAM
        if not instance_level and not _is_container_level_iam(resource.type):
            continue
        if not instance_level and condition_scope(get(resource.props, "condition")).inside([SPANNER_DATABASE_SHAPE]):
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

@rule(name="spanner-store-drop-protection", enforcement="advisory",
      description="A Spanner database holding run records has drop protection (enableDropProtection).")
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
