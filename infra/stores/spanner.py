"""Spanner run stores of the component: an instance (created or adopted), a database with the run records' tables
(the DDL of :mod:`scheduler_dedup.handler.stores.spanner.schema`, written once), drop protection, and the one data
role each job gets on that database.

Used by :class:`~scheduler_dedup.infra.stores.store.DedupStore` (``kind="spanner"``) and by a
:class:`~scheduler_dedup.infra.job.component.DedupScheduledJob` with ``store_kind="spanner"`` and no ``store`` (a
database of its own, in an instance it adopts or creates).

* **Instance** (``gcp:spanner:Instance``): default the smallest, 100 processing units, in the regional instance
  config of the region (``regional-<region>``), Standard edition
  (https://cloud.google.com/spanner/docs/compute-capacity: 100 processing units are the smallest instance; larger
  ones in steps of 100 up to 1000, then of 1000). An existing instance is adopted with ``create_instance=False``;
  one the stack creates is under Pulumi ``protect`` (``protect_database``) like the database.
* **Database** (``gcp:spanner:Database``, GoogleSQL), under Pulumi ``protect`` (``protect_database``, default true,
  as for Firestore): its ``ddls`` are the tables' statements. Spanner applies a
  database's DDL when it is created and appends statements added later; the provider never removes a table.
  ``enable_drop_protection`` (https://cloud.google.com/spanner/docs/prevent-database-deletion) keeps the database
  from being dropped by anyone until it is turned off; the provider's own ``deletion_protection`` follows it.
* **Grant**: ``roles/spanner.databaseUser`` on that database only (``gcp:spanner:DatabaseIAMMember``): read and
  write data, and change the schema too (``spanner.databases.updateDdl``: no predefined Spanner role writes data
  without it, https://cloud.google.com/iam/docs/roles-permissions/spanner); nothing on other databases.

The Spanner store's registration names this module (``component``); the piece's interface is :mod:`.base`'s.
"""

# No `from __future__ import annotations`: Pulumi's component analyzer reads the real annotation types.
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION
from scheduler_dedup.handler.stores.spanner import schema as spanner_schema
from scheduler_dedup.infra.args import DedupStoreRefArgs
from scheduler_dedup.infra.errors import DedupConfigError, bool_input, read_str
from scheduler_dedup.infra.project.providers import ProjectSource, child_project
from scheduler_dedup.infra.stores.base import (JobKey, JobSettings, JobStore, JobStoreChildren, StoreRef,
                                               checked_database, claim_ttl_policy, database_ref)

if TYPE_CHECKING:
    from scheduler_dedup.infra.stores.store import DedupStore

#: The role a job's runtime identity gets on its store's database (data read/write; it also holds DDL, which the
#: handler never uses: Spanner has no predefined data-only role).
DATA_ROLE = "roles/spanner.databaseUser"
#: The smallest instance, processing units (https://cloud.google.com/spanner/docs/compute-capacity).
DEFAULT_PROCESSING_UNITS = 100
DEFAULT_INSTANCE = "scheduler-dedup"
DEFAULT_DATABASE = "scheduler-dedup"
#: Inputs of a Spanner DedupStore beyond a database store's (``kind``, ``project``, ``location``, ``collections``,
#: ``database_id``, ``create_database``, ``deletion_protection``, ``protect_database``).
SPANNER_KEYS = frozenset({"instance_id", "create_instance", "instance_config", "processing_units"})
#: Inputs of a Spanner ``DedupStore``.
KEYS = frozenset({"kind", "location", "project", "database_id", "create_database", "collections",
                  "deletion_protection", "protect_database"}) | SPANNER_KEYS
#: Keys of a job's ``store`` input for a Spanner store (its stack's outputs).
REF_KEYS = frozenset({"kind", "project", "instance_id", "database_id", "collections", "ttl_owner"})
APIS = ("spanner.googleapis.com",)
_CONFIG_RE = re.compile(r"^[a-z][a-z0-9-]{1,62}$")


@dataclass(frozen=True)
class SpannerStoreSettings:
    """A Spanner store's resolved inputs.

    Attributes:
        project: project id.
        instance_id: Spanner instance id.
        create_instance: create the instance (else adopt an existing one).
        instance_config: instance config of a created instance, e.g. ``regional-us-central1``.
        processing_units: compute capacity of a created instance.
        database_id: Spanner database id (always created: its DDL is the tables').
        tables: the run records' tables (the jobs' ``DEDUP_COLLECTION`` values).
        drop_protection: Spanner's drop protection on the database.
        protect_database: Pulumi ``protect`` on the database (:data:`scheduler_dedup.infra.stores.base.PROTECT_DATABASE_DOC`):
            a plan that would delete or replace it fails at preview.
    """

    project: str
    instance_id: str
    create_instance: bool
    instance_config: str
    processing_units: int
    database_id: str
    tables: tuple[str, ...]
    drop_protection: bool
    protect_database: bool = True

    @property
    def database_resource_name(self) -> str:
        """``projects/P/instances/I/databases/D``."""
        return f"projects/{self.project}/instances/{self.instance_id}/databases/{self.database_id}"

    @property
    def ddls(self) -> list[str]:
        """Every table's statements, in order."""
        return [statement for table in self.tables for statement in spanner_schema.ddl_statements(table)]


def processing_units_problem(units: Any) -> Optional[str]:
    """Why ``units`` is not a Spanner compute capacity, or None (100 to 1000 in steps of 100, then steps of 1000:
    https://cloud.google.com/spanner/docs/compute-capacity)."""
    if isinstance(units, bool) or not isinstance(units, int):
        return f"must be a whole number of processing units, got {units!r}"
    if units < 100 or (units <= 1000 and units % 100) or (units > 1000 and units % 1000):
        return (f"{units} is not a Spanner compute capacity: use 100 to 1000 in steps of 100, or a multiple of 1000 "
                "(100 is the smallest instance)")
    return None


def resolve_spanner_settings(args: Mapping[str, Any], *, project: str, region: Optional[str],
                             default_instance: str = DEFAULT_INSTANCE, default_database: str = DEFAULT_DATABASE,
                             tables: Optional[Sequence[str]] = None) -> SpannerStoreSettings:
    """Validate a Spanner store's inputs and apply the defaults.

    Args:
        args: ``instance_id``, ``create_instance``, ``instance_config``, ``processing_units``, ``database_id``,
            ``collections``, ``deletion_protection``, ``protect_database`` (each optional).
        project: the project id.
        region: the region whose regional instance config a created instance uses (``location`` of a
            DedupStore, ``region`` of a job); required when the instance is created without ``instance_config``.
        default_instance, default_database: ids used when not given.
        tables: the tables when not from ``collections``.

    Raises:
        DedupConfigError: the first invalid input, naming it and the fix.
    """
    create_instance = bool_input(args, "create_instance", True)
    drop_protection = bool_input(args, "deletion_protection", True)
    protect_database = bool_input(args, "protect_database", True)
    instance_id = args.get("instance_id") or default_instance
    database_id = args.get("database_id") or default_database
    for key, value, check in (("instance_id", instance_id, spanner_schema.instance_id_problem),
                              ("database_id", database_id, spanner_schema.database_id_problem)):
        problem = check(value, key) if isinstance(value, str) else f"{key} must be a string, got {value!r}"
        if problem:
            raise DedupConfigError(key, problem)
    units = args.get("processing_units", DEFAULT_PROCESSING_UNITS)
    problem = processing_units_problem(units)
    if problem:
        raise DedupConfigError("processing_units", problem)
    config = args.get("instance_config") or (f"regional-{region}" if region else None)
    if create_instance:
        if not isinstance(config, str) or not _CONFIG_RE.match(config):
            raise DedupConfigError("instance_config", f"{config!r} is not a Spanner instance config: use e.g. "
                                                      "regional-us-central1 (https://cloud.google.com/spanner/docs/"
                                                      "instance-configurations), or give the store a location")
    else:
        for key in ("instance_config", "processing_units"):
            if args.get(key) is not None:
                raise DedupConfigError(key, "applies to a created instance only: remove it, or set create_instance "
                                            "to true")
    found = list(tables) if tables is not None else args.get("collections", [DEFAULT_COLLECTION])
    if isinstance(found, str) or not isinstance(found, Sequence) or not found:
        raise DedupConfigError("collections", f"must be a non-empty list of table names, got {found!r}")
    lowered = [str(t).lower() for t in found]
    if len(set(lowered)) != len(lowered):
        raise DedupConfigError("collections", f"lists a table twice (Spanner names ignore case): {list(found)!r}")
    for table in found:
        problem = spanner_schema.table_name_problem(table, "collection") if isinstance(table, str) \
            else f"{table!r} is not a table name (a string)"
        if problem:
            raise DedupConfigError("collections", problem)
    return SpannerStoreSettings(project=project, instance_id=instance_id, create_instance=create_instance,
                                instance_config=str(config or ""), processing_units=units, database_id=database_id,
                                tables=tuple(found), drop_protection=drop_protection,
                                protect_database=protect_database)


@dataclass(frozen=True)
class SpannerChildren:
    """What :func:`spanner_children` created: the instance (None when adopted) and the database."""

    instance: Optional[gcp.spanner.Instance]
    database: gcp.spanner.Database


def spanner_children(s: SpannerStoreSettings, *, opts: pulumi.ResourceOptions, instance_name: str,
                     database_name: str, labels: Optional[Mapping[str, str]] = None) -> SpannerChildren:
    """Create the instance (unless adopted) and the database with every table's DDL.

    Args:
        s: the store's settings.
        opts: options of every child (parent, API dependencies).
        instance_name, database_name: logical names of the two resources.
        labels: the created instance's labels (a job's checked ``labels``); a database takes none.
    """
    instance: Optional[gcp.spanner.Instance] = None
    if s.create_instance:
        instance = gcp.spanner.Instance(
            instance_name,
            gcp.spanner.InstanceArgs(
                name=s.instance_id, project=s.project, config=s.instance_config,
                display_name=s.instance_id[:30] if len(s.instance_id) >= 4 else f"dedup {s.instance_id}",
                processing_units=s.processing_units,
                edition="STANDARD", labels=dict(labels) if labels else None,
            ),
            # Pulumi `protect` as on the database: deleting an instance deletes every database in it, other apps'
            # added to it since too (https://cloud.google.com/spanner/docs/create-manage-instances#delete-instance).
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=s.protect_database)),
        )
    after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[instance] if instance else []))
    database = gcp.spanner.Database(
        database_name,
        gcp.spanner.DatabaseArgs(
            instance=instance.name if instance else s.instance_id, name=s.database_id, project=s.project,
            database_dialect="GOOGLE_STANDARD_SQL", ddls=s.ddls,
            enable_drop_protection=s.drop_protection, deletion_protection=s.drop_protection,
        ),
        # Pulumi `protect`, as on a Firestore store's database: a plan that would delete or replace the database,
        # and with it the run records late retries are deduplicated against, fails instead of running.
        opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(protect=s.protect_database)),
    )
    return SpannerChildren(instance=instance, database=database)


def grant_database_user(name: str, *, project: pulumi.Input[str], instance: pulumi.Input[str],
                        database: pulumi.Input[str], member: pulumi.Input[str],
                        opts: pulumi.ResourceOptions) -> gcp.spanner.DatabaseIAMMember:
    """``roles/spanner.databaseUser`` for ``member`` on one database (never on the project or the instance)."""
    return gcp.spanner.DatabaseIAMMember(
        name,
        gcp.spanner.DatabaseIAMMemberArgs(project=project, instance=instance, database=database, role=DATA_ROLE,
                                          member=member),
        opts=opts,
    )


def check_spanner_ids(instance_id: Any, database_id: Any, table: Any) -> None:
    """Check plain Spanner instance, database and table ids with the handler's rules (outputs pass).

    Raises:
        DedupConfigError: field ``store.instance_id``, ``store.database_id`` or ``collection``.
    """
    for field, value, check in (("store.instance_id", instance_id, spanner_schema.instance_id_problem),
                                ("store.database_id", database_id, spanner_schema.database_id_problem),
                                ("collection", table, spanner_schema.table_name_problem)):
        problem = check(value) if isinstance(value, str) else None
        if problem:
            raise DedupConfigError(field, f"the handler would refuse it: {problem}")


# --------------------------------------------------------------------------- the piece's interface (.base)

def build(store: "DedupStore", name: str, args: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions],
          source: ProjectSource) -> SpannerStoreSettings:
    """A Spanner ``DedupStore``: an instance (created or adopted) and a database with every table's DDL; returns
    its settings (``DedupStore.resolved``).

    Raises:
        DedupConfigError: an invalid input, or a table's TTL another component of this program owns.
    """
    if args.get("create_database", True) is not True:
        raise DedupConfigError("create_database", "a Spanner store always creates its database (its DDL holds "
                                                  "the tables); adopt an instance with create_instance=false")
    project = child_project(args, source.project, source.provider_name)
    location = args.get("location")
    s = resolve_spanner_settings(args, project=project, region=location if isinstance(location, str) else None)
    for table in s.tables:
        claim_ttl_policy(s.project, f"{s.instance_id}/{s.database_id}", table.lower(), f"DedupStore {name}")
    store.begin(opts)
    apis = store.enable_apis(s.project)
    children = spanner_children(s, opts=pulumi.ResourceOptions(parent=store, depends_on=list(apis)),
                                instance_name=f"{name}-instance", database_name=f"{name}-db")
    store.finish(project=s.project, instance_id=s.instance_id, database_id=children.database.name,
                 resource_prefix=pulumi.Output.concat("projects/", s.project, "/instances/", s.instance_id,
                                                      "/databases/"),
                 location=s.instance_config if s.create_instance else "", collections=s.tables)
    return s


def outputs(store: "DedupStore") -> DedupStoreRefArgs:
    """The store as plain values known at preview (what its stack exports)."""
    sp = store.resolved
    return {"kind": "spanner", "project": sp.project, "instance_id": sp.instance_id, "database_id": sp.database_id,
            "collections": list(sp.tables)}


def ref_from(store: Mapping[str, Any]) -> StoreRef:
    """A job's view of a Spanner store from its outputs (its keys are checked by ``DedupStore``'s reader).

    Raises:
        DedupConfigError: field ``store.<key>``: a missing output.
    """
    return database_ref(store, "spanner", ("project", "database_id", "collections", "instance_id"))


def ref_of(store: "DedupStore") -> StoreRef:
    """A job's view of a Spanner ``DedupStore`` of this program."""
    return dataclasses.replace(ref_from(outputs(store)), ttl_owner=None, component=store)


# --------------------------------------------------------------------------- a job on a Spanner store (.base)

JOB_KEYS: Mapping[str, JobKey] = {
    "spanner_instance": JobKey(
        with_store="the instance is the store's when store= is given: remove it",
        other_kind="applies to a Spanner store only: set store_kind to 'spanner', or remove it"),
}
OWN_REFUSAL: Optional[str] = None
APP_ENGINE_REFUSAL: Optional[str] = None
STORE_NETWORK = False
DATABASE_ENV = "DEDUP_SPANNER_DATABASE"
ENV_FIELDS: Mapping[str, str] = {"DEDUP_SPANNER_INSTANCE": "spanner_instance", "DEDUP_SPANNER_DATABASE": "database_id"}


def resolve_own(args: Mapping[str, Any], *, prefix: str, project: Optional[str], region: Optional[str],
                collection: str, keys: Mapping[str, str]) -> JobStore:
    """A Spanner database of the job's own, in ``spanner_instance`` (``keys``) or an instance of its own.

    Its table, database and instance ids are the handler's (``DEDUP_COLLECTION``, ``DEDUP_SPANNER_DATABASE``,
    ``DEDUP_SPANNER_INSTANCE``), checked again by ``check_handler_settings``.

    Raises:
        DedupConfigError: ``create_database`` or ``database_location`` given, or an invalid Spanner input.
    """
    instance = keys.get("spanner_instance")
    for key in ("create_database", "database_location"):
        if args.get(key) is not None:
            raise DedupConfigError(key, "a job's own Spanner store always creates its database (its DDL holds "
                                        f"the table), in spanner_instance or an instance of its own: remove {key}")
    database_id = read_str(args, "database_id")
    if region is None and instance is None:  # the instance's region is unknown: reported as the region's problem
        return JobStore(None, "spanner", collection, True, database_id or "", "", instance_id="")
    spanner = resolve_spanner_settings(
        {"instance_id": instance, "create_instance": instance is None, "database_id": database_id,
         "deletion_protection": args.get("deletion_protection", False),
         "protect_database": args.get("protect_database", True)},
        project=project or "", region=region, default_instance=f"{prefix[:55].rstrip('-')}-dedup",
        default_database=f"{prefix[:24].rstrip('-')}-dedup", tables=[collection])
    return JobStore(None, "spanner", collection, True, spanner.database_id, spanner.instance_config,
                    instance_id=spanner.instance_id, own=spanner)


def location_problem(store: JobStore) -> Optional[str]:
    """None: a job's own Spanner instance's config is checked with its other inputs (:func:`resolve_own`)."""
    return None


def check_job_ids(project: Optional[str], instance_id: Any, database_id: Any, collection: Any) -> None:
    """:func:`check_spanner_ids` of the store's instance, database and the job's table.

    Raises:
        DedupConfigError: field ``store.instance_id``, ``store.database_id`` or ``collection``.
    """
    check_spanner_ids(instance_id, database_id, collection)


def job_environment(s: JobSettings) -> dict[str, pulumi.Input[str]]:
    """``DEDUP_STORE=spanner`` with ``DEDUP_SPANNER_INSTANCE`` and ``DEDUP_SPANNER_DATABASE``."""
    assert s.instance_id is not None
    return {"DEDUP_STORE": "spanner", "DEDUP_SPANNER_INSTANCE": s.instance_id, "DEDUP_SPANNER_DATABASE": s.database_id}


def claim_own(s: JobSettings, owner: str) -> Optional[SpannerStoreSettings]:
    """The job's own database's settings (resolved with the inputs), its table's TTL claimed for ``owner``; None on
    a shared store.

    Raises:
        DedupConfigError: another component of this program owns the table's TTL.
    """
    sp: Optional[SpannerStoreSettings] = s.own_store
    if sp is not None:  # one table, one row deletion policy
        claim_ttl_policy(sp.project, f"{sp.instance_id}/{sp.database_id}", s.collection.lower(), owner)
    return sp


def job_children(job: pulumi.Resource, name: str, s: JobSettings, own: Optional[SpannerStoreSettings], *,
                 member: pulumi.Input[str], enabled: Sequence[pulumi.Resource], after_apis: pulumi.ResourceOptions,
                 labels: Mapping[str, str]) -> JobStoreChildren:
    """The job's own Spanner database (``own``: in an adopted or created instance), or the shared store's checked;
    either way ``roles/spanner.databaseUser`` for ``member`` on that database only."""
    database: Optional[gcp.spanner.Database] = None
    database_id: pulumi.Input[str]
    if own is not None:
        children = spanner_children(own, opts=after_apis, instance_name=f"{name}-spanner",
                                    database_name=f"{name}-db", labels=labels)
        database = children.database
        database_id = children.database.name
        instance: pulumi.Input[str] = children.instance.name if children.instance else own.instance_id
    else:
        database_id = checked_database(s, lambda db: check_spanner_ids(None, db, s.collection))
        assert s.instance_id is not None
        instance = s.instance_id
    grant_database_user(
        f"{name}-runtime-spanner-database-user", project=s.project, instance=instance, database=database_id,
        member=member,
        opts=pulumi.ResourceOptions(parent=job, depends_on=[*enabled, *([database] if database else [])]))
    return JobStoreChildren(database, database_id,
                            database.name if database is not None else pulumi.Output.from_input(database_id))
