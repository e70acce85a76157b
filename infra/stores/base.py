"""What ``DedupStore`` (:mod:`.store`), ``DedupScheduledJob`` and each store's component piece (:mod:`.firestore`,
:mod:`.spanner`, :mod:`.memorystore`) share: a job's view of a store (:class:`StoreRef`), the job's run store
(:class:`JobStore`, :class:`JobStoreChildren`), the one TTL owner per program, and why a store's database is protected.

Each piece is the module its store's registration names (``component``,
:data:`scheduler_dedup.handler.stores.registry.STORES`), loaded when a store of its kind is built or read
(:func:`.store.piece`), so neither ``DedupStore`` nor the job names a store. It provides, for ``DedupStore``:

* ``KEYS``: its ``DedupStore`` inputs (of :class:`~scheduler_dedup.infra.args.DedupStoreArgs`);
* ``REF_KEYS``: the keys of a job's ``store`` input for it (its outputs, of
  :class:`~scheduler_dedup.infra.args.DedupStoreRefArgs`);
* ``APIS``: the Google APIs of the store itself, which take Firestore's place in a job's list
  (:func:`scheduler_dedup.infra.project.apis.for_store`);
* ``build(store, name, args, opts, source)``: validate ``args`` and create the store's children under ``store``;
* ``outputs(store)``: the store as plain values (``DedupStore.ref``);
* ``ref_of(store)`` and ``ref_from(outputs)``: the :class:`StoreRef` of a store in this program, or of its outputs;

and for a job on a store of its kind (``s`` the job's resolved settings, :class:`JobSettings`):

* ``JOB_KEYS``: the job inputs that apply to this store only (:class:`JobKey`);
* ``OWN_REFUSAL``: why a job may have no store of this kind of its own (the ``store_kind`` error), or None;
* ``resolve_own(args, prefix=, project=, region=, collection=, keys=)``: the job's own store (:class:`JobStore`),
  ``keys`` the given ``JOB_KEYS``; only when ``OWN_REFUSAL`` is None;
* ``location_problem(store)``: why the job's own store's location is refused, or None;
* ``check_job_ids(project, instance_id, database_id, collection)``: check plain ids with the handler's rules;
* ``APP_ENGINE_REFUSAL``: why a job on it cannot have App Engine as its Scheduler target, or None;
* ``STORE_NETWORK``: a job reaches it by Direct VPC egress into the store's network;
* ``DATABASE_ENV`` and ``ENV_FIELDS``: the handler variable of its database, and its variables' job inputs;
* ``job_environment(s)``: where the handler's run store is, its part of the ``DEDUP_*`` environment;
* ``claim_own(s, owner)``: claim the TTL policies of the job's own store (before any child exists) and return what
  ``job_children`` creates it from, or None on a shared store;
* ``job_children(job, name, s, own, member=, enabled=, after_apis=, labels=)``: the job's own store's children
  and the runtime identity's grant on the store (:class:`JobStoreChildren`).

Imports the handler, ``infra.args``, ``infra.errors`` and ``infra.project``.
"""
# No `from __future__ import annotations`: Pulumi's component analyzer reads the real annotation types.
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.handler.core.record import TTL_FIELD

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.stores.ttl_policy import second_ttl_owner, ttl_policy_key


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
    component: Optional[pulumi.ComponentResource] = None
    """The ``DedupStore`` itself, when given as is (the job then waits for it)."""
    kind: str = "firestore"
    """The store's kind (:data:`~scheduler_dedup.infra.stores.store.STORE_KINDS`)."""
    instance_id: Optional[pulumi.Input[str]] = None
    """Spanner: the instance of the database; None for other kinds."""
    redis: Optional[Any] = None
    """Memorystore: the store's endpoint, secrets and network (:class:`.memorystore.RedisStoreRef`); None for
    other kinds."""


def collections_of(store: Mapping[str, Any]) -> pulumi.Input[list[str]]:
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


def database_ref(store: Mapping[str, Any], kind: str, required: Sequence[str]) -> StoreRef:
    """A job's view of a store that is a database (Firestore, Spanner) from its outputs, ``required`` present.

    Raises:
        DedupConfigError: field ``store.<key>``: a required output is missing.
    """
    for key in required:
        if store.get(key) is None:
            raise DedupConfigError(f"store.{key}", "is required: pass the DedupStore itself, or its stack's outputs "
                                                   f"{', '.join(required)}")
    return StoreRef(project=store["project"], database_id=store["database_id"], collections=collections_of(store),
                    ttl_owner=str(store.get("ttl_owner") or "DedupStore (another stack)"), kind=kind,
                    instance_id=store.get("instance_id"))


# --------------------------------------------------------------------------- a job's run store

#: What every piece provides for a job on a store of its kind (this module's docstring says what each is), beside
#: ``resolve_own`` (only when ``OWN_REFUSAL`` is None).
JOB_PIECE = ("JOB_KEYS", "OWN_REFUSAL", "location_problem", "check_job_ids", "APP_ENGINE_REFUSAL", "STORE_NETWORK",
             "DATABASE_ENV", "ENV_FIELDS", "job_environment", "claim_own", "job_children")


@dataclass(frozen=True)
class JobKey:
    """A job input that applies to one store kind only: the refusal when ``store=`` is given, and when the job's own
    store is of another kind."""

    with_store: str
    other_kind: str


@dataclass(frozen=True)
class JobStore:
    """The job's run store, resolved: a shared one (``store``), or the job's own (its piece's ``resolve_own``)."""

    store: Optional[StoreRef]
    kind: str
    collection: str
    create_database: bool
    database_id: pulumi.Input[str]
    database_location: str
    instance_id: Optional[pulumi.Input[str]] = None
    """The instance of the database (Spanner: the job's own or the store's); None for other kinds."""
    own: Any = None
    """What the piece resolved of the job's own store with the inputs (Spanner's settings); None otherwise."""


class JobSettings(Protocol):
    """What a piece reads of a job's resolved settings
    (:class:`~scheduler_dedup.infra.job.resolved.DedupSettings`)."""

    @property
    def project(self) -> str: ...
    @property
    def collection(self) -> str: ...
    @property
    def database_id(self) -> pulumi.Input[str]: ...
    @property
    def database_location(self) -> str: ...
    @property
    def create_database(self) -> bool: ...
    @property
    def deletion_protection(self) -> bool: ...
    @property
    def protect_database(self) -> bool: ...
    @property
    def store(self) -> Optional[StoreRef]: ...
    @property
    def instance_id(self) -> Optional[pulumi.Input[str]]: ...
    @property
    def own_store(self) -> Any: ...


@dataclass(frozen=True)
class StoreWiring:
    """What a job's Cloud Run service needs to reach its store beyond IAM: secret volumes, their mounts, VPC egress,
    and the grants created for them (the service waits for them)."""

    volumes: list[gcp.cloudrunv2.ServiceTemplateVolumeArgs]
    mounts: list[gcp.cloudrunv2.ServiceTemplateContainerVolumeMountArgs]
    vpc_access: gcp.cloudrunv2.ServiceTemplateVpcAccessArgs
    grants: list[pulumi.Resource] = field(default_factory=list)


@dataclass(frozen=True)
class JobStoreChildren:
    """What a piece's ``job_children`` created for a job: the job's own database (None on a shared store), the
    database id the handler gets, the job's ``database_name`` output, and the store's wiring (None when none)."""

    database: Optional[pulumi.Resource]
    database_id: pulumi.Input[str]
    database_name: pulumi.Output[str]
    wiring: Optional[StoreWiring] = None


def checked_database(s: JobSettings, check_ids: Callable[[Any], None]) -> pulumi.Output[str]:
    """The shared store's database id, checked once its values resolve (they may come from a StackReference);
    ``check_ids(database_id)`` is the piece's check of the resolved id.

    Raises (inside the output, so ``pulumi preview`` fails):
        DedupConfigError: the store is in another project, lacks the job's collection, or its ids are invalid.
    """
    assert s.store is not None
    store = s.store

    def check(values: list[Any]) -> str:
        project, database_id, collections = values
        if project != s.project:
            raise DedupConfigError("store.project", f"the store is in project {project!r}, the job in {s.project!r}: "
                                                    "deploy the job in the store's project")
        if s.collection not in (collections or []):
            raise DedupConfigError("collection", f"{s.collection!r} is not a collection of the store "
                                                 f"({', '.join(collections or [])}): use one of them, or add it to the store")
        check_ids(database_id)
        return str(database_id)

    return pulumi.Output.all(store.project, store.database_id, store.collections).apply(check)


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
        DedupConfigError: field ``store``, naming the first owner and the fix (share one ``DedupStore``).
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
