"""How a store's calls look on the wire, for the fault proxy (:mod:`scheduler_dedup.local.faults.grpc_proxy`).

Each store's ``*_wire`` module names the protocol step of every call its client sends, from the call's
method and serialised request alone, so that faults can be injected into one step of the dedup protocol
(fail a claim before it is sent, apply a completion and lose its answer...). Nothing here is used by the
handler itself.

==============  ==========================================================================
step            what the call does
==============  ==========================================================================
``claim``       a put-if-absent of a run record
``takeover``    a conditional write setting ``status: in_progress``
``renewal``     a conditional write that leaves ``status`` alone (heartbeat, lease expiry)
``completion``  a conditional write setting ``status: completed`` (or ``running_downstream``,
                ``skipped_overlap``, ``cancelled``)
``failure``     a conditional write setting ``status: failed``
``release``     a conditional write setting ``status: released`` (a retryable failure), or a
                conditional delete (an overlap lease's release, ``runs rerun``'s reset)
``read``        a read of records by id
``query``       a run history query
``other``       anything else (sessions, transactions begun or rolled back, listeners...)
==============  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler_dedup.handler.core.record import (CANCELLED, COMPLETED, FAILED, IN_PROGRESS, RELEASED,
                                                 RUNNING_DOWNSTREAM, SKIPPED_OVERLAP)

STEPS = ("claim", "takeover", "renewal", "completion", "failure", "release", "read", "query", "other")
#: The steps that are store calls of the dedup protocol (what a campaign injects faults into).
PROTOCOL_STEPS = ("claim", "read", "takeover", "renewal", "completion", "failure", "release")
#: The step of a write that sets the record's status to this value (a write that sets none is a renewal).
STATUS_STEPS = {IN_PROGRESS: "takeover", COMPLETED: "completion", FAILED: "failure", SKIPPED_OVERLAP: "completion",
                RUNNING_DOWNSTREAM: "completion", CANCELLED: "completion", RELEASED: "release"}


@dataclass(frozen=True)
class Call:
    """One intercepted call: its method (``"Commit"``), protocol step (:data:`STEPS`) and record id ('' if none)."""

    method: str
    step: str
    document: str


@dataclass(frozen=True)
class GrpcWire:
    """A store's gRPC service as the fault proxy forwards it.

    Attributes:
        name: the store's name in messages, e.g. ``Firestore``.
        service: the service path prefix, e.g. ``/google.firestore.v1.Firestore/``.
        unary_stream: methods that answer with a stream.
        stream_stream: methods that stream both ways (forwarded without faults).
        classify: ``(method, request bytes) -> Call``; a request it cannot decode is step ``other``.
    """

    name: str
    service: str
    unary_stream: frozenset[str]
    stream_stream: frozenset[str]
    classify: Callable[[str, bytes], Call]
