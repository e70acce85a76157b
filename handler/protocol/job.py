"""The user's job: the :class:`ScheduledRun` it receives and how it is loaded from ``DEDUP_JOB``."""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler_dedup.handler.core.errors import ConfigError
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
    lease: LeaseKeeper | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, key: RunKey, attempt_id: str) -> "ScheduledRun":
        """The run that ``key`` identifies, as seen by the attempt ``attempt_id``, with the lease of the work
        running in this context (the protocol sets it around the job)."""
        return cls(run_id=key.run_id, job_name=key.job_name, schedule_time=key.schedule_time, project=key.project,
                   location=key.location, attempt_id=attempt_id, manual=key.manual, lease=current_lease.get())

    def lease_remaining_seconds(self) -> float:
        """Seconds left of this attempt's lease, by the store's clock as this instance last observed it.

        0 or less once renewals stopped extending it and it lapsed (a retry may then take the run over and run the
        job beside this attempt), ``-inf`` once another attempt holds the run; ``inf`` for a run without a lease.
        A long job checks it between steps and stops (raise any ``Exception``: the claim is released) before a
        step that takes longer than what is left. See docs/failures.md, "Renewals fail".
        """
        return math.inf if self.lease is None else self.lease.remaining_seconds()

    def lease_holds(self) -> bool:
        """True while this attempt's lease holds (:meth:`lease_remaining_seconds` > 0): no other attempt may
        take the run over. False once it lapsed or was lost: stop before the next side effect."""
        return self.lease_remaining_seconds() > 0


Job = Callable[[ScheduledRun], Any]
_SPEC_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def check_job_spec(spec: str | None, variable: str = "DEDUP_JOB") -> None:
    """Check that ``spec`` is ``module:function`` (e.g. ``jobs:run``), without importing anything.

    Raises:
        ConfigError: the spec is missing or malformed; the message names ``variable`` and the fix.
    """
    if not spec:
        raise ConfigError(f"{variable} is not set: set it to the job callable as module:function, e.g. jobs:run")
    if not _SPEC_RE.match(spec):
        raise ConfigError(f"{variable}={spec!r} is not module:function: use e.g. {variable}=jobs:run")


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
        raise ConfigError(f"{variable}={spec!r}: {module_name} has no callable {attr!r}")
    return job
