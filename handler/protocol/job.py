"""The user's job: the :class:`ScheduledRun` it receives and how it is loaded from ``DEDUP_JOB``."""

from __future__ import annotations

import importlib
import io
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from scheduler_dedup.handler.core.errors import ConfigError, NonRetryableJobError
from scheduler_dedup.handler.core.job_spec import job_spec_problem
from scheduler_dedup.handler.core.safe_text import scrub_secrets, utf8_safe
from scheduler_dedup.handler.protocol.lease import LeaseKeeper, current_lease
from scheduler_dedup.handler.schedule.run_key import RunKey


@dataclass(frozen=True)
class ScheduledRun:
    """One scheduled run, as the job sees it.

    Attributes:
        run_id: 64 hex characters; pass it downstream as an idempotency token.
        job_name: the Cloud Scheduler job id.
        schedule_time: the run's schedule time, an aware datetime in UTC.
        project: the project id the run is keyed on.
        location: the Scheduler region, or ``""``.
        attempt_id: this attempt's id (32 hex characters); differs on a takeover after a crash.
        manual: True for a forced run (``gcloud scheduler jobs run``).
        previous_schedule_time: the schedule's fire time before this run's, aware UTC: the start of the run's data
            interval ``[previous_schedule_time, schedule_time)``, on the job's wall clock in its time zone
            (:func:`~scheduler_dedup.handler.schedule.cron.previous.previous_fire_time`). None for a forced run and
            for a handler without ``DEDUP_SCHEDULE``.
        lease: this attempt's lease while the job runs (None for a run built outside the handler); ask it
            through :meth:`lease_holds` and :meth:`lease_remaining_seconds`.
    """

    run_id: str
    job_name: str
    schedule_time: datetime
    project: str
    location: str
    attempt_id: str
    manual: bool = False
    previous_schedule_time: datetime | None = None
    lease: LeaseKeeper | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, key: RunKey, attempt_id: str, previous_schedule_time: datetime | None = None) -> "ScheduledRun":
        """The run that ``key`` identifies, as seen by the attempt ``attempt_id``, with the lease of the work
        running in this context (the protocol sets it around the job)."""
        return cls(run_id=key.run_id, job_name=key.job_name, schedule_time=key.schedule_time, project=key.project,
                   location=key.location, attempt_id=attempt_id, manual=key.manual,
                   previous_schedule_time=previous_schedule_time, lease=current_lease.get())

    def lease_remaining_seconds(self) -> float:
        """Seconds left of this attempt's lease, by the store's clock as this instance last observed it.

        0 or less once renewals stopped extending it and it lapsed (a retry may then take the run over and run the
        job beside this attempt), ``-inf`` once another attempt holds the run; ``inf`` for a run without a lease.
        A long job checks it between steps and stops (raise any ``Exception``: the claim is released) before a
        step that takes longer than what is left. See docs/failures.md, "Renewals fail".
        """
        return math.inf if self.lease is None else self.lease.remaining_seconds()

    def lease_holds(self) -> bool:
        """True while this attempt's lease holds (:meth:`LeaseKeeper.holds`): no other attempt may take the run
        over. False once renewals have failed long enough that it may lapse (in the Scheduler handler, with half
        the lease left: the handler ends the worker at a quarter), or it lapsed or was lost: stop before the next
        side effect."""
        return self.lease is None or self.lease.holds()


Job = Callable[[ScheduledRun], Any]


class JobExitedError(NonRetryableJobError):
    """The job raised ``SystemExit`` (``sys.exit()``, a click or argparse ``main()``) instead of returning or raising:
    the run is recorded failed and not run again, since an exit does not say whether the job's work was done, and
    running a job that exited 0 again would repeat it.

    Attributes:
        code: the exit's code (``SystemExit.code``: None, a number or a message).
    """

    def __init__(self, code: object):
        self.code = code
        shown = repr(code) if isinstance(code, str) else "" if code is None else str(code)
        super().__init__(f"the job called sys.exit({shown}) instead of returning: recorded failed, not run again (an "
                         "exit does not say whether its work was done). Return the result (click: "
                         "main(standalone_mode=False)), or raise an exception to have Scheduler retry")


def call_job(job: Job, run: ScheduledRun) -> Any:
    """``job(run)``, with a ``SystemExit`` it raises turned into :class:`JobExitedError` (a recorded failure).

    Raises:
        JobExitedError: the job raised ``SystemExit``.
        Exception: whatever else the job raised, as raised.
    """
    try:
        return job(run)
    except SystemExit as exc:
        raise JobExitedError(exc.code) from exc


def check_job_spec(spec: str | None, variable: str = "DEDUP_JOB") -> None:
    """Check that ``spec`` is ``module:function`` (e.g. ``jobs:run``), without importing anything.

    Raises:
        ConfigError: the spec is missing or malformed; the message names ``variable`` and the fix.
    """
    if not spec:
        raise ConfigError(f"{variable} is not set: set it to the job callable as module:function, e.g. jobs:run")
    problem = job_spec_problem(spec)
    if problem:
        raise ConfigError(f"{variable}={spec!r} is not module:function ({problem}): use e.g. {variable}=jobs:run")


def load_job(spec: str | None, variable: str = "DEDUP_JOB") -> Job:
    """Import the job callable named ``module:function``.

    Raises:
        ConfigError: the spec is missing or malformed, the module does not import, or the
            attribute is missing or not callable; the message names ``variable``.
    """
    check_job_spec(spec, variable)
    assert spec is not None
    module_name, attr = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may raise anything at import
        raise ConfigError(f"{variable}={spec!r}: module {module_name!r} failed to import: {exc!r}") from exc
    job = getattr(module, attr, None)
    if not callable(job):
        taken = ""
        if module_name == "main" and _is_handler_main(module):
            # functions-framework loads the handler's main.py as module 'main' before the job's module
            taken = (f" (the module name 'main' is taken: the handler's own main.py, {module.__file__}, was "
                     f"imported; rename your main.py, e.g. to jobs.py, and use {variable}=jobs:{attr})")
        raise ConfigError(f"{variable}={spec!r}: {module_name} has no callable {attr!r}{taken}")
    return job


def _is_handler_main(module: Any) -> bool:
    handler_main = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "main.py")
    return os.path.abspath(str(getattr(module, "__file__", ""))) == handler_main


#: Characters of a job's output kept per attempt: the tail, where a failure's last words are.
OUTPUT_TAIL_CHARS = 2000


class OutputTail:
    """The last :data:`OUTPUT_TAIL_CHARS` characters one attempt of the job wrote to ``sys.stdout`` and
    ``sys.stderr``, in the order written (see :func:`captured_output`)."""

    def __init__(self, limit: int = OUTPUT_TAIL_CHARS):
        self.limit = limit
        self._text = ""
        self.dropped = 0  #: characters written before the tail

    def write(self, text: str) -> None:
        self._text += text
        if len(self._text) > self.limit * 2:
            self.dropped += len(self._text) - self.limit
            self._text = self._text[-self.limit:]

    @property
    def text(self) -> str:
        """The tail, UTF-8 encodable and credentials scrubbed (:mod:`~scheduler_dedup.handler.core.safe_text`),
        at most ``limit`` characters; ``""`` when the job wrote nothing."""
        text, dropped = self._text[-self.limit:], self.dropped + max(0, len(self._text) - self.limit)
        text = scrub_secrets(utf8_safe(text))
        return f"[{dropped} earlier characters not kept]\n{text}" if dropped and text else text


class _ThreadTee(io.TextIOBase):
    """Stands in for ``sys.stdout``/``sys.stderr``: every write goes on to the real stream (the handler's log),
    scrubbed as every log line is (:func:`~scheduler_dedup.handler.core.safe_text.scrub_secrets`: a secret value the
    job prints never reaches the log), and is also kept in the :class:`OutputTail` of the thread that wrote it, if it
    captures."""

    def __init__(self, stream: TextIO, tails: dict[int, OutputTail]):
        self.stream = stream
        self.tails = tails

    def write(self, text: str) -> int:
        tail = self.tails.get(threading.get_ident())
        if tail is not None:
            tail.write(text)
        self.stream.write(scrub_secrets(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


_TAILS: dict[int, OutputTail] = {}
_INSTALL_LOCK = threading.Lock()


@contextmanager
def captured_output(tail: OutputTail) -> Iterator[OutputTail]:
    """Keep what the current thread writes to ``sys.stdout`` and ``sys.stderr`` in ``tail`` while the block runs;
    the writes still reach the real streams. Per thread, so concurrent deliveries keep apart; output of
    threads or subprocesses the job starts itself is not kept."""
    with _INSTALL_LOCK:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if not isinstance(stream, _ThreadTee) and stream is not None:
                setattr(sys, name, _ThreadTee(stream, _TAILS))
    ident = threading.get_ident()
    _TAILS[ident] = tail
    try:
        yield tail
    finally:
        _TAILS.pop(ident, None)
