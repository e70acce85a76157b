"""``DedupStore``: one run store shared by many deduplicated jobs (a Firestore database, a Spanner database or a
Memorystore for Redis instance), and the single owner of its TTL policies; and a job's view of a store.

``kind`` picks the store (:data:`STORE_KINDS`, default ``firestore``); each kind's children come from its component
piece, the module its registration names (:attr:`~scheduler_dedup.handler.stores.kind.StoreKind.component`:
:mod:`.firestore`, :mod:`.spanner`, :mod:`.memorystore`), loaded by :func:`piece`. :class:`DedupStore` and
:func:`resolve_store_ref` check the keys they are given against the piece's and hand the rest to it (the interface
is :mod:`.base`'s), so a store of a new kind needs no line here, nor in the job (``infra/job/`` asks the piece too).

Type token ``scheduler-dedup:index:DedupStore``. Children (all ``parent=self``, logical names ``<name>-<part>``):
``gcp:projects:Service`` for every API the jobs need (``disable_on_destroy=False``), so jobs that use the store enable
none themselves, a ``time:Sleep`` after them that the piece's children wait for (an API enabled moments ago is not
yet usable: :func:`~scheduler_dedup.infra.project.enable.enable_apis`), and the piece's children.

Why a store of its own: a TTL policy is one setting of one collection group. When two stacks each declare a
``Field`` for it, ``pulumi destroy`` of either removes the policy (and the field's index exemption) for both,
and records then live forever. A project also holds at most 100 databases, and only one is in the free
tier (https://cloud.google.com/firestore/quotas). So many jobs share one store: its stack is ``pulumi up``-ed
once, and jobs in other stacks read its outputs (plain values) with a ``StackReference`` and pass them as
``store=``. Such a job creates only its own runtime identity's grant on the database; destroying the job's
stack leaves the database, TTL policies and indexes as they are.
"""

# No `from __future__ import annotations`: Pulumi's component analyzer reads the real annotation types.
from collections.abc import Collection, Mapping, Sequence
from types import ModuleType
from typing import Any, Optional

import pulumi

from scheduler_dedup.handler.core.record import TTL_FIELD
from scheduler_dedup.handler.stores import registry
from scheduler_dedup.handler.stores.kind import load

from scheduler_dedup.infra.args import DedupStoreArgs, DedupStoreRefArgs
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.project.apis import STORE_APIS, for_store
from scheduler_dedup.infra.project.enable import enable_apis
from scheduler_dedup.infra.project.providers import project_source
from scheduler_dedup.infra.stores.base import StoreRef

TYPE_TOKEN = "scheduler-dedup:index:DedupStore"


#: ``DedupStore`` kinds (``kind`` input, stack key ``storeKind``): each registered store's component kind
#: (:attr:`~scheduler_dedup.handler.stores.kind.StoreKind.component_kind`, ``memorystore`` for the ``redis`` store).
STORE_KINDS = tuple(kind.component_kind for kind in registry.STORES)
DEFAULT_KIND = registry.FIRESTORE.component_kind
#: The handler's ``DEDUP_STORE`` for a job on a store of each kind (the store's kind id).
HANDLER_STORE = {kind.component_kind: kind.id for kind in registry.STORES}


def piece(kind: str) -> ModuleType:
    """The component piece of the store of ``kind`` (a ``DedupStore`` kind), imported now.

    Raises:
        DedupConfigError: field ``kind``: no registered store has that kind, or it names no component piece.
    """
    store = registry.by_component_kind(kind)
    if store is None or not store.component:
        raise DedupConfigError("kind", f"{kind!r} is not a store kind: use one of {', '.join(STORE_KINDS)}")
    module: ModuleType = load(store.component)
    return module


def store_kind(args: Mapping[str, Any], key: str = "kind", field: Optional[str] = None) -> str:
    """The store kind ``args[key]`` names (default ``firestore``): a plain string known at preview, since it decides
    what is created.

    Returns:
        The store's component kind (:data:`STORE_KINDS`), whichever of its names was given
        (:func:`~scheduler_dedup.handler.stores.registry.named`: ``redis`` is ``memorystore``).

    Raises:
        DedupConfigError: field ``field`` (default ``key``): an output, or no store's name (with the closest one).
    """
    kind = args.get(key) or DEFAULT_KIND
    if isinstance(kind, pulumi.Output):
        raise DedupConfigError(field or key, "must be known at preview (it decides what is created): pass a plain "
                                             f"string, one of {', '.join(STORE_KINDS)}")
    store = registry.named(str(kind))  # any name a store goes by: redis is memorystore
    if store is None:
        problem = registry.store_name_problem(str(kind), field or key, component=True) or ""
        raise DedupConfigError(field or key, problem.partition("=")[2].replace("is not a run store",
                                                                              "is not a store kind"))
    return store.component_kind


def kind_apis(kind: str) -> tuple[str, ...]:
    """The Google APIs of a store of ``kind`` itself (its piece's ``APIS``), which take Firestore's place in a job's
    list (:func:`~scheduler_dedup.infra.project.apis.for_store`)."""
    apis: tuple[str, ...] = piece(kind).APIS
    return apis


def store_apis(kind: str = DEFAULT_KIND) -> tuple[str, ...]:
    """Every API a store of ``kind`` enables, so that jobs using it enable none
    (:data:`~scheduler_dedup.infra.project.apis.STORE_APIS`, with the kind's store APIs in Firestore's place)."""
    return for_store(STORE_APIS, kind_apis(kind))


def check_keys(kind: str, given: Collection[str], *, ref: bool = False) -> None:
    """Refuse a key that is not an input (``ref``: an output) of a store of ``kind``, naming the kinds it belongs to.

    Raises:
        DedupConfigError: field ``<key>`` (``store.<key>`` for ``ref``), with the kind to set or the valid keys.
    """
    attribute = "REF_KEYS" if ref else "KEYS"
    own: frozenset[str] = getattr(piece(kind), attribute)
    unknown = sorted(set(given) - own)
    if not unknown:
        return
    key = unknown[0]
    others = [other for other in STORE_KINDS if other != kind and key in getattr(piece(other), attribute)]
    store = registry.by_component_kind(kind)
    name = store.display_name if store is not None else kind
    field, what = (f"store.{key}", "output") if ref else (key, "input")
    if others:
        raise DedupConfigError(field, f"is not an {what} of a {name} DedupStore but of a {' or '.join(others)} one: "
                                      f"set {'store.kind' if ref else 'kind'} to "
                                      f"{' or '.join(repr(k) for k in others)}, or remove it")
    raise DedupConfigError(field, f"is not an {what} of a {name} DedupStore; valid {what}s are "
                                  f"{', '.join(sorted(own))}")


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
        """Validate ``args`` and create the children (the kind's piece does, :func:`piece`).

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
        check_keys(self.kind, args)
        #: The piece's resolved settings of this store (what its ``build`` returned).
        self.resolved: Any = piece(self.kind).build(self, name, args, opts, source)

    def begin(self, opts: Optional[pulumi.ResourceOptions]) -> None:
        """Register the component, once the piece has checked every input (a store that fails creates nothing)."""
        super().__init__(TYPE_TOKEN, self.store_name, None, opts)

    def enable_apis(self, project: str) -> list[pulumi.Resource]:
        """Enable the APIs the store's jobs need (:func:`store_apis` of its kind) once here; returns what the piece's
        children wait for: those APIs usable, not merely enabled
        (:func:`~scheduler_dedup.infra.project.enable.enable_apis`)."""
        return enable_apis(self.store_name, project, store_apis(self.kind), self)

    def finish(self, *, project: str, instance_id: str, database_id: pulumi.Input[str],
               resource_prefix: pulumi.Output[str], location: str, collections: Sequence[str]) -> None:
        """The outputs of a store that is a database (Firestore, Spanner;
        :data:`~scheduler_dedup.infra.stack.program.STORE_OUTPUTS`)."""
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

    @property
    def ref(self) -> DedupStoreRefArgs:
        """This store as plain values known at preview (what its stack exports). In the same program, pass the
        DedupStore itself as ``store=``: the job then also waits for it, and declares no TTL owner elsewhere."""
        outputs: DedupStoreRefArgs = piece(self.kind).outputs(self)
        return outputs


# --------------------------------------------------------------------------- a job's view of a store

def resolve_store_ref(store: Any) -> StoreRef:
    """Accept a :class:`DedupStore` or a :class:`~scheduler_dedup.infra.args.DedupStoreRefArgs` mapping, of any kind.

    Raises:
        DedupConfigError: field ``store`` (or ``store.<key>``): not a store, an unknown or missing key, or a kind
            that is an output.
    """
    if isinstance(store, DedupStore):
        ref: StoreRef = piece(store.kind).ref_of(store)
        return ref
    if not isinstance(store, Mapping):
        raise DedupConfigError("store", f"must be a DedupStore or its outputs (project, database_id, collections), got {store!r}")
    kind = store_kind(store, "kind", "store.kind")
    check_keys(kind, store, ref=True)
    ref = piece(kind).ref_from(store)
    return ref
