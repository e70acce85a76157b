"""The job's run store: a shared one (``store=``, of any kind), or one of its own (``store_kind``), each store's part
decided by its component piece (:func:`~scheduler_dedup.infra.stores.store.piece`), so no store is named here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION
from scheduler_dedup.infra.errors import DedupConfigError, read_str
from scheduler_dedup.infra.stores.base import JobStore, StoreRef
from scheduler_dedup.infra.stores.store import STORE_KINDS, piece, resolve_store_ref, store_kind


def resolve_job_store(args: Mapping[str, Any], prefix: str, project: str | None, region: str | None) -> JobStore:
    """The run store: a shared one (``store=``, of any kind), or one of the job's own (``store_kind``, a kind whose
    piece lets a job own one).

    Raises:
        DedupConfigError: the first problem of the store inputs (they depend on one another).
    """
    kind = store_kind(args, "store_kind")
    pieces = {k: piece(k) for k in STORE_KINDS}
    keys = {key: read_str(args, key) for p in pieces.values() for key in p.JOB_KEYS}
    given = {key: value for key, value in keys.items() if value is not None}
    if args.get("store") is not None:
        return _shared_store(args, resolve_store_ref(args["store"]), kind, given, project, region)
    own = pieces[kind]
    if own.OWN_REFUSAL is not None:
        raise DedupConfigError("store_kind", own.OWN_REFUSAL)
    for other in pieces.values():
        for key, job_key in other.JOB_KEYS.items():
            if key in given and other is not own:
                raise DedupConfigError(key, job_key.other_kind)
    collection = read_str(args, "collection") or DEFAULT_COLLECTION  # checked by check_handler_settings
    store: JobStore = own.resolve_own(args, prefix=prefix, project=project, region=region, collection=collection,
                                      keys=given)
    return store


def _shared_store(args: Mapping[str, Any], store: StoreRef, kind: str, given: Mapping[str, str],
                  project: str | None, region: str | None) -> JobStore:
    """A store of another component or stack (``store=``): its kind, database and one of its collections."""
    if args.get("store_kind") is not None and kind != store.kind:
        raise DedupConfigError("store_kind", f"is {kind!r}, but the store is a {store.kind} store: remove store_kind "
                                             "(the store decides) or pass a store of that kind")
    for kind_id in STORE_KINDS:
        for key, job_key in piece(kind_id).JOB_KEYS.items():
            if key in given:
                raise DedupConfigError(key, job_key.with_store)
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
    piece(store.kind).check_job_ids(project, store.instance_id, store.database_id, collection)
    return JobStore(store, store.kind, collection, False, store.database_id, region or "",
                    instance_id=store.instance_id)
