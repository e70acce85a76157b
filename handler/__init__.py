"""scheduler_dedup.handler: exactly one execution per Cloud Scheduler run, on Firestore.

Public names:
- :class:`ScheduledRun`, what a job receives; :class:`NonRetryableJobError`, what it raises to
  record a permanent failure.
- :func:`idempotent`, the same guarantee for any function keyed by an idempotency key.
- :class:`Idempotency`, :class:`FirestoreRunStore`, :class:`Settings`: the machinery.
- :class:`TargetSettings`, :func:`build_target`: proxy targets (Workflows, Cloud Run job, HTTP).
- :class:`CallerAuthSettings`, :class:`CallerVerifier`: OIDC caller verification.
"""

from scheduler_dedup.handler.caller_auth import CallerAuthSettings, CallerVerifier
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
from scheduler_dedup.handler.targets import TargetRetryableError, TargetSettings, build_target

__all__ = [
    "CallerAuthSettings", "CallerVerifier", "TargetRetryableError", "TargetSettings", "build_target",
    "ConfigError", "DedupError", "FirestoreRunStore", "Idempotency", "LeaseLostError", "NonRetryableJobError",
    "Outcome", "RequestHeaderError", "RunFailedError", "RunInProgressError", "RunKey", "RunOutcome",
    "ScheduledRun", "Settings", "idempotent", "run_id_for_key",
]
