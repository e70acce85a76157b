"""The job's run store: a shared one (``store=``, of any kind), or one of its own (``store_kind``: Firestore or
Spanner)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION
from scheduler_dedup.infra.errors import DedupConfigError, bool_input
from scheduler_dedup.infra.job.inputs import read_str
from scheduler_dedup.infra.stores.base import StoreRef
from scheduler_dedup.infra.stores.firestore import check_firestore_ids
from scheduler_dedup.infra.stores.spanner import SpannerStoreSettings, check_spanner_ids, resolve_spanner_settings
from scheduler_dedup.infra.stores.store import resolve_store_ref, store_kind


@dataclass(frozen=True)
class JobStore:
    store: StoreRef | None
    kind: str
    collection: str
    create_database: bool
    database_id: pulumi.Input[str]
    database_location: str
    spanner_instance: pulumi.Input[str] | None = None
    spanner: SpannerStoreSettings | None = None


def resolve_job_store(args: Mapping[str, Any], prefix: str, project: str | None, region: str | None) -> JobStore:
    """The run store: a shared one (``store=``, of any kind), or one of the job's own (``store_kind``: Firestore or
    Spanner).

    Raises:
        DedupConfigError: the first problem of the store inputs (they depend on one another).
    """
    kind = store_kind(args, "store_kind")
    spanner_instance = read_str(args, "spanner_instance")
    if args.get("store") is not None:
        return _shared_store(args, resolve_store_ref(args["store"]), kind, spanner_instance, project, region)
    if kind == "memorystore":
        raise DedupConfigError("store_kind", "a job has no Memorystore instance of its own: create a "
                                             "DedupStore(kind='memorystore') and pass it (or its stack's outputs) as "
                                             "store")
    if spanner_instance is not None and kind != "spanner":
        raise DedupConfigError("spanner_instance", "applies to a Spanner store only: set store_kind to 'spanner', or "
                                                   "remove it")
    collection = read_str(args, "collection") or DEFAULT_COLLECTION  # checked by check_handler_settings
    if kind == "spanner":
        return _own_spanner_store(args, prefix, project, region, collection, spanner_instance)
    create_database = bool_input(args, "create_database", True)
    default_db = f"{prefix[:55].rstrip('-')}-dedup" if create_database else "(default)"
    database_id = read_str(args, "database_id") or default_db  # checked by check_handler_settings
    return JobStore(None, kind, collection, create_database, database_id,
                  read_str(args, "database_location") or region or "")


def _shared_store(args: Mapping[str, Any], store: StoreRef, kind: str, spanner_instance: str | None,
                  project: str | None, region: str | None) -> JobStore:
    """A store of another component or stack (``store=``): its kind, database and one of its collections."""
    if args.get("store_kind") is not None and kind != store.kind:
        raise DedupConfigError("store_kind", f"is {kind!r}, but the store is a {store.kind} store: remove store_kind "
                                             "(the store decides) or pass a store of that kind")
    if spanner_instance is not None:
        raise DedupConfigError("spanner_instance", "the instance is the store's when store= is given: remove it")
    for key in ("database_id", "create_database", "database_location"):
        if args.get(key) is not None:
            raise DedupConfigError(key, "the database is the store's when store= is given: remove "
                                        f"{key} (or remove store to give the job a database of its own)")
    if isinstance(store.project, str) and project is not None and store.project != project:
        raise DedupConfigError("store.project", f"the store is in project {store.project!r}, the job in "
                                                f"{project!r}: deploy the job in the store's project")
    shared = store.collections if isinstance(store.collections, (list, tuple)) else None
    default_collection = shared[0] if shared and len(shared) == 1 else DEFAULT_COLLECTION
    collection = read_str(args, "collection") or default_collection
    if shared is not None and collection not in shared:
        raise DedupConfigError("collection", f"{collection!r} is not a collection of the store ({', '.join(shared)}): "
                                             "use one of them, or add it to the store's collections")
    if store.kind == "spanner":
        check_spanner_ids(store.instance_id, store.database_id, collection)
    elif store.kind == "firestore" and project is not None:
        check_firestore_ids(project, store.database_id, collection)
    return JobStore(store, store.kind, collection, False, store.database_id, region or "",
                  spanner_instance=store.instance_id)


def _own_spanner_store(args: Mapping[str, Any], prefix: str, project: str | None, region: str | None,
                       collection: str, instance: str | None) -> JobStore:
    """A Spanner database of the job's own (:mod:`scheduler_dedup.infra.stores.spanner`), in ``spanner_instance`` or an instance of its own.

    Its table, database and instance ids are the handler's (``DEDUP_COLLECTION``, ``DEDUP_SPANNER_DATABASE``,
    ``DEDUP_SPANNER_INSTANCE``), checked again by :func:`check_handler_settings`.
    """
    for key in ("create_database", "database_location"):
        if args.get(key) is not None:
            raise DedupConfigError(key, "a job's own Spanner store always creates its database (its DDL holds "
                                        f"the table), in spanner_instance or an instance of its own: remove {key}")
    database_id = read_str(args, "database_id")
    if region is None and instance is None:  # the instance's region is unknown: reported as the region's problem
        return JobStore(None, "spanner", collection, True, database_id or "", "", spanner_instance="")
    spanner = resolve_spanner_settings(
        {"instance_id": instance, "create_instance": instance is None, "database_id": database_id,
         "deletion_protection": args.get("deletion_protection", False),
         "protect_database": args.get("protect_database", True)},
        project=project or "", region=region, default_instance=f"{prefix[:55].rstrip('-')}-dedup",
        default_database=f"{prefix[:24].rstrip('-')}-dedup", tables=[collection])
    return JobStore(None, "spanner", collection, True, spanner.database_id, spanner.instance_config,
                  spanner_instance=spanner.instance_id, spanner=spanner)
