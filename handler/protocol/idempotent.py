"""``idempotent``: exactly-once execution for any Python function that receives an idempotency key.

**Record ids.** The record of a call is keyed on its *scope* and its key: the record id is the SHA-256 (64
hex characters) of the JSON array ``["scheduler-dedup/v1", "idempotent", scope, key]``. The scope defaults
to the function's module and qualified name (``billing.charge``), so two functions given the same key keep
two records; pass ``scope=`` to share records on purpose (or to keep them when the function is renamed).
A Scheduler run id hashes a string that starts with ``scheduler-dedup/v1`` and a separator, never with
``[``, so no record id of a key (not even of a key that *is* a run id, as the HTTP proxy target sends) can
equal a run id: a handler and the downstream service it calls can share one collection.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from scheduler_dedup.handler.config.secret_values import learn_secret_values
from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import LeaseLostError, RunFailedError, RunInProgressError
from scheduler_dedup.handler.core.per_process import PerProcess
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.stores import open_store

P = ParamSpec("P")
R = TypeVar("R")

_built: dict[str | None, PerProcess[Idempotency]] = {}
_built_lock = threading.Lock()


def record_id_for_key(key: str, scope: str) -> str:
    """The record id (64 hex characters) of an idempotency key within a scope; see the module docstring."""
    canonical = json.dumps(["scheduler-dedup/v1", "idempotent", scope, key], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def default_scope(fn: Callable[..., Any]) -> str:
    """The default scope of a function's keys: ``module.qualified_name``."""
    return f"{fn.__module__}.{fn.__qualname__}"


def default_idempotency(collection: str | None = None) -> Idempotency:
    """The machinery built from the environment (``GOOGLE_CLOUD_PROJECT``, ``DEDUP_STORE``, ``DEDUP_*``), one per
    collection and process: a process forked after a call (gunicorn ``--preload``, ``multiprocessing``) builds its
    own, since a store client does not survive a fork (:mod:`scheduler_dedup.handler.core.per_process`).

    Args:
        collection: collection of records; default ``DEDUP_COLLECTION``, else ``scheduler_runs``.

    Raises:
        ConfigError: a setting is invalid.
    """
    with _built_lock:
        if collection not in _built:
            def build() -> Idempotency:
                settings = Settings.from_env()
                learn_secret_values()  # this process's secret values never reach a record or a log
                return Idempotency(open_store(settings, collection), settings.lease_seconds,
                                   settings.retention_seconds)

            _built[collection] = PerProcess(build)
        made = _built[collection]
    return made.get()


def idempotent(key: Callable[..., str], *, scope: str | None = None, idempotency: Idempotency | None = None,
               collection: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so that it runs to completion at most once per idempotency key.

    Example::

        @idempotent(key=lambda order: order["id"])
        def charge(order): ...

    (To answer HTTP requests with the status codes the handler's proxy target expects, use
    :func:`scheduler_dedup.handler.service.idempotent_endpoint.idempotent_endpoint` instead.)

    Args:
        key: called with the function's arguments; returns the idempotency key (a non-empty string).
        scope: the records' scope (see the module docstring); default ``module.qualified_name`` of the function.
        idempotency: the store and lease settings; by default built once, on first call, from
            the environment (``GOOGLE_CLOUD_PROJECT``, ``DEDUP_DATABASE``, ``DEDUP_LEASE_SECONDS``...).
        collection: collection of records when ``idempotency`` is not given (default
            ``DEDUP_COLLECTION``, else ``scheduler_runs``).

    Every call returns the result in its stored form (:mod:`scheduler_dedup.handler.core.stored_result`: JSON
    values, a tuple becomes a list, a datetime its ISO 8601 string), the first call included, so a caller
    sees the same thing whether the function ran or not; each call gets its own copy. A result that
    cannot be stored is returned as None (and logged). It raises :class:`RunInProgressError` while
    another call holds the key, :class:`RunFailedError` after a :class:`NonRetryableJobError`,
    :class:`LeaseLostError` if another call took the key over from this one, :class:`StoreError` when
    the run store fails, and re-raises any other exception after releasing the key (so a retry runs again);
    that includes ``SystemExit`` and ``KeyboardInterrupt``, which this process raised itself and decides on.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        record_scope = scope if scope is not None else default_scope(fn)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            raw_key = key(*args, **kwargs)
            if not isinstance(raw_key, str) or not raw_key:
                raise ValueError(f"idempotency key for {fn.__qualname__} must be a non-empty string, got {raw_key!r}")
            machinery = idempotency if idempotency is not None else default_idempotency(collection)
            outcome = machinery.execute(record_id_for_key(raw_key, record_scope), lambda _attempt: fn(*args, **kwargs),
                                        {"key": raw_key[:1500], "scope": record_scope[:1500],
                                         "function": fn.__qualname__})
            if outcome.exception is not None and not isinstance(outcome.exception, Exception):
                raise outcome.exception  # SystemExit, KeyboardInterrupt...: the key is released; the caller decides
            if outcome.outcome in (Outcome.PROCESSED, Outcome.DUPLICATE):
                result: Any = outcome.result
                return result
            if outcome.outcome is Outcome.IN_PROGRESS:
                raise RunInProgressError(outcome.run_id, outcome.retry_after_seconds or 0.0)
            if outcome.outcome is Outcome.FAILED:
                raise RunFailedError(outcome.run_id, outcome.error or "")
            if outcome.outcome is Outcome.FENCED:
                raise LeaseLostError(f"call for key {raw_key!r} was taken over by another attempt")
            assert outcome.exception is not None
            raise outcome.exception

        return wrapper

    return decorate
