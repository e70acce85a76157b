"""The Scheduler job's own state, read through the Cloud Scheduler API: a pause made outside the stack.

The component's ``paused`` input tells the handler of a pause (``DEDUP_PAUSED_SINCE``); ``gcloud scheduler jobs
pause`` or the console does not. With ``DEDUP_SCHEDULER_API`` set, the run check reads its own job
(``DEDUP_SCHEDULER_JOB``): ``GET {DEDUP_SCHEDULER_API}/v1/{job}``, whose ``state`` is ``PAUSED`` when "the job is
paused by the user. It will not execute" (REST reference, ``Job.State``), and ``userUpdateTime`` the job's last
update by a user. The pause is dated no earlier than that update nor than the job's newest run (a paused job
delivers nothing), so a run missed before the pause is still missed. The runtime identity needs
``cloudscheduler.jobs.get`` (``roles/cloudscheduler.viewer``, granted on the project: Scheduler has no per-job IAM).

Where it cannot be recognised: without ``DEDUP_SCHEDULER_API`` or that permission (the check then logs a WARNING
and treats the job as running), on App Engine (no watchdog), and in ``scheduler-dedup runs``, which reads records
only (``--paused-since`` tells it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests

from scheduler_dedup.handler.core.deadline import total_deadline, with_total_deadline
from scheduler_dedup.handler.core.safe_text import scrub_secrets

#: How long the API call may take in all (its access token's refresh, connect, headers, body), seconds.
CALL_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class JobState:
    """What the API said of the job.

    Attributes:
        paused: ``state`` is ``PAUSED``.
        updated: ``userUpdateTime``, aware UTC, or None when absent.
        error: why the state could not be read (then ``paused`` is False), or None.
    """

    paused: bool
    updated: datetime | None = None
    error: str | None = None


class JobStateReader:
    """Reads one Scheduler job's state.

    Args:
        job: ``projects/P/locations/L/jobs/J`` (``DEDUP_SCHEDULER_JOB``).
        session: how the API is called (an ``AuthorizedSession`` on the runtime identity; a plain one in tests).
        api: the API's base URL (``DEDUP_SCHEDULER_API``), no trailing slash.
    """

    def __init__(self, job: str, session: requests.Session, api: str) -> None:
        self.job, self.session, self.api = job, session, api

    def __call__(self) -> JobState:
        """The job's state now; never raises (an unreadable state is :attr:`JobState.error`)."""
        # the call, its access token's refresh and its body within CALL_TIMEOUT_SECONDS in all
        with total_deadline(CALL_TIMEOUT_SECONDS):
            try:
                response = with_total_deadline(self.session).get(f"{self.api}/v1/{self.job}",
                                                                 timeout=CALL_TIMEOUT_SECONDS)
                status = response.status_code
                text = response.content if status == 200 else b""
            except requests.RequestException as exc:
                return JobState(False, error=scrub_secrets(f"GET {self.job} failed: {type(exc).__name__}"))
        if status != 200:
            why = " (grant roles/cloudscheduler.viewer to the runtime account)" if status == 403 else ""
            return JobState(False, error=f"GET {self.job} answered {status}{why}")
        try:
            body: Any = json.loads(text)
            updated = body.get("userUpdateTime")
            return JobState(body.get("state") == "PAUSED",
                            datetime.fromisoformat(updated.replace("Z", "+00:00")) if updated else None)
        except (ValueError, AttributeError, TypeError):
            return JobState(False, error=f"GET {self.job} answered a body that is not a Job")
