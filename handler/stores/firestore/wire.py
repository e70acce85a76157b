"""Firestore's gRPC calls named by the dedup protocol step they belong to (see :mod:`.wire`).

==============  ==========================================================================
step            call
==============  ==========================================================================
``claim``       Commit with a create write (precondition ``exists: false``)
``takeover``    Commit updating an existing record to ``status: in_progress`` (a retry's claim of a
                released record too)
``renewal``     Commit updating a record without touching ``status`` (heartbeat, lease expiry)
``completion``  Commit setting ``status: completed``
``failure``     Commit setting ``status: failed``
``release``     Commit setting ``status: released``, or with a delete write
``read``        BatchGetDocuments / GetDocument
``query``       RunQuery / RunAggregationQuery
``other``       anything else (BeginTransaction, Rollback, ListDocuments, Listen...)
==============  ==========================================================================
"""

from __future__ import annotations

from typing import Any

from google.cloud.firestore_v1.types import firestore as fs_types

from scheduler_dedup.handler.stores.wire import STATUS_STEPS, Call, GrpcWire


def classify(method: str, request: bytes) -> Call:
    """Name the protocol step of one Firestore RPC from its method and serialised request.

    Args:
        method: the method name, e.g. ``"Commit"``.
        request: the request message as sent on the wire.

    Returns:
        A :class:`Call`; undecodable requests are step ``other``.
    """
    try:
        if method == "Commit":
            return _classify_commit(fs_types.CommitRequest.pb().FromString(request))
        if method == "BatchGetDocuments":
            pb = fs_types.BatchGetDocumentsRequest.pb().FromString(request)
            return Call(method, "read", _doc_id(pb.documents[0]) if pb.documents else "")
        if method == "GetDocument":
            return Call(method, "read", _doc_id(fs_types.GetDocumentRequest.pb().FromString(request).name))
        if method in ("RunQuery", "RunAggregationQuery"):
            return Call(method, "query", "")
    except Exception:  # noqa: BLE001 - a request we cannot decode is still forwarded
        pass
    return Call(method, "other", "")


def _doc_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _classify_commit(pb: Any) -> Call:
    for write in pb.writes:
        kind = write.WhichOneof("operation")
        if kind == "delete":
            return Call("Commit", "release", _doc_id(write.delete))
        if kind != "update":
            continue
        doc = _doc_id(write.update.name)
        if write.HasField("current_document") and write.current_document.WhichOneof("condition_type") == "exists" \
                and not write.current_document.exists:
            return Call("Commit", "claim", doc)
        status = write.update.fields.get("status")
        touched = set(write.update_mask.field_paths) if write.HasField("update_mask") else set(write.update.fields)
        value = status.string_value if status is not None and "status" in touched else None
        if value in STATUS_STEPS:
            return Call("Commit", STATUS_STEPS[value], doc)
        if value is None and write.HasField("current_document"):
            return Call("Commit", "renewal", doc)
        return Call("Commit", "other", doc)
    return Call("Commit", "other", "")


#: Firestore's service as the fault proxy forwards it (clients reach it through ``FIRESTORE_EMULATOR_HOST``).
FIRESTORE_WIRE = GrpcWire(
    name="Firestore",
    service="/google.firestore.v1.Firestore/",
    unary_stream=frozenset({"BatchGetDocuments", "RunQuery", "RunAggregationQuery", "ExecutePipeline"}),
    stream_stream=frozenset({"Write", "Listen"}),
    classify=classify,
)
