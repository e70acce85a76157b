"""scheduler_dedup.handler: exactly one execution per Cloud Scheduler run, on Firestore.

Public names:
- :class:`ScheduledRun`, what a job receives; :class:`NonRetryableJobError`, what it raises to
  record a permanent failure.
- :func:`idempotent`, the same guarantee for any function keyed by an idempotency key.
- :class:`Idempotency`, :class:`FirestoreRunStore`, :class:`Settings`: the machinery.
"""

from scheduler_dedup.handler.config import Settings
from scheduler_dedup.handler.decorator import idempotent, run_id_for_key
from scheduler_dedup.handler.errors import (
    ConfigError,
    DedupError,
    LeaseLostError,
    NonRetryableJobError,
    RequestHeaderError,
    RunFailedError,
    RunInProgressError,
)
from scheduler_dedup.handler.idempotency import Idempotency, Outcome, RunOutcome
from scheduler_dedup.handler.job import ScheduledRun
from scheduler_dedup.handler.run_key import RunKey
from scheduler_dedup.handler.store import FirestoreRunStore

__all__ = [
    "ConfigError", "DedupError", "FirestoreRunStore", "Idempotency", "LeaseLostError", "NonRetryableJobError",
    "Outcome", "RequestHeaderError", "RunFailedError", "RunInProgressError", "RunKey", "RunOutcome",
    "ScheduledRun", "Settings", "idempotent", "run_id_for_key",
]
