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

import asyncio
import concurrent.futures
import functools
import hashlib
import inspect
import json
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, cast

from scheduler_dedup.handler.config.environment import idempotency_disabled
from scheduler_dedup.handler.config.secret_values import learn_secret_values
from scheduler_dedup.handler.config.settings import Settings
from scheduler_dedup.handler.core.errors import LeaseLostError, RunFailedError, RunInProgressError
from scheduler_dedup.handler.core.per_process import PerProcess
from scheduler_dedup.handler.core.record import RunRecord
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome, RunOutcome
from scheduler_dedup.handler.protocol.payload import fingerprint
from scheduler_dedup.handler.protocol.typed_results import from_stored, result_type, to_stored
from scheduler_dedup.handler.stores import open_store

P = ParamSpec("P")
R = TypeVar("R")

_built: dict[str | None, PerProcess[Idempotency]] = {}
_built_lock = threading.Lock()
_warned_disabled = threading.Event()
log = logging.getLogger("scheduler_dedup")


@dataclass(frozen=True)
class ReplayInfo:
    """What a ``response_hook`` learns about a replay.

    Attributes:
        replay: always True: the hook is called on replays only; the function did not run.
        run_id: the record id of the key (64 hex characters).
        key: the idempotency key.
        first_run_at: when the run whose result is replayed completed (the record's ``finished_at``, the store's
            clock, aware UTC); None when the record is gone (deleted by its TTL policy since).
        attempts: how many attempts claimed the key before it completed (1 unless one failed retryably or was taken
            over); None when the record is gone.
    """

    replay: bool
    run_id: str
    key: str
    first_run_at: datetime | None
    attempts: int | None


def replay_info(run_id: str, key: str, record: RunRecord | None) -> ReplayInfo:
    """The :class:`ReplayInfo` of a replay of ``record`` (None: the record is gone)."""
    data = record.data if record is not None else {}
    finished, attempts = data.get("finished_at"), data.get("attempts")
    return ReplayInfo(True, run_id, key, finished if isinstance(finished, datetime) else None,
                      int(attempts) if isinstance(attempts, (int, float)) and not isinstance(attempts, bool) else None)


def warn_disabled_once() -> None:
    """Log, once per process, that ``DEDUP_IDEMPOTENCY_DISABLED`` turned ``idempotent`` off."""
    if not _warned_disabled.is_set():
        _warned_disabled.set()
        log.warning("DEDUP_IDEMPOTENCY_DISABLED is set: idempotent functions run on every call and no run store is "
                    "opened (for unit tests only; the policy pack refuses it in a stack)")


def record_id_for_key(key: str, scope: str) -> str:
    """The record id (64 hex characters) of an idempotency key within a scope; see the module docstring."""
    canonical = json.dumps(["scheduler-dedup/v1", "idempotent", scope, key], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def refuse_generator_function(fn: Callable[..., Any]) -> None:
    """Refuse to decorate a generator function (``def`` or ``async def`` with ``yield``).

    Raises:
        TypeError: ``fn`` is one: its body runs only as its generator is consumed, after the call returned, so no
            record could say whether it ran.
    """
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"{fn.__qualname__} is a generator function: its body runs only as its generator is "
                        "consumed, after the key is recorded completed; decorate a function that returns the values "
                        "(e.g. a list) instead")


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


def idempotent(key: Callable[..., str], *, payload: Callable[..., Any] | None = None, serializer: type | None = None,
               response_hook: Callable[[Any, ReplayInfo], Any] | None = None, scope: str | None = None,
               idempotency: Idempotency | None = None,
               collection: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function (``def`` or ``async def``) so that it runs to completion at most once per idempotency key.

    Example::

        @idempotent(key=lambda order: order["id"], payload=lambda order: order)
        def charge(order): ...

    (To answer HTTP requests with the status codes the handler's proxy target expects, use
    :func:`scheduler_dedup.handler.service.idempotent_endpoint.idempotent_endpoint` instead.)

    Args:
        key: called with the function's arguments; returns the idempotency key (a non-empty string).
        payload: called with the function's arguments; returns what a later call under the same key must match
            (JSON values, dataclasses or Pydantic models). Its fingerprint is stored with the claim
            (:mod:`~scheduler_dedup.handler.protocol.payload`); a call whose payload differs raises
            :class:`PayloadMismatchError` and runs nothing. None: not checked.
        serializer: the result type (a dataclass or a Pydantic model class); default the function's return
            annotation when it is one (:mod:`~scheduler_dedup.handler.protocol.typed_results`).
        response_hook: called as ``response_hook(result, info)`` on a replay only (never when the function ran),
            with a :class:`ReplayInfo`; what it returns is what the caller gets, and what it raises the caller gets
            (the record stays completed). It may be an ``async def`` when the function is one (it is awaited). A replay this process answers from
            its own cache reads the record once for ``info`` (one store read, only when a hook is given).
        scope: the records' scope (see the module docstring); default ``module.qualified_name`` of the function.
        idempotency: the store and lease settings; by default built once, on first call, from
            the environment (``GOOGLE_CLOUD_PROJECT``, ``DEDUP_DATABASE``, ``DEDUP_LEASE_SECONDS``...).
        collection: collection of records when ``idempotency`` is not given (default
            ``DEDUP_COLLECTION``, else ``scheduler_runs``).

    Every call returns the result in its stored form (:mod:`scheduler_dedup.handler.core.stored_result`: JSON
    values, a tuple becomes a list, a datetime its ISO 8601 string), rebuilt as the result type when there is one,
    the first call included, so a caller sees the same thing whether the function ran or not; each call gets its
    own copy. A result that cannot be stored is returned as None (and logged). It raises
    :class:`PayloadMismatchError` for another payload under a used key, :class:`RunInProgressError` while
    another call holds the key, :class:`RunFailedError` after a :class:`NonRetryableJobError`,
    :class:`LeaseLostError` if another call took the key over from this one, :class:`StoreError` when
    the run store fails, and re-raises any other exception after releasing the key (so a retry runs again);
    that includes ``SystemExit`` and ``KeyboardInterrupt``, which this process raised itself and decides on.

    An ``async def`` function gets the same semantics: the store calls run on a worker thread
    (:func:`asyncio.to_thread`), the function itself on the caller's event loop. With
    ``DEDUP_IDEMPOTENCY_DISABLED=1`` (unit tests) the function runs on every call and returns its own result, and
    no store is opened.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        refuse_generator_function(fn)
        if inspect.iscoroutinefunction(response_hook) and not inspect.iscoroutinefunction(fn):
            raise TypeError(f"response_hook {response_hook!r} is an async def, so a replay of {fn.__qualname__} (a "
                            "plain def) would return its unawaited coroutine: make the hook a plain def")
        record_scope = scope if scope is not None else default_scope(fn)
        typed = result_type(fn, serializer)

        def plan(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str, dict[str, Any], str | None]:
            raw_key = key(*args, **kwargs)
            if not isinstance(raw_key, str) or not raw_key:
                raise ValueError(f"idempotency key for {fn.__qualname__} must be a non-empty string, got {raw_key!r}")
            given = fingerprint(payload(*args, **kwargs)) if payload is not None else None
            return raw_key, record_id_for_key(raw_key, record_scope), {
                "key": raw_key[:1500], "scope": record_scope[:1500], "function": fn.__qualname__}, given

        def answer(outcome: RunOutcome, raw_key: str, record: Callable[[], RunRecord | None]) -> Any:
            result = _result(outcome, raw_key)
            value = from_stored(typed, result) if typed is not None else result
            if response_hook is None or outcome.outcome is not Outcome.DUPLICATE:
                return value
            return response_hook(value, replay_info(outcome.run_id, raw_key, outcome.record or record()))

        if inspect.iscoroutinefunction(fn):
            async_fn = cast(Callable[..., Coroutine[Any, Any, Any]], fn)

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                if idempotency_disabled():
                    warn_disabled_once()
                    return await async_fn(*args, **kwargs)
                raw_key, record_id, fields, given = plan(args, kwargs)
                machinery = idempotency if idempotency is not None else \
                    await asyncio.to_thread(default_idempotency, collection)
                outcome = await execute_async(machinery, record_id, lambda: async_fn(*args, **kwargs), fields, given)
                record = None
                if response_hook is not None and outcome.outcome is Outcome.DUPLICATE and outcome.record is None:
                    record = await asyncio.to_thread(machinery.store.get, record_id)
                value = answer(outcome, raw_key, lambda: record)
                return await value if inspect.isawaitable(value) else value  # an async def response_hook

            return cast(Callable[P, R], async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if idempotency_disabled():
                warn_disabled_once()
                return fn(*args, **kwargs)
            raw_key, record_id, fields, given = plan(args, kwargs)
            machinery = idempotency if idempotency is not None else default_idempotency(collection)
            outcome = machinery.execute(record_id, lambda _attempt: to_stored(fn(*args, **kwargs)), fields,
                                        fingerprint=given)
            return cast(R, answer(outcome, raw_key, lambda: machinery.store.get(record_id)))

        return wrapper

    return decorate


async def execute_async(machinery: Idempotency, run_id: str, call: Callable[[], Coroutine[Any, Any, Any]],
                        fields: dict[str, Any], given: str | None) -> RunOutcome:
    """:meth:`Idempotency.execute` of a coroutine: the store calls on a worker thread, the coroutine ``call()`` in
    the caller's own task, so that cancelling the caller (``asyncio.wait_for`` timing out, ``task.cancel()``)
    cancels the function itself, as asyncio promises, and the claim is released before the ``CancelledError``
    propagates: a retry runs at once, and nothing of the cancelled call runs on detached.

    Raises:
        asyncio.CancelledError: the caller was cancelled (after the claim, if any, was released).
        StoreError, PayloadMismatchError: as :meth:`Idempotency.execute`.
    """
    loop = asyncio.get_running_loop()
    claimed: asyncio.Future[None] = loop.create_future()
    ended: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def mark_claimed() -> None:
        if not claimed.done():
            claimed.set_result(None)

    def work(_attempt: str) -> Any:  # on the worker thread, holding the claim: wait for the caller's task
        loop.call_soon_threadsafe(mark_claimed)
        while True:
            try:
                return ended.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                if loop.is_closed():  # the loop stopped without cancelling its caller: never hold the key forever
                    raise RuntimeError("the event loop closed while the function was running") from None

    execution = asyncio.ensure_future(asyncio.to_thread(machinery.execute, run_id, work, fields,
                                                        fingerprint=given))
    stopped: BaseException | None = None
    try:
        await asyncio.wait((claimed, execution), return_when=asyncio.FIRST_COMPLETED)
        if claimed.done():
            ended.set_result(to_stored(await call()))
    except BaseException as exc:  # the function's exception, or the caller's cancellation at any await
        stopped = exc
        ended.set_exception(exc)  # the claim, if taken, is released with it
        if isinstance(exc, GeneratorExit):
            raise  # the coroutine is being closed (its loop is gone): it may not await; the worker releases alone
    finally:
        claimed.cancel()
    outcome = await asyncio.shield(execution)
    if stopped is not None and outcome.exception is not stopped:
        raise stopped  # cancelled before the function ran: the outcome (a replay...) is no answer to a cancelled call
    return outcome


def _result(outcome: RunOutcome, raw_key: str) -> Any:
    """The stored result of a processed or replayed call; raises what any other outcome means (see ``idempotent``)."""
    if outcome.exception is not None and not isinstance(outcome.exception, Exception):
        raise outcome.exception  # SystemExit, KeyboardInterrupt...: the key is released; the caller decides
    if outcome.outcome in (Outcome.PROCESSED, Outcome.DUPLICATE):
        return outcome.result
    if outcome.outcome is Outcome.IN_PROGRESS:
        raise RunInProgressError(outcome.run_id, outcome.retry_after_seconds or 0.0)
    if outcome.outcome is Outcome.FAILED:
        raise RunFailedError(outcome.run_id, outcome.error or "")
    if outcome.outcome is Outcome.FENCED:
        raise LeaseLostError(f"call for key {raw_key!r} was taken over by another attempt")
    assert outcome.exception is not None
    raise outcome.exception
