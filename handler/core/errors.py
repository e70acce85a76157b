"""Every error a user of scheduler-dedup can catch, each named for what happened."""

from __future__ import annotations


class DedupError(Exception):
    """Base class of scheduler-dedup's errors."""


class ConfigError(DedupError, ValueError):
    """A setting (environment variable or argument) is invalid; the message names it and the fix.

    The message quotes the setting without its credentials (:func:`~scheduler_dedup.handler.core.safe_text.scrub_secrets`):
    it reaches start-up logs and ``pulumi preview`` output.
    """

    def __init__(self, message: str, *args: object):
        from scheduler_dedup.handler.core.safe_text import scrub_secrets

        super().__init__(scrub_secrets(message), *args)


class RequestHeaderError(DedupError, ValueError):
    """A Cloud Scheduler header is missing or malformed.

    Attributes:
        header: the header's canonical name, e.g. ``X-CloudScheduler-ScheduleTime``.
    """

    def __init__(self, header: str, problem: str):
        super().__init__(f"{header} {problem}")
        self.header = header


class OtherJobError(RequestHeaderError):
    """A delivery names another Scheduler job than the one this handler serves (``DEDUP_SCHEDULER_JOB``): 403.

    Attributes:
        header: the header that names the other job (or its project or location).
        own_job: the job this handler serves, ``projects/P/locations/L/jobs/J``.
    """

    def __init__(self, header: str, problem: str, own_job: str):
        super().__init__(header, problem)
        self.own_job = own_job


class NonRetryableJobError(DedupError):
    """Raised by a job to say: record this run as failed and never run it again.

    Any other exception a job raises is retryable: the claim is released and the handler
    answers 500 so that Cloud Scheduler's retry config runs the job again.
    """


class RunInProgressError(DedupError):
    """Another attempt holds a live lease on this run id.

    Attributes:
        run_id: the run id (64 hex characters).
        retry_after_seconds: seconds until that lease expires unless renewed (Firestore's clock).
    """

    def __init__(self, run_id: str, retry_after_seconds: float):
        super().__init__(f"run {run_id} is in progress in another attempt; lease expires in {retry_after_seconds:.1f} s")
        self.run_id = run_id
        self.retry_after_seconds = retry_after_seconds


class RunFailedError(DedupError):
    """The run was recorded as failed by a non-retryable error; it will not run again.

    Attributes:
        run_id: the run id.
        error: the recorded error message.
    """

    def __init__(self, run_id: str, error: str):
        super().__init__(f"run {run_id} failed permanently: {error}")
        self.run_id = run_id
        self.error = error


class PayloadMismatchError(DedupError):
    """The idempotency key was used before with another payload: nothing ran, and nothing was replayed.

    The IETF draft answers such a reuse with 422 Unprocessable Content
    (https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/, section "Error Scenarios").

    Attributes:
        run_id: the record id of the key (64 hex characters).
        stored_fingerprint: the payload fingerprint the record holds (SHA-256, 64 hex characters).
        given_fingerprint: this call's.
    """

    def __init__(self, run_id: str, stored_fingerprint: str, given_fingerprint: str):
        super().__init__(f"record {run_id} was claimed with another payload (fingerprint {stored_fingerprint[:12]}..., "
                         f"this call's {given_fingerprint[:12]}...): use a new idempotency key for a new payload")
        self.run_id = run_id
        self.stored_fingerprint = stored_fingerprint
        self.given_fingerprint = given_fingerprint


class LeaseLostError(DedupError):
    """This attempt was fenced: another attempt took over the run after this one's lease expired.

    The attempt's completion or release was refused, so the newer attempt's record is intact.
    """


class StoreCallError(DedupError):
    """One call to the run store did not succeed (the store contract's error, whatever the store).

    Raised by every :class:`~scheduler_dedup.handler.stores.base.RunStore` method for failures other than
    the expected answers it returns ("already exists", "changed since"). The store's own exception is
    chained (``__cause__``).

    Attributes:
        store: the store's name for messages, e.g. ``Firestore``.
        hint: what to check, for a person reading the message (an endpoint, credentials, an index), or ``""``.
    """

    def __init__(self, message: str, *, store: str, hint: str = ""):
        super().__init__(message)
        self.store = store
        self.hint = hint


class StoreUnavailableError(StoreCallError):
    """The store failed or did not answer in time (after the client's own retries): **a write may have
    committed**. Callers that wrote read the record and recognise their own attempt id."""


class StoreRefusedError(StoreCallError):
    """The store refused the call: **nothing was written** (permission denied, no such database or table,
    a missing index)."""


class StoreConfigError(StoreRefusedError):
    """The store refuses every call because of how it is set up, not because of this call: a Firestore database in
    Datastore mode, a database or instance that does not exist, credentials without the role the handler needs, a
    Redis AUTH string or ACL user the instance refuses. Nothing was written, and no retry succeeds until someone
    changes the setting that :attr:`fix` names; deliveries answer 500 ``store_misconfigured``
    (:data:`~scheduler_dedup.handler.core.statuses.DELIVERY`).

    Attributes:
        fix: what to change, naming the setting, mode or role (e.g. ``grant roles/datastore.user ...``).
        hint: the same text as ``fix``.
    """

    def __init__(self, message: str, *, store: str, fix: str):
        super().__init__(message, store=store, hint=fix)
        self.fix = fix


def store_config_error(exc: BaseException | None) -> StoreConfigError | None:
    """The :class:`StoreConfigError` behind ``exc`` (itself, or the cause of a :class:`StoreError`), or None."""
    for candidate in (exc, exc.__cause__ if exc is not None else None):
        if isinstance(candidate, StoreConfigError):
            return candidate
    return None


class InvalidWriteError(StoreRefusedError):
    """The store (or its client, before sending) refused a write because of the values it holds: too large,
    nested too deep, an integer out of range. Nothing was written.

    Attributes:
        sent: False if the client refused the values before sending anything (so no earlier try of the
            call can have committed either); True if the store answered the refusal.
    """

    def __init__(self, message: str, *, store: str, hint: str = "", sent: bool = True):
        super().__init__(message, store=store, hint=hint)
        self.sent = sent


class StoreError(DedupError):
    """The run store failed, or did not answer within ``DEDUP_STORE_TIMEOUT_SECONDS``, so a run's state could
    not be read or written. The cause is chained (``__cause__``, a :class:`StoreCallError`).

    Attributes:
        run_id: the run id.
        attempt_id: this attempt's id.
        step: what could not be done: ``claim`` (before the work ran), ``complete``, ``record_failure`` or
            ``release`` (after it ran).
        executed: True if the work ran before the store failed. Its claim then stays ``in_progress`` until
            the lease expires (unless the write landed after all); the first delivery after that takes the
            run over and runs the work again.
        job_error: the work's own failure that was being recorded (``record_failure``, ``release``): its
            exception's type and message, scrubbed; else None.
        output: the tail of what the work wrote, with ``job_error``; else None.
    """

    def __init__(self, run_id: str, attempt_id: str, step: str, executed: bool, cause: BaseException, *,
                 job_error: str | None = None, output: str | None = None):
        store = cause.store if isinstance(cause, StoreCallError) else "the store"
        super().__init__(f"{store} failed at {step} of run {run_id} ({cause_text(cause)})")
        self.run_id = run_id
        self.attempt_id = attempt_id
        self.step = step
        self.executed = executed
        self.job_error = job_error
        self.output = output


def cause_text(exc: BaseException) -> str:
    """``Type: message`` of a store failure, naming the store client's own exception (``ServiceUnavailable: ...``)
    rather than the contract's wrapper, so a message says what the store answered."""
    inner = exc.__cause__ if isinstance(exc, StoreCallError) and exc.__cause__ is not None else exc
    return f"{type(inner).__name__}: {inner}"


def store_failure(exc: BaseException) -> tuple[str, str]:
    """``(store name, the store client's exception type)`` of a :class:`StoreError` or :class:`StoreCallError`,
    e.g. ``("Firestore", "ServiceUnavailable")``, for answers that say which store failed and how."""
    call = exc.__cause__ if isinstance(exc, StoreError) else exc
    if not isinstance(call, StoreCallError):
        return "the store", type(call).__name__ if call is not None else "error"
    inner = call.__cause__
    return call.store, type(inner).__name__ if inner is not None else type(call).__name__
