"""The JSON contract: how an outcome becomes an answer, for the Scheduler handler and the downstream adapter.

Every answer is a JSON object with a ``status`` (``processed``, ``duplicate``, ``failed``, ``in_progress``,
``fenced``, ``released``, ``store_error``, ``store_misconfigured``, ``bad_request``, ``internal_error``...) and, once the run is
known, its ``run_id``. Bodies are encoded strictly (``allow_nan=False``, ASCII with ``\\u`` escapes): results
are stored in a JSON form (:mod:`scheduler_dedup.handler.core.stored_result`) that holds UTF-8 strings only and
error text is made UTF-8 encodable (:mod:`scheduler_dedup.handler.core.safe_text`), so no body carries ``NaN`` or a
lone surrogate. An unexpected exception answers
500 ``internal_error`` in JSON (:func:`json_errors`), never functions-framework's HTML error page.
Only the status codes differ between the two adapters; each keeps its own table.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import flask

from scheduler_dedup.handler.core.errors import StoreConfigError, StoreError, store_failure
from scheduler_dedup.handler.protocol.idempotency import Outcome, RunOutcome
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.safe_text import exception_text
from scheduler_dedup.handler.core.statuses import DELIVERY, code

log = logging.getLogger("scheduler_dedup")

_FENCED = "another attempt took this run over from this one; this attempt's outcome was not recorded"
_STEPS_AFTER_RUN = {
    "complete": ("recording its completion", "200 duplicate"),
    "record_failure": ("recording its permanent failure", "200 failed"),
    "release": ("recording its retryable failure (releasing the run)", "a fresh run at once"),
}
#: Steps that fail before the job ran, though this delivery's claim is written: what failed, and what the next
#: delivery gets if the write reached the store after all.
_STEPS_HOLDING_THE_CLAIM = {
    "record_skip": ("its overlap policy kept it from running (another run of the job executes), but {store} failed "
                    "({cause}) recording it skipped_overlap", "200 skipped_overlap"),
}


def outcome_answer(outcome: RunOutcome) -> tuple[dict[str, Any], dict[str, str]]:
    """The JSON body and extra headers (``Retry-After``) of an outcome; the caller picks the status code."""
    body: dict[str, Any] = {"status": outcome.outcome.value, "run_id": outcome.run_id}
    headers: dict[str, str] = {}
    if outcome.outcome in (Outcome.PROCESSED, Outcome.DUPLICATE):
        body["result"] = outcome.result
    if outcome.result_dropped:
        body["result_dropped"] = outcome.result_dropped
    if outcome.downstream is not None:
        body["running_downstream"] = outcome.downstream
    if outcome.error is not None:
        body["error"] = outcome.error
    if outcome.output and outcome.outcome in (Outcome.FAILED, Outcome.RELEASED, Outcome.FENCED):
        body["output"] = outcome.output  # the job's last words beside its error: the first thing to read
    if outcome.outcome is Outcome.RELEASED:
        body["released"] = True
    if outcome.retry_after_seconds is not None:
        body["retry_after_seconds"] = round(outcome.retry_after_seconds, 3)
        headers["Retry-After"] = str(max(1, int(outcome.retry_after_seconds + 0.999)))
    if outcome.outcome is Outcome.FENCED:
        body["error"] = _FENCED
    return body, headers


def store_error_body(exc: StoreError, lease_seconds: float) -> dict[str, Any]:
    """The 500 ``store_error`` body: what happened to the run and what the next delivery will do."""
    store, cause = store_failure(exc)
    if not exc.executed and exc.step in _STEPS_HOLDING_THE_CLAIM:
        error = _claim_held(exc, store, cause, lease_seconds)
    elif not exc.executed:
        error = (f"{store} failed ({cause}) before the job ran: the job did not run and this delivery holds no "
                 f"claim; retry later. A claim of this delivery that reaches {store} after this answer holds "
                 f"nothing: the next delivery runs the job at once. Only if it reached {store} in time and could "
                 f"not be read back do deliveries get 409 in_progress until its lease expires ({lease_seconds:g} s)")
    else:
        what, landed = _STEPS_AFTER_RUN.get(exc.step, (exc.step, "its recorded outcome"))
        error = (f"the job ran (attempt {exc.attempt_id}), but {store} failed ({cause}) {what}. The claim stays "
                 f"in_progress until its lease expires ({lease_seconds:g} s after the last renewal): deliveries "
                 f"before then get 409 in_progress, and the first one after it takes the run over and runs the "
                 f"job again (keep its side effects idempotent on run_id); if the write reached {store} after "
                 f"all, the next delivery gets {landed} instead")
    body: dict[str, Any] = {"status": "store_error", "run_id": exc.run_id, "executed": exc.executed,
                            "step": exc.step, "error": error}
    if exc.job_error is not None:  # the job's own failure, which the store could not record: still the first to read
        body["job_error"] = exc.job_error
        if exc.output:
            body["output"] = exc.output
    return body


def _claim_held(exc: StoreError, store: str, cause: str, lease_seconds: float) -> str:
    """The error of a step that failed before the job ran while this delivery's claim is in place
    (:data:`_STEPS_HOLDING_THE_CLAIM`)."""
    what, landed = _STEPS_HOLDING_THE_CLAIM[exc.step]
    return (f"the job did not run: {what.format(store=store, cause=cause)}. This delivery's claim (attempt "
            f"{exc.attempt_id}) stays in_progress until its lease expires ({lease_seconds:g} s): deliveries before "
            f"then get 409 in_progress, and the first one after it takes the run over and applies the overlap "
            f"policy again (it runs the job if no other run executes then); if the write reached {store} after "
            f"all, the next delivery gets {landed} instead")


def store_misconfigured_body(exc: StoreError, config: StoreConfigError, lease_seconds: float) -> dict[str, Any]:
    """The 500 ``store_misconfigured`` body: the store refuses every call as it is set up; ``fix`` says what to
    change. Otherwise the fields of :func:`store_error_body` (``executed``, ``step``), with the same meaning."""
    store, cause = store_failure(exc)
    if exc.executed or exc.step in _STEPS_HOLDING_THE_CLAIM:
        error = store_error_body(exc, lease_seconds)["error"]
    else:
        error = (f"{store} refuses every call as it is set up ({cause}): the job did not run and nothing was "
                 "written. Scheduler's retries get this answer until the setting that `fix` names is changed; the "
                 "first delivery after that runs the job")
    body: dict[str, Any] = {"status": "store_misconfigured", "run_id": exc.run_id, "executed": exc.executed,
                            "step": exc.step, "error": error, "fix": config.fix}
    if exc.job_error is not None:
        body["job_error"] = exc.job_error
        if exc.output:
            body["output"] = exc.output
    return body


def internal_error_body(exc: BaseException) -> dict[str, Any]:
    """The 500 ``internal_error`` body for an exception nothing else answered."""
    return {"status": "internal_error", "error": exception_text(exc, 500) + " (see the logs)"}


def json_response(body: Mapping[str, Any], status: int, headers: Mapping[str, str] | None = None) -> flask.Response:
    """A strict JSON response; a body JSON cannot hold becomes a 500 ``internal_error`` instead."""
    try:
        text = json.dumps(body, allow_nan=False)
    except Exception as exc:  # TypeError, ValueError (NaN), RecursionError...
        log.error("answer body is not JSON: %s", exc, extra={LogField.OUTCOME: "internal_error"})
        text, status, headers = json.dumps(internal_error_body(exc)), code(DELIVERY, "internal_error"), None
    return flask.Response(text, status=status, headers=dict(headers or {}), mimetype="application/json")


def json_errors(view: Callable[[flask.Request], flask.Response]) -> Callable[[flask.Request], flask.Response]:
    """Wrap a view so that any exception it lets through answers 500 ``internal_error`` in JSON."""

    @functools.wraps(view)
    def wrapper(request: flask.Request) -> flask.Response:
        try:
            return view(request)
        except Exception as exc:
            log.exception("unexpected error while answering a request", extra={LogField.OUTCOME: "internal_error"})
            return json_response(internal_error_body(exc), code(DELIVERY, "internal_error"))

    return wrapper
