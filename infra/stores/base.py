"""What ``DedupStore`` (:mod:`.store`) and each store's component piece (:mod:`.firestore`, :mod:`.spanner`,
:mod:`.memorystore`) share: a job's view of a store (:class:`StoreRef`), the one TTL owner per program, and why a
store's database is protected.

Each piece is the module its store's registration names (``component``,
:data:`scheduler_dedup.handler.stores.registry.STORES`), loaded when a store of its kind is built or read, and
provides:

* ``KEYS``: its ``DedupStore`` inputs (of :class:`~scheduler_dedup.infra.args.DedupStoreArgs`);
* ``REF_KEYS``: the keys of a job's ``store`` input for it (its outputs, of
  :class:`~scheduler_dedup.infra.args.DedupStoreRefArgs`);
* ``APIS``: the Google APIs of the store itself, which take Firestore's place in a job's list
  (:func:`scheduler_dedup.infra.project.apis.for_store`);
* ``build(store, name, args, opts, source)``: validate ``args`` and create the store's children under ``store``;
* ``outputs(store)``: the store as plain values (``DedupStore.ref``);
* ``ref_of(store)`` and ``ref_from(outputs)``: the :class:`StoreRef` of a store in this program, or of its outputs.

Imports the handler, ``infra.args``, ``infra.errors`` and ``infra.project``.
"""

# No `from __future__ import annotations`: Pulumi's component analyzer reads the real annotation types.
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi

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
