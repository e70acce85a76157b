"""``idempotent_endpoint``: a functions-framework or Flask endpoint that runs once per ``Idempotency-Key``.

The handler's HTTP proxy target (``DEDUP_TARGET_TYPE=http``) POSTs each run with ``Idempotency-Key: <run
id>`` and retries on the answers its status table calls retryable. This adapter answers exactly so::

    import functions_framework
    from scheduler_dedup.handler import NonRetryableJobError, idempotent_endpoint

    @functions_framework.http
    @idempotent_endpoint()
    def export(request):
        if not source_ready():
            raise NonRetryableJobError("no source table")   # 422: the proxy records the run failed
        return {"rows": 42}                                  # stored, answered as "result"

Its answers, and what the proxy target does with each, are the rows of
:data:`scheduler_dedup.handler.core.statuses.ENDPOINT`: 200 ``processed``/``duplicate`` complete the run, 409 and 500
release it for Scheduler's next retry, 422 ``failed`` and 400 (no key) record it failed. A request whose body
differs from the first one under its key gets 422 ``payload_mismatch`` and runs nothing, as the IETF Idempotency-Key
draft says (https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/, section "Error
Scenarios": "If there is an attempt to reuse an idempotency key with a different request payload, the resource
server SHOULD reply with a HTTP 422 status code"); the body's fingerprint is
:func:`~scheduler_dedup.handler.protocol.payload.bytes_fingerprint`.

The function receives the Flask request and returns its result (stored and replayed in the JSON form of
:mod:`scheduler_dedup.handler.core.stored_result`). Records are kept in the same collection and format as the
handler's, keyed on the function's scope and the key (:func:`~scheduler_dedup.handler.protocol.idempotent.record_id_for_key`),
so the handler's run record and this endpoint's record of the same run id never collide.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import flask

from scheduler_dedup.handler.config.environment import idempotency_disabled
from scheduler_dedup.handler.core.stored_result import json_form
from scheduler_dedup.handler.service.answers import json_errors, json_response, outcome_answer, store_error_body
from scheduler_dedup.handler.protocol.idempotent import (default_idempotency, default_scope, record_id_for_key,
                                                         refuse_generator_function, warn_disabled_once)
from scheduler_dedup.handler.protocol.payload import bytes_fingerprint, fingerprint
from scheduler_dedup.handler.core.errors import PayloadMismatchError, StoreError
from scheduler_dedup.handler.protocol.idempotency import Idempotency, Outcome
from scheduler_dedup.handler.core.statuses import ENDPOINT, code

#: The header carrying the key (what the handler's HTTP proxy target sends).
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"

#: Status code per outcome, from :data:`~scheduler_dedup.handler.core.statuses.ENDPOINT`: 2xx completes the proxy's run,
#: 409 and 5xx are retried, 422 records it failed.
#: (No endpoint has an overlap policy, so ``skipped_overlap`` is no answer of it.)
STATUS_CODES: dict[Outcome, int] = {outcome: code(ENDPOINT, outcome.value) for outcome in Outcome
                                   if outcome is not Outcome.SKIPPED_OVERLAP}


def idempotent_endpoint(*, payload: Callable[[flask.Request], Any] | None = None, scope: str | None = None,
                        idempotency: Idempotency | None = None, collection: str | None = None,
                        header: str = IDEMPOTENCY_KEY_HEADER) -> Callable[[Callable[[flask.Request], Any]],
                                                                         Callable[[flask.Request], flask.Response]]:
    """Decorate a request handler so that it runs to completion at most once per key (see the module docstring).

    Args:
        payload: called with the request; returns what a later request under the same key must match (JSON values,
            :mod:`~scheduler_dedup.handler.protocol.payload`); default the request body (as JSON when it is JSON).
        scope: the records' scope; default the function's ``module.qualified_name``.
        idempotency: the store and lease settings; by default built on first request from the environment
            (``GOOGLE_CLOUD_PROJECT``, ``DEDUP_DATABASE``, ``DEDUP_COLLECTION``, ``DEDUP_LEASE_SECONDS``...).
        collection: collection of records when ``idempotency`` is not given.
        header: the request header holding the key.

    Returns:
        A decorator turning ``fn(request) -> result`` into a view that answers JSON.
    """

    def decorate(fn: Callable[[flask.Request], Any]) -> Callable[[flask.Request], flask.Response]:
        refuse_generator_function(fn)
        record_scope = scope if scope is not None else default_scope(fn)

        @functools.wraps(fn)
        @json_errors
        def view(request: flask.Request) -> flask.Response:
            key = (request.headers.get(header) or "").strip()
            if not key:
                return json_response({"status": "bad_request", "header": header,
                                      "error": f"{header} is missing: send the key to deduplicate on (the dedup "
                                               "handler's HTTP target sends the run id)"}, code(ENDPOINT, "bad_request"))
            if idempotency_disabled():  # unit tests: run every time, answer as the first run
                warn_disabled_once()
                stored = json_form(fn(request))
                return json_response({"status": "processed", "result": stored.value, "key": key,
                                      **({"result_dropped": stored.dropped} if stored.dropped else {})},
                                     code(ENDPOINT, "processed"))
            given = fingerprint(payload(request)) if payload is not None else bytes_fingerprint(request.get_data())
            machinery = idempotency if idempotency is not None else default_idempotency(collection)
            try:
                outcome = machinery.execute(record_id_for_key(key, record_scope), lambda _attempt: fn(request),
                                            {"key": key[:1500], "scope": record_scope[:1500],
                                             "function": fn.__qualname__}, fingerprint=given)
            except PayloadMismatchError as exc:
                return json_response({"status": "payload_mismatch", "key": key, "error": str(exc)},
                                     code(ENDPOINT, "payload_mismatch"))
            except StoreError as exc:
                return json_response({**store_error_body(exc, machinery.lease_seconds), "key": key},
                                     code(ENDPOINT, "store_error"))
            body, headers = outcome_answer(outcome)
            return json_response({**body, "key": key}, STATUS_CODES[outcome.outcome], headers)

        return view

    return decorate
