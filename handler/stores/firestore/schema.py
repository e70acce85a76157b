"""What a Firestore collection of run records needs besides its documents: the composite indexes of the run
history query (the TTL policy's field is :data:`~scheduler_dedup.handler.core.record.TTL_FIELD`). The component creates exactly these; the store queries only
what they serve. Imports nothing from the Firestore client, so the component and the policy pack can use it.
"""

from __future__ import annotations

from scheduler_dedup.handler.core.record import SETTLED_AT_FIELD, TTL_FIELD

#: Composite indexes that run history queries need on the run records' collection, each a tuple of
#: ``(field, "ASCENDING" | "DESCENDING")``. One job's runs, newest first (equality on ``job_name``,
#: range and order on ``schedule_time``) needs ``job_name`` ascending + ``schedule_time`` descending:
#: https://cloud.google.com/firestore/docs/query-data/index-overview#composite_indexes .
RUN_HISTORY_INDEXES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("job_name", "ASCENDING"), ("schedule_time", "DESCENDING")),
)

#: Fields of a run record (and of an overlap lease record) exempt from single-field indexing: each holds a timestamp,
#: a value that only grows from write to write, and no query reads it alone (``schedule_time`` only in the composite
#: index above, which exempting its single-field index leaves in place). An index on a value that only grows puts every
#: write at the end of one key range, which caps the collection's writes ("monotonically increasing indexed fields",
#: https://cloud.google.com/firestore/docs/best-practices; about 500 writes/s, googleapis/google-cloud-dotnet#1618).
#: The component sets an empty ``index_config`` on each (the TTL field, ``expire_at``, with its TTL policy);
#: tests/stores/test_firestore_index_exemptions.py reads the fields from real writes and fails on a new one.
UNINDEXED_FIELDS: tuple[str, ...] = (TTL_FIELD, "claimed_at", "heartbeat_at", "lease_expires", "claim_deadline",
                                     "finished_at", "schedule_time", "schedule_since", SETTLED_AT_FIELD)
