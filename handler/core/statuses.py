"""Every answer the handler's endpoints give: its HTTP status code, its body ``status`` and when it is given.

One table per endpoint: :data:`DELIVERY` (a Cloud Scheduler delivery), :data:`RUN_CHECK` (the watchdog's
``POST /dedup/run-check``) and :data:`ENDPOINT` (a function decorated with ``idempotent_endpoint``). The code
that answers takes each status code from its table (:func:`code`), and ``scripts/gen_docs`` renders the tables as
the reference page ``docs/reference/http-answers.md``, so the page is what the code answers.

Every body is a JSON object with ``status`` (:mod:`scheduler_dedup.handler.service.answers`). This module imports nothing,
so the modules that refuse a request early (caller verification, request limits) can use it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """One answer.

    Attributes:
        code: the HTTP status code.
        status: the body's ``status``.
        fields: the body's other fields (and headers) besides ``status`` and ``run_id``, e.g. ``("result",)``.
        when: when it is given, and what it means for the run; Markdown, one or two sentences.
    """

    code: int
    status: str
    fields: tuple[str, ...]
    when: str


_NOT_JSON_PAGE = "the answer is still JSON, never the framework's HTML error page"

#: A delivery: ``POST`` (or any method) from Cloud Scheduler with the ``X-CloudScheduler-*`` headers.
DELIVERY: tuple[Answer, ...] = (
    Answer(200, "processed", ("result", "result_dropped", "running_downstream"),
           "This delivery ran the job and recorded the run completed, whatever the result's type. `result` is its "
           "stored form; `result_dropped` says why it was not stored. A proxy target that started a Cloud Run job "
           "execution, a Workflows execution or a Cloud Build build records the run `running_downstream` instead, "
           "`running_downstream` naming the execution: the run check records its own outcome once it ends."),
    Answer(200, "duplicate", ("result", "result_dropped", "running_downstream"),
           "The run was completed (or started downstream, or cancelled by overlap policy `replace`) before: the job "
           "did not run. The same `result` and `result_dropped` as the first answer."),
    Answer(200, "failed", ("error", "output"),
           "The job raised `NonRetryableJobError`, or exited (`SystemExit`: `error` names the exit code and the fix), "
           "now or on an earlier delivery; the run is recorded `failed` and will not run again. `error` and "
           "`output` are as for `released`."),
    Answer(200, "skipped_overlap", ("error",),
           "The job's overlap policy is `skip` (or `buffer_one` with a run already waiting) and another run of the "
           "job was still executing at this run's turn: the job did not run, the run is recorded `skipped_overlap` "
           "and never runs (200, so Scheduler stops). `error` names the run that was executing."),
    Answer(200, "paused", ("error",),
           "The stack pauses the job (the component's `paused` input: `DEDUP_PAUSED_SINCE`, until "
           "`DEDUP_RESUMED_AT`), and the delivery came during the pause or its schedule time is in it: nothing ran "
           "and nothing was written, so run history reports the fire time paused (200, so Scheduler stops)."),
    Answer(409, "in_progress", ("retry_after_seconds", "Retry-After header"),
           "Another attempt holds a live lease. Never 503: App Engine-style front ends retry 503 outside the job's "
           "retry count."),
    Answer(409, "fenced", ("error", "output"),
           "Another attempt id took the run over from this one while it ran (or took it over and released it); "
           "this attempt's outcome was not recorded."),
    Answer(400, "bad_request", ("error", "header"),
           "`X-CloudScheduler-JobName` or `X-CloudScheduler-ScheduleTime` is missing or malformed, or sent twice "
           "with different values; an `X-Dedup-*` header is malformed; or a full job name disagrees with "
           "`X-Dedup-*` (the error names both). Nothing was written."),
    Answer(401, "unauthorized", ("error",),
           "Caller verification is on and the ID token is missing, malformed, badly signed, expired, for another "
           "audience or from another issuer; or trust mode's premise does not hold. Nothing was read or written."),
    Answer(403, "forbidden", ("error", "header", "job"),
           "The token is valid but its email is not an allowed caller or not verified; or the delivery names "
           "another job than `DEDUP_SCHEDULER_JOB` (`job` names the handler's own); or, on App Engine "
           "(`DEDUP_APP_ENGINE_CALLER=true`), the request carries neither `X-Appengine-Cron: true` nor "
           "`X-AppEngine-QueueName: __cron`, which App Engine sets for Scheduler and strips from anyone else. "
           "Nothing was read or written."),
    Answer(404, "not_found", ("error",),
           "A path under `/_ah/`, App Engine's own (it sends `/_ah/start` to start a basic- or manual-scaling "
           "instance and takes 2xx or 404 as started): no delivery, nothing was read or written."),
    Answer(408, "request_timeout", ("error",),
           "The request line and headers took longer than 10 s to arrive (the server's header deadline, on any "
           "path; the connection is closed), or the run check's body did not arrive within 10 s after them."),
    Answer(413, "request_too_large", ("error",), "The body is over 64 KiB."),
    Answer(431, "request_header_too_large", ("error", "header"),
           "A header value is over 4,096 characters, or all header values over 32 KiB; `header` names it, never "
           "its value."),
    Answer(500, "released", ("error", "output", "released"),
           "The job raised any other exception, or was interrupted (`KeyboardInterrupt`, `GeneratorExit`). `error` "
           "is the exception's type and message and `output` the tail of what the job wrote to stdout and stderr, "
           "ending with the exception's traceback (the job's own frames first), "
           "as [the run record](../how-it-works.md#the-run-record) keeps them: the run was recorded `released` with "
           "both first, so Scheduler's next retry runs the job at once, and once the retries are over run history "
           "reports the run failed with that error."),
    Answer(500, "store_error", ("executed", "step", "error", "job_error", "output"),
           "The run store failed or timed out (`DEDUP_STORE_TIMEOUT_SECONDS`). `executed: false`: the job did not "
           "run; at `step: claim` the delivery holds no claim, at `step: record_skip` (its overlap policy skipped "
           "it, and recording that failed) its claim stays until its lease expires, deliveries get 409 until then, "
           "and the next one applies the overlap policy again. `executed: true`: the job ran but its outcome could "
           "not be recorded; deliveries get 409 until its lease expires, then the job runs again. `error` says "
           "which (see [the failure table](../failures.md)); `job_error` and `output` are the job's own failure that "
           "could not be recorded, as `released` has them."),
    Answer(500, "store_misconfigured", ("executed", "step", "error", "fix", "job_error", "output"),
           "The run store refuses every call because of how it is set up: a Firestore database in Datastore mode, "
           "a database or instance that does not exist, a runtime identity without the store's role, a Redis AUTH "
           "string or ACL user the instance refuses. `fix` says what to change; `executed` and `step` mean what "
           "they mean for `store_error`. Scheduler keeps retrying (not 503, which App Engine-style front ends retry "
           "outside the retry count), and the first delivery after the fix runs the job. The handler logs the "
           "cause as ERROR once per instance (see [the store is misconfigured](../failures.md#the-store-is-misconfigured))."),
    Answer(500, "auth_unavailable", ("error",),
           "Google's token-signing certificates could not be fetched: Scheduler retries instead of losing the run."),
    Answer(500, "internal_error", ("error",),
           f"An unexpected error in the handler (e.g. a record with an unknown status); {_NOT_JSON_PAGE}."),
)

#: The run check: ``POST /dedup/run-check`` from the watchdog job, verified like a delivery.
RUN_CHECK: tuple[Answer, ...] = (
    Answer(200, "ok", ("job_name", "since", "until", "now", "grace_seconds", "expected", "recorded", "missed",
                       "stuck", "active_since", "active_since_source", "paused_since", "failing", "recovered",
                       "long_run", "findings", "settled", "running_downstream"),
           "Every expected fire time of the window has a record, and none is stuck. `settled` lists the schedule "
           "times whose downstream execution this check found ended (their run now recorded with its outcome), "
           "`running_downstream` those whose execution still runs."),
    Answer(200, "missed", ("the same fields",),
           "Some fire times of the window have no record after the grace period; each is also logged as one "
           "`missed_run` ERROR line, which the `missed run` alert policy matches. 200 all the same: a retry would "
           "only report them again."),
    Answer(200, "stuck", ("the same fields",),
           "Runs of the window are in progress past their lease (the attempt died and no retry took them over); "
           "each is also logged as one `stuck_run` ERROR line."),
    Answer(200, "failing", ("the same fields",),
           "`failure_threshold` consecutive runs have failed, the last in the window; logged as one `failure_streak` "
           "ERROR line, which the `run failed` alert policy matches when the threshold is above 1."),
    Answer(200, "long_run", ("the same fields",),
           "A run is still in progress (or its downstream execution still runs) `max_runtime_seconds` after its "
           "claim, renewed lease or not; logged as one `long_run` ERROR line."),
    Answer(200, "paused", ("the same fields",),
           "The job is paused, or was in the window (`DEDUP_PAUSED_SINCE` until `DEDUP_RESUMED_AT`): its fire times "
           "in the pause are one `paused` finding, not missed runs, and no `missed_run` line is logged for them; a "
           "run missed before the pause is still `missed`."),
    Answer(400, "bad_request", ("error", "field"), "The body is not the run check's JSON contract; `field` names "
                                                   "the bad field."),
    Answer(403, "forbidden", ("error", "field", "job"),
           "`job_name` is not the handler's own job (`DEDUP_SCHEDULER_JOB`, when set): a handler reports only on its "
           "own job."),
    Answer(500, "not_configured", ("error",), "`DEDUP_SCHEDULE` is not set, so no fire time can be expected."),
    Answer(500, "store_error", ("error",), "The run store failed; no heartbeat is logged."),
    Answer(500, "store_misconfigured", ("error", "fix"),
           "The run store refuses every call because of how it is set up (as the delivery answer of that name); "
           "`fix` says what to change. No heartbeat is logged, so the watchdog-silent alert fires."),
)

#: A function decorated with ``idempotent_endpoint``, called with an ``Idempotency-Key`` (the HTTP proxy target
#: sends the run id). Its codes are the ones the proxy target's downstream table expects.
ENDPOINT: tuple[Answer, ...] = (
    Answer(200, "processed", ("result", "result_dropped", "key"),
           "This request ran the function and recorded it; the proxy target completes the run."),
    Answer(200, "duplicate", ("result", "result_dropped", "key"),
           "An earlier request ran it; the stored `result` is answered and the proxy target completes the run."),
    Answer(409, "in_progress", ("retry_after_seconds", "Retry-After header", "key"),
           "Another request is running the key (for example the proxy's own call whose answer was lost to "
           "`DEDUP_TARGET_TIMEOUT_SECONDS`): the proxy releases the run and Scheduler retries."),
    Answer(409, "fenced", ("error", "key"),
           "Another request took the key over from this one: the proxy releases the run and Scheduler retries."),
    Answer(422, "failed", ("error", "key"),
           "The function raised `NonRetryableJobError`, now or before: the proxy records the run failed."),
    Answer(422, "payload_mismatch", ("error", "key"),
           "The key was used before with another request body; nothing ran. The IETF Idempotency-Key draft answers "
           "such a reuse with 422 ([Error Scenarios](https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-"
           "key-header/)); the proxy records the run failed."),
    Answer(400, "bad_request", ("error", "header"),
           "The `Idempotency-Key` header is missing: the proxy records the run failed."),
    Answer(500, "released", ("error", "released", "key"),
           "The function raised another exception; the key was released first. The proxy releases the run and "
           "Scheduler retries."),
    Answer(500, "store_error", ("executed", "step", "error", "key"),
           "The run store failed; the body says whether the function ran. The proxy releases the run."),
    Answer(500, "internal_error", ("error",), f"An unexpected error; {_NOT_JSON_PAGE}."),
)


def code(table: tuple[Answer, ...], status: str) -> int:
    """The HTTP status code ``table`` gives body status ``status``.

    Raises:
        KeyError: ``status`` is not an answer of ``table`` (add its row first: the reference page is the table).
    """
    for answer in table:
        if answer.status == status:
            return answer.code
    raise KeyError(f"{status!r} is not an answer of this table: add its row to scheduler_dedup.handler.core.statuses")
