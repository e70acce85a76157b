"""``idempotent``: exactly-once execution for any Python function that receives an idempotency key."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from scheduler_dedup.handler.config import Settings
from scheduler_dedup.handler.errors import LeaseLostError, RunFailedError, RunInProgressError
from scheduler_dedup.handler.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.store import FirestoreRunStore

P = ParamSpec("P")
R = TypeVar("R")


def run_id_for_key(key: str) -> str:
    """The run id (64 hex characters) of a caller-given idempotency key.

    A key that already is a run id (64 hex characters, e.g. the token the Scheduler handler
    passes downstream) is used as it is, so both sides share one record format and id space.
    """
    if len(key) == 64 and all(c in "0123456789abcdef" for c in key):
        return key
    return hashlib.sha256(f"scheduler-dedup/v1\x1fkey\x1f{key}".encode()).hexdigest()


def idempotent(key: Callable[..., str], *, idempotency: Idempotency | None = None,
               collection: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so that it runs to completion at most once per idempotency key.

    Example::

        @idempotent(key=lambda request: request.headers["Idempotency-Key"])
        def start_export(request): ...

    Args:
        key: called with the function's arguments; returns the idempotency key (a string).
        idempotency: the store and lease settings; by default built once, on first call, from
            the environment (``GOOGLE_CLOUD_PROJECT``, ``DEDUP_DATABASE``, ``DEDUP_LEASE_SECONDS``...).
        collection: collection of records when ``idempotency`` is not given (default
            ``DEDUP_COLLECTION``, else ``scheduler_runs``).

    The wrapped function returns the function's result on the first call, and the stored
    result (JSON round-tripped) on later calls with the same key. It raises
    :class:`RunInProgressError` while another call holds the key, :class:`RunFailedError` after
    a :class:`NonRetryableJobError`, :class:`LeaseLostError` if this call was fenced, and
    re-raises any other exception after releasing the key (so a retry runs again).
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        built: list[Idempotency] = []

        def machinery() -> Idempotency:
            if idempotency is not None:
                return idempotency
            if not built:
                settings = Settings.from_env()
                store = FirestoreRunStore.connect(settings.project, settings.database,
                                                  collection or settings.collection, settings.firestore_timeout_seconds)
                built.append(Idempotency(store, settings.lease_seconds, settings.retention_seconds))
            return built[0]

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            raw_key = key(*args, **kwargs)
            if not isinstance(raw_key, str) or not raw_key:
                raise ValueError(f"idempotency key for {fn.__qualname__} must be a non-empty string, got {raw_key!r}")
            outcome = machinery().execute(run_id_for_key(raw_key), lambda _attempt: fn(*args, **kwargs),
                                          {"key": raw_key[:1500], "function": fn.__qualname__})
            if outcome.outcome in (Outcome.PROCESSED, Outcome.DUPLICATE):
                result: Any = outcome.result
                return result
            if outcome.outcome is Outcome.IN_PROGRESS:
                raise RunInProgressError(outcome.run_id, outcome.retry_after_seconds or 0.0)
            if outcome.outcome is Outcome.FAILED:
                raise RunFailedError(outcome.run_id, outcome.error or "")
            if outcome.outcome is Outcome.FENCED:
                raise LeaseLostError(f"call for key {raw_key!r} lost its lease to a newer attempt")
            assert outcome.exception is not None
            raise outcome.exception

        return wrapper

    return decorate
