"""``DedupStore``: one run store shared by many deduplicated jobs (a Firestore database, a Spanner database or a
Memorystore for Redis instance), and the single owner of its TTL policies.

``kind`` picks the store (:data:`STORE_KINDS`, default ``firestore``); each kind's children live in a module of
their own, the store's registered ``component`` (Firestore here, Spanner in :mod:`.spanner`, Memorystore in
:mod:`.memorystore`), and
:class:`DedupStore` and :func:`resolve_store_ref` dispatch on it, the one place that does.

Type token ``scheduler-dedup:index:DedupStore``. Children (all ``parent=self``, logical names ``<name>-<part>``):

* ``gcp:projects:Service`` for every API the jobs need (``disable_on_destroy=False``), so jobs that use the
  store enable none themselves, and a ``time:Sleep`` after them that the store's own children wait for (an API
  enabled moments ago is not yet usable: :func:`~scheduler_dedup.infra.project.enable.enable_apis`);
* the Firestore database (native mode) unless an existing one is adopted (``create_database=False``);
* per owned collection, the one ``gcp:firestore:Field`` with the TTL policy on ``expire_at`` and the
  composite indexes run history needs (:data:`~scheduler_dedup.handler.stores.firestore.schema.RUN_HISTORY_INDEXES`).

Why a store of its own: a TTL policy is one setting of one collection group. When two stacks each declare a
``Field`` for it, ``pulumi destroy`` of either removes the policy (and the field's index exemption) for both,
and records then live forever. A project also holds at most 100 databases, and only one is in the free
tier (https://cloud.google.com/firestore/quotas). So many jobs share one store: its stack is ``pulumi up``-ed
once, and jobs in other stacks read its outputs (plain values) with a ``StackReference`` and pass them as
``store=``. Such a job creates only its own runtime identity's grant on the database; destroying the job's
stack leaves the database, TTL policies and indexes as they are.

A job without ``store=`` keeps a store of its own, created by :func:`firestore_children` under the job with
the names it always had (``<job>-db``, ``<job>-ttl``), so existing stacks see no replacement.
"""

# No `from __future__ import annotations`: Pulumi's component analyzer reads the real annotation types.
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION, Settings
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.record import TTL_FIELD
from scheduler_dedup.handler.stores import registry
from scheduler_dedup.handler.stores.firestore.config import FirestoreConfig
from scheduler_dedup.handler.stores.firestore.schema import RUN_HISTORY_INDEXES

from scheduler_dedup.infra.project.apis import STORE_APIS, for_store
from scheduler_dedup.infra.args import DedupStoreArgs, DedupStoreRefArgs
from scheduler_dedup.infra.errors import DedupConfigError, bool_input
from scheduler_dedup.infra.project.locations import region_problem
from scheduler_dedup.infra.project.enable import enable_apis
from scheduler_dedup.infra.project.providers import ProjectSource, child_project, project_source
from scheduler_dedup.infra.stores.spanner import SPANNER_KEYS, resolve_spanner_settings, spanner_children
from scheduler_dedup.infra.stores.ttl_policy import second_ttl_owner, ttl_policy_key

TYPE_TOKEN = "scheduler-dedup:index:DedupStore"
DEFAULT_STORE_DATABASE = "scheduler-dedup"


#: ``DedupStore`` kinds (``kind`` input, stack key ``storeKind``): each registered store's component kind
#: (:attr:`~scheduler_dedup.handler.stores.kind.StoreKind.component_kind`, ``memorystore`` for the ``redis`` store),
#: whose children live in its registered ``component`` module (Firestore here, :mod:`.spanner`, :mod:`.memorystore`).
STORE_KINDS = tuple(kind.component_kind for kind in registry.STORES)
DEFAULT_KIND = registry.FIRESTORE.component_kind
#: The handler's ``DEDUP_STORE`` for a job on a store of each kind (the store's kind id).
HANDLER_STORE = {kind.component_kind: kind.id for kind in registry.STORES}


def store_kind(args: Mapping[str, Any], key: str = "kind", field: Optional[str] = None) -> str:
    """The store kind ``args[key]`` names (default ``firestore``): a plain string known at preview, since it decides
    what is created.

    Raises:
        DedupConfigError: field ``field`` (default ``key``): an output, or not one of :data:`STORE_KINDS`.
    """
    kind = args.get(key) or DEFAULT_KIND
    if isinstance(kind, pulumi.Output):
        raise DedupConfigError(field or key, "must be known at preview (it decides what is created): pass a plain "
                                             f"string, one of {', '.join(STORE_KINDS)}")
    if kind not in STORE_KINDS:
        raise DedupConfigError(field or key, f"{kind!r} is not a store kind: use one of {', '.join(STORE_KINDS)}")
    return str(kind)


def store_apis(kind: str = DEFAULT_KIND) -> tuple[str, ...]:
    """Every API a store of ``kind`` enables, so that jobs using it enable none
    (:data:`~scheduler_dedup.infra.project.apis.STORE_APIS`, with the kind's store APIs in Firestore's place)."""
    return for_store(STORE_APIS, kind)


_ALLOWED_KEYS = frozenset({"kind", "location", "project", "database_id", "create_database", "collections",
                           "deletion_protection", "protect_database"})
_REF_KEYS = frozenset({"kind", "project", "instance_id", "database_id", "collections", "ttl_owner"})
_LOCATION_RE = re.compile(r"^[a-z][a-z0-9-]{1,40}$")


@dataclass(frozen=True)
class StoreSettings:
    """A store's resolved inputs: where the database is and which collections' TTL policies it owns."""

    project: str
    location: str
    database_id: str
    create_database: bool
    collections: tuple[str, ...]
    deletion_protection: bool
    protect_database: bool = True


def resolve_store_settings(args: Mapping[str, Any], *, default_project: str | None = None,
                           provider_name: str | None = None) -> StoreSettings:
    """Validate :class:`~scheduler_dedup.infra.args.DedupStoreArgs` and apply the defaults.

    Database and collection ids are checked by the handler's own rules
    (:class:`scheduler_dedup.handler.config.settings.Settings`), so a store no handler could use fails at preview.

    Raises:
        DedupConfigError: the first invalid input, naming it and the fix.
    """
    unknown = sorted(set(args) - _ALLOWED_KEYS)
    if unknown:
        from scheduler_dedup.infra.stores.memorystore import MEMORYSTORE_KEYS

        kinds = [kind for kind, keys in (("spanner", SPANNER_KEYS), ("memorystore", MEMORYSTORE_KEYS))
                 if unknown[0] in keys]
        if kinds:
            raise DedupConfigError(unknown[0], f"is an input of a {' or '.join(kinds)} store: set kind to "
                                               f"{' or '.join(repr(k) for k in kinds)}, or remove it")
        raise DedupConfigError(unknown[0], f"unknown input of DedupStore; valid inputs are {', '.join(sorted(_ALLOWED_KEYS))}")
    location = args.get("location")
    if not isinstance(location, str) or not _LOCATION_RE.match(location):
        raise DedupConfigError("location", f"{location!r} is not a Firestore location id: use e.g. 'nam5', 'eur3' or "
                                           "'us-central1' (https://cloud.google.com/firestore/docs/locations)")
    if args.get("create_database", True) is True:
        offered = region_problem(location, ("Firestore",))
        if offered:
            raise DedupConfigError("location", offered)

    project = child_project(args, default_project, provider_name)
    create_database = bool_input(args, "create_database", True)
    deletion_protection = bool_input(args, "deletion_protection", False)
    protect_database = bool_input(args, "protect_database", True)
    database_id = args.get("database_id") or (DEFAULT_STORE_DATABASE if create_database else "(default)")
    collections = args.get("collections", [DEFAULT_COLLECTION])
    if isinstance(collections, str) or not isinstance(collections, Sequence) or not collections:
        raise DedupConfigError("collections", f"must be a non-empty list of collection ids, got {collections!r}")
    if len(set(collections)) != len(collections):
        raise DedupConfigError("collections", f"lists a collection twice: {list(collections)!r}; one TTL policy each")
    for collection in collections:
        if not isinstance(collection, str):
            raise DedupConfigError("collections", f"{collection!r} is not a collection id (a string)")
        try:
            check_firestore_ids(project, database_id, collection)
        except DedupConfigError as exc:
            field = "collections" if exc.field == "collection" else exc.field
            raise DedupConfigError(field, str(exc).split(": ", 1)[-1]) from None
    return StoreSettings(project=project, location=location, database_id=database_id, create_database=create_database,
                         collections=tuple(collections), deletion_protection=deletion_protection,
                         protect_database=protect_database)


def check_firestore_ids(project: str, database_id: Any, collection: Any) -> None:
    """Check plain database and collection ids with the handler's rules; outputs are checked where they resolve.

    Raises:
        DedupConfigError: field ``database_id`` or ``collection``; the handler's message says the fix.
    """
    if not isinstance(database_id, str) or not isinstance(collection, str):
        return
    try:
        Settings(project=project, collection=collection, store_config=FirestoreConfig(database=database_id))
    except ConfigError as exc:
        field = "database_id" if str(exc).startswith("DEDUP_DATABASE") else (
            "collection" if str(exc).startswith("DEDUP_COLLECTION") else "project")
        raise DedupConfigError(field, f"the handler would refuse it: {exc}") from None


def check_spanner_ids(instance_id: Any, database_id: Any, table: Any) -> None:
    """Check plain Spanner instance, database and table ids with the handler's rules (outputs pass).

    Raises:
        DedupConfigError: field ``store.instance_id``, ``store.database_id`` or ``collection``.
    """
    from scheduler_dedup.handler.stores.spanner import schema as spanner_schema
    for field, value, check in (("store.instance_id", instance_id, spanner_schema.instance_id_problem),
                                ("store.database_id", database_id, spanner_schema.database_id_problem),
                                ("collection", table, spanner_schema.table_name_problem)):
        problem = check(value) if isinstance(value, str) else None
        if problem:
            raise DedupConfigError(field, f"the handler would refuse it: {problem}")


# --------------------------------------------------------------------------- one TTL owner per program

#: Per Pulumi run (keyed by the runtime's resource monitor, which each run or mock setup replaces): which
#: component owns the TTL policy of (project, database, collection group) (:func:`.ttl_policy.ttl_policy_key`).
_TTL_OWNERS: "weakref.WeakKeyDictionary[Any, dict[tuple[Any, Any, Any], str]]" = weakref.WeakKeyDictionary()


def claim_ttl_policy(project: str, database_id: str, collection: str, owner: str) -> None:
    """Record that ``owner`` manages the TTL policy of ``collection`` in this program, or refuse a second owner.

    Two ``gcp.firestore.Field`` resources with a TTL on one collection group (whatever their field) manage one real setting
    (:mod:`.ttl_policy`): destroying
    either removes it for both. The check covers one program; the policy pack's ``firestore-ttl-single-owner``
    covers hand-written stacks.

    Raises:
        DedupConfigError: field ``store``, naming the first owner and the fix (share one :class:`DedupStore`).
    """
    from pulumi.runtime.settings import get_monitor

    monitor = get_monitor()
    if monitor is None:  # no Pulumi run: nothing to share a registry with
        return
    try:
        owners = _TTL_OWNERS.setdefault(monitor, {})
    except TypeError:  # pragma: no cover - a monitor that is not weak-referenceable: no per-run registry
        return
    key = ttl_policy_key(project, database_id, collection)
    first = owners.setdefault(key, owner)
    if first != owner:
        raise DedupConfigError("store", second_ttl_owner(first, owner, TTL_FIELD, TTL_FIELD, collection, database_id)
                               + f" (project {project})")


#: Why the database is protected with Pulumi's ``protect`` and not ``retain_on_delete``.
PROTECT_DATABASE_DOC = """\
The database holds the run records that late retries of completed runs are deduplicated against. A change that
replaces it (a new database id, e.g. after renaming the component) would start an empty database: a retry of a
run that already completed finds no record and runs the job again. Pulumi's `protect` makes every plan that would
delete or replace the database fail at `pulumi preview` and `pulumi up`, before anything is changed.
`retain_on_delete` would not: the replacement would go ahead, the old database would only be left behind, and the
job would use the new, empty one. To remove the database on purpose, set protect_database false and run
`pulumi up` first, then `pulumi destroy` (docs/renaming.md).
"""


# --------------------------------------------------------------------------- children shared by store and job

@dataclass(frozen=True)
class FirestoreChildren:
    """What :func:`firestore_children` created: the database (None when adopted) and the resources to wait for."""

    database: Optional[gcp.firestore.Database]
    ready: list[pulumi.Resource]


def firestore_children(
    s: StoreSettings, *, opts: pulumi.ResourceOptions,
    database_name: str, ttl_name: Callable[[str], str], index_name: Callable[[str, int], str],
) -> FirestoreChildren:
    """Create the database (unless adopted), and per collection its TTL policy and run history indexes.

    Args:
        s: the store's settings.
        opts: options of every child (parent, API dependencies).
        database_name, ttl_name, index_name: logical names of the database, of a collection's TTL field and of
            a collection's ``n``-th history index.

    The caller claims the TTL policies with :func:`claim_ttl_policy` first, before it creates any child.
    """
    database: Optional[gcp.firestore.Database] = None
    if s.create_database:
        database = gcp.firestore.Database(
            database_name,
            gcp.firestore.DatabaseArgs(
                name=s.database_id, project=s.project, location_id=s.location,
                type="FIRESTORE_NATIVE", concurrency_mode="OPTIMISTIC",
                delete_protection_state=(
                    "DELETE_PROTECTION_ENABLED" if s.deletion_protection else "DELETE_PROTECTION_DISABLED"
                ),
                # The provider's default ABANDON would leave the database behind on `pulumi destroy`.
                deletion_policy="DELETE",
            ),
            # Pulumi `protect` (PROTECT_DATABASE_DOC): a plan that would delete or replace the database, and with
            # it the run records late retries are deduplicated against, fails instead of running.
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=s.protect_database)),
        )
    after_db = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[database] if database else []))
    ready: list[pulumi.Resource] = [*([database] if database else [])]
    for collection in s.collections:
        # TTL policy on expire_at: https://cloud.google.com/firestore/docs/ttl ; an empty index_config
        # turns the field's single-field indexes off (a timestamp that only grows would hotspot them).
        ready.append(gcp.firestore.Field(
            ttl_name(collection),
            gcp.firestore.FieldArgs(
                project=s.project, database=s.database_id, collection=collection, field=TTL_FIELD,
                ttl_config=gcp.firestore.FieldTtlConfigArgs(),
                index_config=gcp.firestore.FieldIndexConfigArgs(),
            ),
            opts=after_db,
        ))
        for n, fields in enumerate(RUN_HISTORY_INDEXES):
            ready.append(gcp.firestore.Index(
                index_name(collection, n),
                gcp.firestore.IndexArgs(
                    project=s.project, database=s.database_id, collection=collection, query_scope="COLLECTION",
                    fields=[gcp.firestore.IndexFieldArgs(field_path=path, order=order) for path, order in fields],
                ),
                opts=after_db,
            ))
    return FirestoreChildren(database=database, ready=ready)


# --------------------------------------------------------------------------- the component

class DedupStore(pulumi.ComponentResource):
    """One run store for many deduplicated jobs (a Firestore database; a Spanner database with ``kind="spanner"``; a Memorystore for Redis instance with ``kind="memorystore"``), and the single owner of each collection's TTL policy and run history index."""

    kind: str
    """The store kind: ``firestore``, ``spanner`` or ``memorystore`` (a job stack's ``storeKind``)."""
    project: pulumi.Output[str]
    """Project id of the store."""
    instance_id: pulumi.Output[str]
    """Spanner instance id of the database (empty for Firestore)."""
    database_id: pulumi.Output[str]
    """Firestore or Spanner database id."""
    database_resource_name: pulumi.Output[str]
    """``projects/P/databases/D`` (Firestore: what an IAM condition compares ``resource.name`` with) or ``projects/P/instances/I/databases/D`` (Spanner)."""
    location: pulumi.Output[str]
    """Firestore location id; the Spanner instance config (e.g. ``regional-us-central1``; empty for an adopted instance); the Memorystore instance's region."""
    collections: pulumi.Output[list[str]]
    """Collections (Spanner: tables) whose TTL policy and indexes the store owns."""
    ttl_field: pulumi.Output[str]
    """The field (Spanner: column) the TTL policies delete records by (``expire_at``)."""

    def __init__(self, name: str, args: DedupStoreArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """Validate ``args`` and create the children.

        Args:
            name: Pulumi name of the store; children are named ``<name>-<part>``.
            args: see :class:`~scheduler_dedup.infra.args.DedupStoreArgs`.
            opts: resource options of the component.

        Raises:
            DedupConfigError: an invalid input, or a TTL policy another component of this program owns,
                before any child is created (so ``pulumi preview`` fails).
        """
        source = project_source(opts)
        self.kind = store_kind(args)
        self.store_name = name
        if self.kind == "memorystore":
            self._memorystore(name, args, opts, source.project)
            return
        if self.kind == "spanner":
            self._spanner(name, args, opts, source)
            return
        s = resolve_store_settings({k: v for k, v in args.items() if k != "kind"}, default_project=source.project,
                                   provider_name=source.provider_name)
        for collection in s.collections:  # before any child exists, so a second owner fails cleanly
            claim_ttl_policy(s.project, s.database_id, collection, f"DedupStore {name}")
        super().__init__(TYPE_TOKEN, name, None, opts)
        self.settings = s
        apis = self._apis(name, s.project)
        children = firestore_children(
            s, opts=pulumi.ResourceOptions(parent=self, depends_on=list(apis)),
            database_name=f"{name}-db", ttl_name=lambda c: f"{name}-ttl-{c}",
            index_name=lambda c, n: f"{name}-history-{c}-{n}",
        )
        database_id = children.database.name if children.database else pulumi.Output.from_input(s.database_id)
        # Readers of database_id (jobs in this program) wait until the TTL policies and indexes exist.
        self._finish(project=s.project, instance_id="",
                     database_id=pulumi.Output.all(database_id, *[r.urn for r in children.ready]).apply(
                         lambda v: str(v[0])),
                     resource_prefix=pulumi.Output.concat("projects/", s.project, "/databases/"),
                     location=s.location, collections=s.collections)

    def _apis(self, name: str, project: str) -> list[pulumi.Resource]:
        """Enable the APIs the store's jobs need (:func:`store_apis` of its kind) once here; returns what the store's
        own children wait for: those APIs usable, not merely enabled (:func:`~scheduler_dedup.infra.project.enable.enable_apis`)."""
        return enable_apis(name, project, store_apis(self.kind), self)

    def _spanner(self, name: str, args: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions],
                 source: ProjectSource) -> None:
        """``kind="spanner"``: an instance (created or adopted) and a database with the DDL (:mod:`.spanner`)."""
        unknown = sorted(set(args) - _ALLOWED_KEYS - SPANNER_KEYS)
        if unknown:
            raise DedupConfigError(unknown[0], "unknown input of a Spanner DedupStore; valid inputs are "
                                               f"{', '.join(sorted(_ALLOWED_KEYS | SPANNER_KEYS))}")
        if args.get("create_database", True) is not True:
            raise DedupConfigError("create_database", "a Spanner store always creates its database (its DDL holds "
                                                      "the tables); adopt an instance with create_instance=false")
        project = child_project(args, source.project, source.provider_name)
        location = args.get("location")
        s = resolve_spanner_settings(args, project=project,
                                                   region=location if isinstance(location, str) else None)
        for table in s.tables:
            claim_ttl_policy(s.project, f"{s.instance_id}/{s.database_id}", table.lower(), f"DedupStore {name}")
        super().__init__(TYPE_TOKEN, name, None, opts)
        self.spanner_settings = s
        apis = self._apis(name, s.project)
        children = spanner_children(
            s, opts=pulumi.ResourceOptions(parent=self, depends_on=list(apis)),
            instance_name=f"{name}-instance", database_name=f"{name}-db")
        self._finish(project=s.project, instance_id=s.instance_id, database_id=children.database.name,
                     resource_prefix=pulumi.Output.concat("projects/", s.project, "/instances/", s.instance_id,
                                                          "/databases/"),
                     location=s.instance_config if s.create_instance else "", collections=s.tables)

    def _finish(self, *, project: str, instance_id: str, database_id: pulumi.Input[str],
                resource_prefix: pulumi.Output[str], location: str, collections: Sequence[str]) -> None:
        """The outputs of a Firestore or Spanner store (:data:`~scheduler_dedup.infra.stack.program.STORE_OUTPUTS`)."""
        self.project = pulumi.Output.from_input(project)
        self.instance_id = pulumi.Output.from_input(instance_id)
        self.database_id = pulumi.Output.from_input(database_id)
        self.database_resource_name = pulumi.Output.concat(resource_prefix, self.database_id)
        self.location = pulumi.Output.from_input(location)
        self.collections = pulumi.Output.from_input(list(collections))
        self.ttl_field = pulumi.Output.from_input(TTL_FIELD)
        self.register_outputs({
            "kind": self.kind, "project": self.project, "instance_id": self.instance_id,
            "database_id": self.database_id, "database_resource_name": self.database_resource_name,
            "location": self.location, "collections": self.collections, "ttl_field": self.ttl_field,
        })

    def _memorystore(self, name: str, args: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions],
                     default_project: Optional[str]) -> None:
        """``kind="memorystore"``: a Memorystore for Redis instance and its secrets (:mod:`.memorystore`)."""
        from scheduler_dedup.infra.stores.memorystore import memorystore_children, resolve_memorystore_settings

        s = resolve_memorystore_settings(name, args, default_project=default_project)
        super().__init__(TYPE_TOKEN, name, None, opts)
        self.redis_settings = s
        apis = self._apis(name, s.project)
        children = memorystore_children(name, s, opts=pulumi.ResourceOptions(parent=self, depends_on=list(apis)))
        self.redis_ref = children.ref
        self.project = pulumi.Output.from_input(s.project)
        self.location = pulumi.Output.from_input(s.region)
        self.collections = pulumi.Output.from_input(list(s.collections))
        self.ttl_field = pulumi.Output.from_input(TTL_FIELD)
        outputs = {"redis_host": children.ref.host,
                   "redis_port": children.instance.port, "redis_url": children.ref.url,
                   "auth_secret": children.ref.auth_secret, "ca_secret": children.ref.ca_secret,
                   "network": pulumi.Output.from_input(s.authorized_network),
                   "subnetwork": pulumi.Output.from_input(s.subnetwork),
                   "wait_timeout_ms": pulumi.Output.from_input(s.wait_timeout_ms)}
        for key, value in outputs.items():
            setattr(self, key, value)
        self.register_outputs({"kind": self.kind, "project": self.project, "location": self.location,
                               "collections": self.collections, "ttl_field": self.ttl_field, **outputs})

    @property
    def ref(self) -> DedupStoreRefArgs:
        """This store as plain values known at preview (what its stack exports). In the same program, pass the
        DedupStore itself as ``store=``: the job then also waits for it, and declares no TTL owner elsewhere."""
        if self.kind == "memorystore":
            return {"kind": "memorystore", "project": self.redis_settings.project,  # type: ignore[typeddict-item]
                    "collections": list(self.redis_settings.collections)}
        if self.kind == "spanner":
            sp = self.spanner_settings
            return {"kind": "spanner", "project": sp.project, "instance_id": sp.instance_id,
                    "database_id": sp.database_id, "collections": list(sp.tables)}
        return {"kind": "firestore", "project": self.settings.project, "database_id": self.settings.database_id,
                "collections": list(self.settings.collections)}


# --------------------------------------------------------------------------- a job's view of a store

@dataclass(frozen=True)
class StoreRef:
    """A job's ``store`` input, checked: values may be outputs (a ``StackReference``) until they resolve, except the
    kind, which decides what the job creates and so is known at preview."""

    project: pulumi.Input[str]
    database_id: pulumi.Input[str]
    """Firestore or Spanner database id (``(default)`` for Memorystore, whose jobs use none)."""
    collections: pulumi.Input[list[str]]
    ttl_owner: Optional[str]
    """Where the TTL policy lives when not in this program (``DEDUP_TTL_OWNER``); None for a DedupStore given as is,
    and for Memorystore (each record expires by itself)."""
    component: Optional[DedupStore] = None
    kind: str = DEFAULT_KIND
    """The store's kind (:data:`STORE_KINDS`)."""
    instance_id: Optional[pulumi.Input[str]] = None
    """Spanner: the instance of the database; None for other kinds."""
    redis: Optional[Any] = None
    """Memorystore: the store's endpoint, secrets and network (:class:`.memorystore.RedisStoreRef`); None for
    other kinds."""


def resolve_store_ref(store: Any) -> StoreRef:
    """Accept a :class:`DedupStore` or a :class:`~scheduler_dedup.infra.args.DedupStoreRefArgs` mapping, of any kind.

    Raises:
        DedupConfigError: field ``store`` (or ``store.<key>``): not a store, an unknown or missing key, or a kind
            that is an output.
    """
    component = store if isinstance(store, DedupStore) else None
    if component is not None and component.kind == "memorystore":
        return StoreRef(project=component.redis_settings.project, database_id="(default)",
                        collections=list(component.redis_settings.collections), ttl_owner=None, component=component,
                        kind="memorystore", redis=component.redis_ref)
    if component is not None:
        store = component.ref
    if not isinstance(store, Mapping):
        raise DedupConfigError("store", f"must be a DedupStore or its outputs (project, database_id, collections), got {store!r}")
    kind = store_kind(store, "kind", "store.kind")
    if kind == "memorystore":
        from scheduler_dedup.infra.stores.memorystore import redis_ref_from

        ref = redis_ref_from(store)
        if store.get("project") is None or store.get("collections") is None:
            raise DedupConfigError("store.project" if store.get("project") is None else "store.collections",
                                   "is required: pass the DedupStore itself, or its stack's outputs")
        return StoreRef(project=store["project"], database_id="(default)", collections=_collections(store),
                        ttl_owner=None, kind=kind, redis=ref)
    unknown = sorted(set(store) - _REF_KEYS)
    if unknown:
        raise DedupConfigError(f"store.{unknown[0]}", f"unknown key; valid keys are {', '.join(sorted(_REF_KEYS))}")
    required = ("project", "database_id", "collections", *(("instance_id",) if kind == "spanner" else ()))
    for key in required:
        if store.get(key) is None:
            raise DedupConfigError(f"store.{key}", "is required: pass the DedupStore itself, or its stack's outputs "
                                                   f"{', '.join(required)}")
    if kind != "spanner" and store.get("instance_id") is not None:
        raise DedupConfigError("store.instance_id", f"is a Spanner store's output, but the store is a {kind} store: "
                                                    "set store.kind to 'spanner', or remove it")
    owner = None if component is not None else str(store.get("ttl_owner") or "DedupStore (another stack)")
    return StoreRef(project=store["project"], database_id=store["database_id"], collections=_collections(store),
                    ttl_owner=owner, component=component, kind=kind, instance_id=store.get("instance_id"))


def _collections(store: Mapping[str, Any]) -> pulumi.Input[list[str]]:
    """``store["collections"]``: a list of strings, or an output of one.

    Raises:
        DedupConfigError: field ``store.collections``: not a list.
    """
    collections = store["collections"]
    if isinstance(collections, str) or (not isinstance(collections, pulumi.Output) and not isinstance(collections, Sequence)):
        raise DedupConfigError("store.collections", f"must be a list of collection ids, got {collections!r}")
    if isinstance(collections, pulumi.Output):
        return collections
    if any(isinstance(c, pulumi.Output) for c in collections):  # e.g. from another language's SDK
        return pulumi.Output.all(*collections)
    return [str(c) for c in collections]
