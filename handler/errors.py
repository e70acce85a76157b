"""Every error a user of scheduler-dedup can catch, each named for what happened."""

from __future__ import annotations


class DedupError(Exception):
    """Base class of scheduler-dedup's errors."""


class ConfigError(DedupError, ValueError):
    """A setting (environment variable or argument) is invalid; the message names it and the fix."""


class RequestHeaderError(DedupError, ValueError):
    """A Cloud Scheduler header is missing or malformed.

    Attributes:
        header: the header's canonical name, e.g. ``X-CloudScheduler-ScheduleTime``.
    """

    def __init__(self, header: str, problem: str):
        super().__init__(f"{header} {problem}")
        self.header = header


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


class LeaseLostError(DedupError):
    """This attempt was fenced: another attempt took over the run after this one's lease expired.

    The attempt's completion or release was refused, so the newer attempt's record is intact.
    """


class StoreError(DedupError):
    """Firestore failed, or did not answer within ``DEDUP_FIRESTORE_TIMEOUT_SECONDS``, so a run's state could
    not be read or written. The cause is chained (``__cause__``).

    Attributes:
        run_id: the run id.
        attempt_id: this attempt's id.
        step: what could not be done: ``claim`` (before the work ran), ``complete``, ``record_failure`` or
            ``release`` (after it ran).
        executed: True if the work ran before Firestore failed. Its claim then stays ``in_progress`` until
            the lease expires (unless the write landed after all); the first delivery after that takes the
            run over and runs the work again.
    """

    def __init__(self, run_id: str, attempt_id: str, step: str, executed: bool, cause: BaseException):
        super().__init__(f"Firestore failed at {step} of run {run_id} ({type(cause).__name__}: {cause})")
        self.run_id = run_id
        self.attempt_id = attempt_id
        self.step = step
        self.executed = executed
