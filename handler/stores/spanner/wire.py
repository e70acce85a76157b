"""Spanner's gRPC calls named by the dedup protocol step they belong to (see :mod:`.wire`), for the fault proxy.

Every write of the Spanner store ends in a Commit whose mutations say what it does, so the Commit carries the step
(a fault on it fails the write before it is sent, or applies it and loses the answer, or holds it past the store
timeout); the read that begins a fenced write's transaction is ``other``, as are session and transaction calls.

==============  ==========================================================================
step            call
==============  ==========================================================================
``claim``       Commit with an insert mutation
``takeover``    Commit with an update mutation setting ``status`` to ``in_progress``
``renewal``     Commit with an update mutation that leaves ``status`` alone
``completion``  Commit with an update mutation setting ``status`` to ``completed``
``failure``     Commit with an update mutation setting ``status`` to ``failed``
``release``     Commit with an update mutation setting ``status`` to ``released``, or a delete
                mutation
``read``        a read-only StreamingRead / Read of rows by key
``query``       a read-only ExecuteStreamingSql / ExecuteSql, or a key range read
``other``       anything else (CreateSession, BeginTransaction, Rollback, the read that begins a
                fenced write's read-write transaction, a Commit without mutations...)
==============  ==========================================================================
"""

from __future__ import annotations

from typing import Any

from google.cloud.spanner_v1 import types as sp

from scheduler_dedup.handler.stores.spanner.schema import KEY_COLUMN
from scheduler_dedup.handler.stores.wire import STATUS_STEPS, Call, GrpcWire



def classify(method: str, request: bytes) -> Call:
    """Name the protocol step of one Spanner RPC from its method and serialised request.

    Args:
        method: the method name, e.g. ``"Commit"``.
        request: the request message as sent on the wire.

    Returns:
        A :class:`Call`; undecodable requests are step ``other``.
    """
    try:
        if method == "Commit":
            return _classify_commit(sp.CommitRequest.pb().FromString(request))
        if method in ("StreamingRead", "Read"):
            pb = sp.ReadRequest.pb().FromString(request)
            key = pb.key_set.keys[0].values[0].string_value if pb.key_set.keys else ""
            if pb.transaction.WhichOneof("selector") == "begin" or pb.transaction.HasField("id"):
                return Call(method, "other", key)  # the read of a fenced write's transaction
            return Call(method, "read" if pb.key_set.keys else "query", key)
        if method in ("ExecuteStreamingSql", "ExecuteSql"):
            return Call(method, "query", "")
    except Exception:  # noqa: BLE001 - a request we cannot decode is still forwarded
        pass
    return Call(method, "other", "")


def _classify_commit(pb: Any) -> Call:
    for mutation in pb.mutations:
        kind = mutation.WhichOneof("operation")
        if kind == "delete":
            keys = mutation.delete.key_set.keys
            return Call("Commit", "release", keys[0].values[0].string_value if keys else "")
        if kind not in ("insert", "update"):
            continue
        write = getattr(mutation, kind)
        row = dict(zip(write.columns, write.values[0].values)) if write.values else {}
        key = row[KEY_COLUMN].string_value if KEY_COLUMN in row else ""
        if kind == "insert":
            return Call("Commit", "claim", key)
        status = row.get("status")
        if status is None:
            return Call("Commit", "renewal", key)
        return Call("Commit", STATUS_STEPS.get(status.string_value, "other"), key)
    return Call("Commit", "other", "")


#: Spanner's data service as the fault proxy forwards it (clients reach it through ``SPANNER_EMULATOR_HOST``; the
#: admin services are not forwarded: local set-up talks to the emulator directly).
SPANNER_WIRE = GrpcWire(
    name="Spanner",
    service="/google.spanner.v1.Spanner/",
    unary_stream=frozenset({"ExecuteStreamingSql", "StreamingRead", "BatchWrite"}),
    stream_stream=frozenset(),
    classify=classify,
)
