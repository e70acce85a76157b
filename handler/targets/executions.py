"""Reading and cancelling the downstream executions the proxy targets start (:class:`ExecutionApi`), one ``get`` and one
``cancel`` per target type, each call bounded by ``DEDUP_TARGET_TIMEOUT_SECONDS`` like a start.

APIs (state words mapped in :data:`_ENDINGS`):

* Cloud Run Admin API v2, ``executions.get`` and ``executions.cancel``:
  https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs.executions/get,
  https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs.executions/cancel; an Execution has
  ``completionTime`` once it ended and a ``Completed`` condition saying how
  (https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs.executions#Execution).
* Workflows Executions API v1, ``executions.get`` and ``executions.cancel``:
  https://cloud.google.com/workflows/docs/reference/executions/rest/v1/projects.locations.workflows.executions/get,
  https://cloud.google.com/workflows/docs/reference/executions/rest/v1/projects.locations.workflows.executions/cancel
  (``state``: QUEUED, ACTIVE, SUCCEEDED, FAILED, CANCELLED, UNAVAILABLE).
* Cloud Build API v1, ``builds.get`` and ``builds.cancel``:
  https://cloud.google.com/build/docs/api/reference/rest/v1/projects.locations.builds/get,
  https://cloud.google.com/build/docs/api/reference/rest/v1/projects.locations.builds/cancel
  (``Build.Status``: https://cloud.google.com/build/docs/api/reference/rest/v1/projects.builds#Build.Status).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from scheduler_dedup.handler.core.downstream import Ending, ExecutionState
from scheduler_dedup.handler.core.errors import NonRetryableJobError
from scheduler_dedup.handler.core.safe_text import scrub_secrets, utf8_safe
from scheduler_dedup.handler.targets.answers import TargetType
from scheduler_dedup.handler.targets.call import HttpSession, NotFoundError, TargetRetryableError, call, json_object
from scheduler_dedup.handler.targets.settings import TargetSettings

#: An execution's or build's id, the one part of a stored name that goes into a URL (Cloud Run execution ids are
#: lower-case letters, digits and ``-``; Workflows ids and Cloud Build build ids are UUIDs).
_EXECUTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
#: Characters of an execution's error message kept in the run record's ``error``.
_DETAIL_CHARS = 500

#: Per target type: the API's state word -> how the execution ended (absent: still running, or not known yet).
_ENDINGS: dict[str, dict[str, Ending]] = {
    "workflows": {"SUCCEEDED": "completed", "FAILED": "failed", "CANCELLED": "cancelled"},
    "cloud_build_trigger": {"SUCCESS": "completed", "FAILURE": "failed", "INTERNAL_ERROR": "failed",
                            "TIMEOUT": "failed", "EXPIRED": "failed", "CANCELLED": "cancelled"},
}


class ExecutionApi:
    """:class:`~scheduler_dedup.handler.core.downstream.ExecutionControl` of one proxy target.

    Args:
        settings: the target settings (type, API base URLs, timeout).
        session: the session the target's own calls go through.
    """

    def __init__(self, settings: TargetSettings, session: HttpSession):
        if settings.type not in ("workflows", "cloud_run_job", "cloud_build_trigger"):
            raise ValueError(f"target type {settings.type!r} starts no execution that can be read")
        self.target = settings.type
        self.session, self.timeout = session, settings.timeout_seconds
        self.base = {"workflows": f"{settings.workflows_api}/v1", "cloud_run_job": f"{settings.run_api}/v2",
                     "cloud_build_trigger": f"{settings.cloud_build_api}/v1"}[settings.type]
        self.own = settings.target
        self.parent = settings.target.rsplit("/triggers/", 1)[0]  # a build given by id alone is under it

    def owns(self, name: str) -> bool:
        """True if ``name`` (as a run record holds it) is an execution of this target (:meth:`_resource`)."""
        return self._resource(name) is not None

    def _resource(self, name: Any) -> str | None:
        """The resource path of execution ``name`` of this target, or None if ``name`` is not one.

        A run record is data: anyone who can write the collection can name any execution in it. So the path is
        built from the handler's own target (``DEDUP_TARGET``) and the execution's id alone; the rest of ``name``
        must say the same target: its location and job / workflow (a build: its trigger's location), and its
        project, or a project number (the APIs may name a project by number: it is not compared, and the URL
        names the target's own project). A name with anything else (``..``, ``?``, ``%``, another job) is None.
        """
        if not isinstance(name, str):
            return None
        parts, own = name.split("/"), self.parent.split("/") if self.target == "cloud_build_trigger" else \
            self.own.split("/")
        if self.target == "cloud_build_trigger":
            if len(parts) == 1:
                parts = [*own, "builds", name]  # a build named by its id
            elif len(parts) == 4 and own[3] == "global":
                parts = [*parts[:2], "locations", "global", *parts[2:]]  # projects/P/builds/ID
        kind = "builds" if self.target == "cloud_build_trigger" else "executions"
        if (len(parts) != len(own) + 2 or parts[0] != "projects" or parts[2:len(own)] != own[2:]
                or parts[-2] != kind or not (parts[1] == own[1] or parts[1].isdigit())
                or not _EXECUTION_ID.fullmatch(parts[-1])):
            return None
        return "/".join([*own, kind, parts[-1]])

    def _own_resource(self, name: str, what: str) -> str:
        resource = self._resource(name)
        if resource is None:
            raise TargetRetryableError(f"{self.target} {what}: {name[:200]!r} is not an execution of {self.own} "
                                       "(DEDUP_TARGET): not called")
        return resource

    def state(self, name: str) -> ExecutionState:
        """The execution's state (``executions.get`` / ``builds.get``).

        Raises:
            TargetRetryableError: ``name`` is not an execution of this target (nothing called); no useful answer
                (timeout, 5xx, 429, 401/403, another 4xx: the record stays as it is); or an answer about another
                execution than the one asked for. A 404 (deleted) is no error: the state ``failed``, ``NOT_FOUND``.
        """
        resource = self._own_resource(name, "get")
        try:
            got = call(self.session, "GET", f"{self.base}/{resource}", self.timeout, f"{self.target} get", self._type)
        except NotFoundError:
            # deleted (the name is the target's own, so it once was there): it runs no more, and nothing tells how
            # it ended; a permission the account lacks answers 403 instead (https://google.aip.dev/211)
            return ExecutionState("failed", "NOT_FOUND: the execution no longer exists (deleted); how it ended "
                                  "cannot be told")
        except NonRetryableJobError as exc:  # 400 and the like: nothing tells how the execution ended
            raise TargetRetryableError(str(exc)) from exc
        body = json_object(got, "get")
        if not body:
            raise TargetRetryableError(f"{self.target} get: the answer is not a JSON object")
        answered = body.get("name") or body.get("id")
        if self._resource(answered) != resource:
            raise TargetRetryableError(f"{self.target} get: asked for {resource}, answered for {str(answered)[:200]!r}")
        return _cloud_run_state(body) if self.target == "cloud_run_job" else _stated(self.target, body)

    def cancel(self, name: str) -> bool:
        """Ask the API to cancel the execution.

        Returns:
            True if the API accepted the cancel (2xx); False if it refused it with a 4xx the table records failed
            (400 FAILED_PRECONDITION: it has already ended, or cannot be cancelled; 404): the caller reads
            :meth:`state` next, which decides.

        Raises:
            TargetRetryableError: ``name`` is not an execution of this target (nothing called); no useful answer
                (timeout, 5xx, 429, 401/403): it may or may not be cancelled.
        """
        resource = self._own_resource(name, "cancel")
        body = {"name": resource} if self.target == "cloud_build_trigger" else {}
        try:
            call(self.session, "POST", f"{self.base}/{resource}:cancel", self.timeout,
                 f"{self.target} cancel", self._type, json=body)
        except NonRetryableJobError:
            return False
        return True

    @property
    def _type(self) -> TargetType:
        return self.target  # type: ignore[return-value]


def reusable(target: str, execution: dict[str, Any]) -> bool:
    """True if an execution a target's existence check found for a run may stand for it: any that has not failed or
    been cancelled. A failed or cancelled one is kept in the history and a new one is started (``runs rerun`` of a
    failed run, or a retry after the answer to a start that then failed was lost)."""
    state = _cloud_run_state(execution) if target == "cloud_run_job" else _stated(target, execution)
    return state.ending not in ("failed", "cancelled")


def _time(value: Any) -> datetime | None:
    """An RFC 3339 time of the API (``2026-10-16T12:00:00.123456789Z``) as aware UTC, or None."""
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    if "." in text:  # nanoseconds: Python reads at most microseconds
        head, _, rest = text.partition(".")
        digits = "".join(c for c in rest if c.isdigit())
        text = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits):]}"
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc)
    except ValueError:
        return None


def _detail(word: str, message: Any) -> str:
    text = scrub_secrets(utf8_safe(str(message))) if message else ""
    return f"{word}: {text}"[:_DETAIL_CHARS] if text else word


def _stated(target: str, body: dict[str, Any]) -> ExecutionState:
    """A Workflows execution's or a Cloud Build build's state from its ``state`` / ``status`` word."""
    if target == "workflows":
        word, start, end = str(body.get("state", "")), body.get("startTime"), body.get("endTime")
        error = body.get("error") or {}
        message = error.get("payload") or error.get("context") if isinstance(error, dict) else None
    else:
        word, start, end = str(body.get("status", "")), body.get("startTime"), body.get("finishTime")
        message = body.get("statusDetail")
    ending = _ENDINGS[target].get(word)
    return ExecutionState(ending, _detail(word, message if ending == "failed" else None), _time(start),
                          _time(end) if ending else None)


def _cloud_run_state(body: dict[str, Any]) -> ExecutionState:
    """A Cloud Run execution's state: running until ``completionTime``; then its ``Completed`` condition (or its task
    counts) says whether it succeeded, failed or was cancelled."""
    start, end = _time(body.get("startTime")), _time(body.get("completionTime"))
    if end is None:
        return ExecutionState(None, "RUNNING", start)
    conditions = body.get("conditions")
    completed = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Completed"), {}) \
        if isinstance(conditions, list) else {}
    if _count(body.get("cancelledCount")) > 0 or completed.get("reason") == "Cancelled":
        return ExecutionState("cancelled", "CANCELLED", start, end)
    if completed.get("state") == "CONDITION_SUCCEEDED" and not _count(body.get("failedCount")):
        return ExecutionState("completed", "SUCCEEDED", start, end)
    message = completed.get("message") or f"{_count(body.get('failedCount'))} task(s) failed"
    return ExecutionState("failed", _detail("FAILED", message), start, end)


def _count(value: Any) -> int:
    """A task count of an answer (a JSON number, or a decimal string as proto3 JSON may write one); anything else
    counts 0, as a field not given."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return int(value) if value == value and abs(value) < 2**63 else 0
    return int(value) if isinstance(value, str) and value.strip().isdigit() else 0
