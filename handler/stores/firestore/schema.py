"""What a Firestore collection of run records needs besides its documents: the composite indexes of the run
history query (the TTL policy's field is :data:`~scheduler_dedup.handler.core.record.TTL_FIELD`). The component creates exactly these; the store queries only
what they serve. Imports nothing from the Firestore client, so the component and the policy pack can use it.
"""

from __future__ import annotations

#: Composite indexes that run history queries need on the run records' collection, each a tuple of
#: ``(field, "ASCENDING" | "DESCENDING")``. One job's runs, newest first (equality on ``job_name``,
#: range and order on ``schedule_time``) needs ``job_name`` ascending + ``schedule_time`` descending:
#: https://cloud.google.com/firestore/docs/query-data/index-overview#composite_indexes .
RUN_HISTORY_INDEXES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("job_name", "ASCENDING"), ("schedule_time", "DESCENDING")),
)
