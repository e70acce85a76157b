"""What each downstream answer means for the run: one table per target type (:data:`TABLE`), with the reason for
each row, rendered on docs/reference/http-answers.md.

An answer is **completed** (recorded, never run again), **retry** (the claim is released and the handler answers
500, so Scheduler delivers again) or **failed** (recorded ``failed``). Only an answer that says this request can
never succeed as sent records the run failed; anything a grant, a deploy, a quota or time can fix is retried, so a
target that stays misconfigured shows as repeated 500s rather than lost runs. A refused pre-start existence check is
logged and skipped (:func:`existence_check_refused`): the start call's answer decides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from scheduler_dedup.handler.core.safe_text import scrub_secrets, utf8_safe

#: Longest summary of a downstream's error body, characters.
SUMMARY_CHARS = 120

Outcome = Literal["completed", "retry", "failed"]
TargetType = Literal["http", "workflows", "cloud_run_job", "cloud_build_trigger"]


@dataclass(frozen=True)
class Answer:
    """One row of the table: a status range, the run's outcome and why.

    Attributes:
        statuses: a label for the statuses this row covers (``"2xx"``, ``"401, 403"``...).
        outcome: ``completed``, ``retry`` or ``failed``.
        reason: one sentence, for the reference page (docs/reference/http-answers.md) and for logs.
    """

    statuses: str
    outcome: Outcome
    reason: str


_RETRY_AUTH = "IAM grants take minutes to apply after a deploy, and a fixed grant must not have lost the runs meanwhile"
_COMMON: dict[str, Answer] = {
    "2xx": Answer("2xx", "completed", "the downstream accepted the run"),
    "auth": Answer("401, 403", "retry", _RETRY_AUTH),
    "408": Answer("408", "retry", "the downstream timed out reading the request"),
    "429": Answer("429", "retry", "quota or rate limit: later deliveries may pass"),
    "5xx": Answer("5xx", "retry", "server error or unavailable"),
    "3xx": Answer("3xx", "failed", "redirects are not followed (a POST would turn into a GET): point DEDUP_TARGET "
                                   "at the final URL"),
}

#: Per target type: the rows in the reference page's order. Statuses not listed fall to the ``other 4xx`` row.
TABLE: dict[TargetType, tuple[Answer, ...]] = {
    "http": (
        _COMMON["2xx"], _COMMON["auth"], _COMMON["408"],
        Answer("409", "retry", "a downstream idempotent_endpoint service is still running this run id (it answers 409 with "
                               "Retry-After)"),
        _COMMON["429"], _COMMON["5xx"],
        Answer("422", "failed", "a downstream idempotent_endpoint service recorded this run id failed for good "
                                "({\"status\": \"failed\"})"),
        _COMMON["3xx"],
        Answer("other 4xx (400, 404, ...)", "failed", "the request is malformed or the URL does not exist; repeating "
                                                      "it changes nothing"),
    ),
    "workflows": (
        _COMMON["2xx"], _COMMON["auth"], _COMMON["408"],
        Answer("409", "retry", "ABORTED / ALREADY_EXISTS from a concurrent request"),
        _COMMON["429"], _COMMON["5xx"], _COMMON["3xx"],
        Answer("other 4xx (400, 404, ...)", "failed", "bad argument, or the workflow does not exist"),
    ),
    "cloud_run_job": (
        _COMMON["2xx"], _COMMON["auth"], _COMMON["408"],
        Answer("409", "retry", "ABORTED / ALREADY_EXISTS from a concurrent request"),
        _COMMON["429"], _COMMON["5xx"], _COMMON["3xx"],
        Answer("other 4xx (400, 404, ...)", "failed", "bad override, or the job does not exist"),
    ),
    "cloud_build_trigger": (
        _COMMON["2xx"], _COMMON["auth"], _COMMON["408"],
        Answer("409", "retry", "ABORTED / ALREADY_EXISTS from a concurrent request"),
        Answer("429", "retry", "quota or rate limit (e.g. the project's concurrent builds): later deliveries may pass"),
        _COMMON["5xx"], _COMMON["3xx"],
        Answer("other 4xx (400, 404, ...)", "failed", "the trigger does not exist or is disabled, or it refuses the "
                                                      "substitution (a build config that uses no $_DEDUP_RUN_ID must "
                                                      "allow loose substitutions)"),
    ),
}


def classify(target_type: TargetType, status: int) -> Answer:
    """The row of :data:`TABLE` that decides what HTTP ``status`` from a ``target_type`` target means.

    Args:
        target_type: ``http``, ``workflows``, ``cloud_run_job`` or ``cloud_build_trigger``.
        status: the downstream's HTTP status code.

    Returns:
        The matching :class:`Answer` (1xx, which none of these send, counts as ``other``: failed).
    """
    rows = TABLE[target_type]
    label = ("2xx" if 200 <= status < 300 else "3xx" if 300 <= status < 400 else "5xx" if status >= 500
             else "401, 403" if status in (401, 403) else str(status))
    for row in rows:
        if row.statuses == label:
            return row
    return rows[-1]


def existence_check_refused(status: int) -> bool:
    """True when a 4xx answer to the pre-start ``list`` call should skip the check instead of retrying
    the run: every 4xx except 408, 409 and 429 (which a retry can get past)."""
    return 400 <= status < 500 and status not in (408, 409, 429)


def answer_summary(status: int, headers: Mapping[str, str], body: bytes, complete: bool = True) -> str:
    """What of a downstream's error answer may be recorded, answered and logged: status, content type and a short
    scrubbed summary, never the body itself.

    A downstream's error body can quote what it was sent (our ``Authorization: Bearer <ID token>`` included) or
    hold data of its own. The summary is the JSON error's ``error.message`` (Google APIs,
    https://cloud.google.com/apis/design/errors#http_mapping) or ``message`` when there is one, else the body's
    first characters; whitespace collapsed, credentials scrubbed
    (:func:`~scheduler_dedup.handler.core.safe_text.scrub_secrets`), at most :data:`SUMMARY_CHARS` characters.
    ``body`` is what was read of it; ``complete`` False (more was sent, and not read) shows its size as ``N+ bytes``.
    """
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "") or "no content type"
    text = body[:4096].decode("utf-8", "replace")
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else data.get("message", error)
        if isinstance(message, str):
            text = message
    summary = scrub_secrets(utf8_safe(re.sub(r"\s+", " ", text).strip()))
    if len(summary) > SUMMARY_CHARS:
        summary = summary[:SUMMARY_CHARS - 3] + "..."
    return f"HTTP {status}, {content_type.split(';')[0].strip()[:60]}, {len(body)}{'' if complete else '+'} bytes" + (
        f": {summary}" if summary else "")
