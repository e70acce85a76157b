"""scheduler_dedup.handler: exactly one execution per Cloud Scheduler run, on a run store (Firestore...).

Public names:
- :class:`ScheduledRun`, what a job receives; :class:`NonRetryableJobError`, what it raises to
  record a permanent failure.
- :func:`idempotent`, the same guarantee for any function keyed by an idempotency key (:class:`ReplayInfo`
  is what its ``response_hook`` learns; :class:`PayloadMismatchError` refuses another payload under a used key);
  :func:`idempotent_endpoint`, the same for a Flask/functions-framework endpoint the handler's HTTP
  proxy target calls, answering as the proxy expects.
- :class:`Idempotency`, :class:`RunStore` (the store contract), :func:`open_store`,
  :class:`FirestoreRunStore`, :class:`Settings`: the machinery.
- :class:`TargetSettings`, :func:`build_target`: proxy targets (Workflows, Cloud Run job, HTTP).
- :class:`CallerAuthSettings`, :class:`CallerVerifier` (a verification mode), :class:`OidcVerifier`:
  OIDC caller verification.

Names are imported on first use (PEP 562), so that light modules such as
``scheduler_dedup.handler.config.settings`` (which the Pulumi component uses to validate the handler's
settings at preview time) can be imported without loading a store's client library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "CallerAuthSettings": "callers.oidc_settings", "CallerVerifier": "callers.oidc", "OidcVerifier": "callers.oidc",
    "Settings": "config.settings",
    "idempotent": "protocol.idempotent", "record_id_for_key": "protocol.idempotent", "idempotent_endpoint": "service.idempotent_endpoint",
    "ConfigError": "core.errors", "DedupError": "core.errors", "LeaseLostError": "core.errors", "NonRetryableJobError": "core.errors",
    "RequestHeaderError": "core.errors", "PayloadMismatchError": "core.errors", "ReplayInfo": "protocol.idempotent",
    "RunFailedError": "core.errors", "RunInProgressError": "core.errors", "StoreError": "core.errors",
    "StoreCallError": "core.errors", "StoreUnavailableError": "core.errors", "StoreRefusedError": "core.errors",
    "StoreConfigError": "core.errors",
    "InvalidWriteError": "core.errors",
    "Idempotency": "protocol.idempotency", "Outcome": "protocol.idempotency", "RunOutcome": "protocol.idempotency",
    "ScheduledRun": "protocol.job",
    "RunKey": "schedule.run_key",
    "FirestoreRunStore": "stores.firestore.store", "RunStore": "stores.base", "open_store": "stores",
    "TargetRetryableError": "targets.call", "TargetSettings": "targets.settings", "build_target": "targets.build_target",
}
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from scheduler_dedup.handler.callers.oidc import CallerVerifier, OidcVerifier
    from scheduler_dedup.handler.callers.oidc_settings import CallerAuthSettings
    from scheduler_dedup.handler.config.settings import Settings
    from scheduler_dedup.handler.protocol.idempotent import ReplayInfo, idempotent, record_id_for_key
    from scheduler_dedup.handler.service.idempotent_endpoint import idempotent_endpoint
    from scheduler_dedup.handler.core.errors import (
        ConfigError,
        DedupError,
        InvalidWriteError,
        LeaseLostError,
        NonRetryableJobError,
        PayloadMismatchError,
        RequestHeaderError,
        RunFailedError,
        RunInProgressError,
        StoreCallError,
        StoreConfigError,
        StoreError,
        StoreRefusedError,
        StoreUnavailableError,
    )
    from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome, RunOutcome
    from scheduler_dedup.handler.protocol.job import ScheduledRun
    from scheduler_dedup.handler.schedule.run_key import RunKey
    from scheduler_dedup.handler.stores import open_store
    from scheduler_dedup.handler.stores.base import RunStore
    from scheduler_dedup.handler.stores.firestore.store import FirestoreRunStore
    from scheduler_dedup.handler.targets.build_target import build_target
    from scheduler_dedup.handler.targets.call import TargetRetryableError
    from scheduler_dedup.handler.targets.settings import TargetSettings


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
