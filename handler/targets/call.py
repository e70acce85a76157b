"""The one downstream HTTP call every target makes, and what its answer means: a 2xx answer returned, anything
else raised as a retry (:class:`TargetRetryableError`) or a recorded failure, by the table of
:mod:`~scheduler_dedup.handler.targets.answers`. Also the helpers the Google API targets share: a ``list`` call's
pages, the existence check that may be refused, and the run's schedule time as RFC 3339.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import requests

from scheduler_dedup.handler.core.deadline import (CredentialDeadlineExceeded, read_bounded, total_deadline,
                                                   with_total_deadline)
from scheduler_dedup.handler.core.errors import NonRetryableJobError
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.safe_text import scrub_secrets
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.targets.answers import TargetType, answer_summary, classify, existence_check_refused

log = logging.getLogger("scheduler_dedup")

#: Bytes of a Google API's 2xx answer read at most: one Operation, Execution or Trigger, or a list page of at most
#: 100 executions or builds, is far below it; the rest of a larger body is never read.
MAX_API_ANSWER_BYTES = 4 * 1024 * 1024
#: Bytes of an error answer read at most: enough for its summary
#: (:func:`~scheduler_dedup.handler.targets.answers.answer_summary`).
MAX_ERROR_ANSWER_BYTES = 4096


class TargetRetryableError(RuntimeError):
    """The downstream call failed in a way a retry may fix (5xx, 429, timeout, connection error).

    The handler releases the claim and answers 500, so Cloud Scheduler delivers again.
    """


#: What the targets call through: ``requests.Session``, or google-auth's ``AuthorizedSession`` (a subclass).
HttpSession = requests.Session


def rfc3339(run: ScheduledRun) -> str:
    """The run's schedule time as RFC 3339 in UTC, e.g. ``2026-10-16T12:00:00Z``."""
    return instant_rfc3339(run.schedule_time)


def instant_rfc3339(when: datetime) -> str:
    """An aware instant as RFC 3339 in UTC, e.g. ``2026-10-16T12:00:00Z``."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


def previous_rfc3339(run: ScheduledRun) -> str | None:
    """The start of the run's data interval (:attr:`ScheduledRun.previous_schedule_time`) as RFC 3339, or None."""
    return None if run.previous_schedule_time is None else instant_rfc3339(run.previous_schedule_time)


class NotFoundError(NonRetryableJobError):
    """A call answered 404: the resource named does not exist (a downstream execution deleted, a workflow or job
    not there)."""


class CheckRefused(Exception):
    """The pre-start existence check was refused (see :func:`~scheduler_dedup.handler.targets.answers.existence_check_refused`)."""


@dataclass(frozen=True)
class DownstreamAnswer:
    """What the handler keeps of one downstream answer: its status, headers and at most a bounded body.

    Attributes:
        status_code: the HTTP status.
        headers: the answer's headers.
        body: at most the call's ``body_limit`` bytes (:data:`MAX_API_ANSWER_BYTES`; :data:`MAX_ERROR_ANSWER_BYTES`
            of an error answer); the rest was never read.
        complete: True when ``body`` is the whole body.
    """

    status_code: int
    headers: Mapping[str, str]
    body: bytes
    complete: bool


def call(session: HttpSession, method: str, url: str, timeout: float, what: str, target_type: TargetType,
          *, existence_check: bool = False, body_limit: int = MAX_API_ANSWER_BYTES,
          **kwargs: Any) -> DownstreamAnswer:
    """One HTTP call, classified by :func:`scheduler_dedup.handler.targets.answers.classify`: returns a 2xx answer, or raises.

    The call, its body included, ends within ``timeout`` seconds in all
    (:func:`~scheduler_dedup.handler.core.deadline.total_deadline`), and reads at most ``body_limit`` bytes of a
    2xx body (:data:`MAX_ERROR_ANSWER_BYTES` of any other), closing the connection on the rest.

    Args:
        timeout: seconds the whole call may take: connect, send, status line, headers and the body read.
        existence_check: the call is the pre-start ``list`` call; a refused one raises ``CheckRefused``, as does a
            2xx answer larger than ``body_limit`` (no list can be judged from a part of it).
        body_limit: bytes of a 2xx body to read; 0 reads none (only the status is used).

    Raises:
        TargetRetryableError: no complete answer within ``timeout``, a connection error, or a status the table
            retries (401, 403, 408, 409, 429, 5xx).
        NonRetryableJobError: a status the table records failed (3xx, 400, 404, 422, other 4xx); for 404 its
            subclass :class:`NotFoundError`.
    """
    with total_deadline(timeout) as watch:
        try:
            # No redirects: requests would turn a POST into a body-less GET on 301/302/303 and the
            # run would be recorded done though the target never got it. A 3xx is a failure instead.
            response = with_total_deadline(session).request(method, url, timeout=timeout, allow_redirects=False,
                                                            stream=True, **kwargs)
        except requests.RequestException as exc:
            if isinstance(exc, CredentialDeadlineExceeded):  # the access token's refresh: nothing was sent
                raise TargetRetryableError(f"{what}: no access token within {timeout:g} s (the metadata server or "
                                           "token endpoint did not answer in time); nothing was sent") from exc
            if watch.fired or isinstance(exc, requests.Timeout):
                raise TargetRetryableError(f"{what}: no answer within {timeout:g} s ({type(exc).__name__}); the "
                                           "downstream may have started; a retry checks where the target can "
                                           "tell") from exc
            if isinstance(exc, requests.ConnectionError):
                raise TargetRetryableError(f"{what}: connection failed ({scrub_secrets(str(exc))[:200]})") from exc
            raise TargetRetryableError(f"{what}: the request failed ({type(exc).__name__}: "
                                       f"{scrub_secrets(str(exc))[:200]})") from exc
        if watch.fired:  # the deadline cut the status line or the headers: what was parsed of them is no answer
            response.close()
            raise TargetRetryableError(f"{what}: no complete answer within {timeout:g} s (its headers were cut "
                                       "off); the downstream may have started; a retry checks where the target "
                                       "can tell")
        status = response.status_code
        answer = classify(target_type, status)
        body, complete = read_bounded(response, body_limit if answer.outcome == "completed" else
                                      MAX_ERROR_ANSWER_BYTES)
        cut = watch.fired
    got = DownstreamAnswer(status, dict(response.headers), body, complete and not cut)
    if answer.outcome == "completed":
        if body_limit > 0 and not got.complete:
            if cut:
                raise TargetRetryableError(f"{what}: HTTP {status}, but its body did not arrive within {timeout:g} s "
                                           "in all; the downstream may have started; a retry checks where the "
                                           "target can tell")
            if existence_check:
                raise CheckRefused(f"{what}: HTTP {status}, an answer larger than {body_limit} bytes or cut off")
            log.warning("%s: HTTP %s, an answer larger than %s bytes or cut off: its names are not recorded", what,
                        status, body_limit, extra={LogField.HTTP_STATUS: status})
        return got
    if existence_check and existence_check_refused(status):
        raise CheckRefused(f"{what}: HTTP {status}")
    if 300 <= status < 400:
        location = scrub_secrets(got.headers.get("Location", "?"))[:200]
        message = (f"{what}: HTTP {status} redirect to {location!r} (not followed, not retried): point "
                   "DEDUP_TARGET at the final URL")
    else:
        verdict = "released for a retry" if answer.outcome == "retry" else "recorded failed"
        # Never the body itself: it may quote our ID token or the downstream's own data.
        message = (f"{what}: {answer_summary(status, got.headers, got.body, got.complete)}"
                   f"{f' (its body cut off at {timeout:g} s)' if cut else ''} ({verdict}: {answer.reason})")
    if answer.outcome == "retry":
        raise TargetRetryableError(message)
    raise (NotFoundError if status == 404 else NonRetryableJobError)(message)


def json_object(answer: DownstreamAnswer, what: str) -> dict[str, Any]:
    """The JSON object of a complete answer's body, else ``{}``."""
    if not answer.complete:
        return {}
    try:
        body = json.loads(answer.body)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def first_listed(page: Callable[[str], dict[str, Any]], key: str, matches: Callable[[dict[str, Any]], bool],
                  pages: int) -> dict[str, Any] | None:
    """The first item under ``key`` of at most ``pages`` pages of a ``list`` call that ``matches``, or None.

    Args:
        page: fetches one page given its ``pageToken`` (``""`` for the first); the answer's ``nextPageToken``
            names the next (AIP-158 pagination, as Cloud Run's and Cloud Build's ``list`` methods page).
    """
    token = ""
    for _ in range(pages):
        answer = page(token)
        for item in answer.get(key, []):
            if isinstance(item, dict) and matches(item):
                return item
        token = answer.get("nextPageToken", "")
        if not token:
            break
    return None


def check_skipped(run: ScheduledRun, exc: Exception) -> None:
    """Log that the look-up for an existing execution was refused and the run starts anyway.

    A missing list permission must not turn every run into a recorded failure: the check is a
    safety net for lost responses, and the downstream's own dedup on the run id is the last line.
    """
    log.warning("cannot check for an existing execution (%s); starting one", exc,
                extra={LogField.RUN_ID: run.run_id, LogField.OUTCOME: "existence_check_skipped"})
