"""Proxy targets: start a Workflows execution, run a Cloud Run job or a Cloud Build trigger, or call an HTTP endpoint, once per run.

Each target is a :data:`~scheduler_dedup.handler.protocol.job.Job` (a callable taking a
:class:`ScheduledRun`), so the Scheduler handler runs it after the claim, exactly as it runs user
code. The target is chosen by ``DEDUP_TARGET_TYPE`` and ``DEDUP_TARGET`` (:class:`~scheduler_dedup.handler.targets.settings.TargetSettings`).

Classification of the downstream answer: one table per target type,
:data:`scheduler_dedup.handler.targets.answers.TABLE` (the reference page docs/reference/http-answers.md shows it):

- 2xx: the run is **completed**; the result names the downstream execution (execution or
  operation name) and the HTTP status code.
- 401, 403, 408, 409, 429, 5xx, a timeout (``DEDUP_TARGET_TIMEOUT_SECONDS``, default 30 s, for the whole call:
  connect, headers and body, :mod:`~scheduler_dedup.handler.core.deadline`) or a connection error: **retryable**:
  :class:`TargetRetryableError` is raised, so the claim is released, the handler answers 500 and Cloud Scheduler's
  retry config delivers again. POSTs are never retried blindly here.
- 3xx, 400, 404, 422 and other 4xx: :class:`NonRetryableJobError`: the run is recorded ``failed``.

A retryable failure may hide a downstream start whose response was lost (a timeout after the
request arrived, a reset connection). The claim is then *released* (the record is deleted), so the
next delivery claims the run afresh: it is not a takeover and the handler cannot tell it apart from
a first delivery. So the targets that can look for an earlier execution look **on every call**,
not only on a takeover; it costs one list call per run.

What each target guarantees:

- **Workflows** (``projects/P/locations/L/workflows/W``): the execution is created with the label
  ``dedup_run_id`` = the first 63 characters of the run id (label values are at most 63
  characters, 252 bits of the run id) and the full run id in its ``argument``. Before creating one,
  the proxy lists executions with ``filter=labels.dedup_run_id="..."``; an existing one (in any
  state) completes the run without starting another. Cannot guarantee: an execution deleted by
  Workflows' retention (executions are kept for a limited time), or one created by a request still
  in flight when the list ran (only possible if two attempts overlap, which the lease prevents
  unless an attempt outlives its lease). Downstream steps should still use ``run_id`` from the
  argument as their own idempotency token.
  API: https://cloud.google.com/workflows/docs/reference/executions/rest/v1/projects.locations.workflows.executions/create
  and .../executions/list (``filter`` supports ``label``, AIP-160).
- **Cloud Run job** (``projects/P/locations/L/jobs/J``): the job runs with the container env
  override ``DEDUP_RUN_ID=<run id>``. ``jobs.run`` accepts no labels and ``executions.list`` has
  no filter, so before running the proxy pages through the newest executions (at most
  :data:`CLOUD_RUN_SCAN_PAGES` pages of 100) and looks for that override in each execution's
  ``template.containers[].env``. Cannot guarantee: an execution older than that window or
  deleted, or a run whose execution is not yet listed (the operation is created before the
  execution shows up). The job itself should treat ``DEDUP_RUN_ID`` as an idempotency token
  (e.g. with :func:`~scheduler_dedup.handler.idempotent`).
  API: https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs/run and
  https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs.executions/list
- **Cloud Build trigger** (``projects/P/locations/L/triggers/T``, ``T`` the trigger's id or name): the trigger
  runs with the substitution ``_DEDUP_RUN_ID=<run id>`` (``triggers.run`` with ``source.substitutions``). Before
  running it, the proxy resolves the trigger's id (``triggers.get``, once per instance) and lists the builds of
  that trigger created since the run could have started (``builds.list`` with
  ``filter=trigger_id="ID" AND create_time>="..."``: the schedule time minus
  :data:`CLOUD_BUILD_CLOCK_SKEW_SECONDS` for a scheduled run; for a forced run, whose schedule time is not when
  it started, now minus :data:`CLOUD_BUILD_MANUAL_LOOKBACK_SECONDS`), newest first, at most
  :data:`CLOUD_BUILD_SCAN_PAGES` pages of 100, and looks for one whose ``substitutions`` carry the run id; an
  existing build in any status completes the run without running the trigger again (the handler starts builds,
  it does not wait for them). Cannot guarantee: a build deleted or outside the scan, or one created by a request
  still in flight when the list ran (only if two attempts overlap). The trigger's build config must use
  ``$_DEDUP_RUN_ID`` (or allow loose substitutions, ``options.substitutionOption: ALLOW_LOOSE``): Cloud Build
  refuses a substitution the config does not use. Steps with side effects should deduplicate on it.
  API: https://cloud.google.com/build/docs/api/reference/rest/v1/projects.locations.triggers/run,
  https://cloud.google.com/build/docs/api/reference/rest/v1/projects.locations.triggers/get and
  https://cloud.google.com/build/docs/api/reference/rest/v1/projects.locations.builds/list (filter syntax:
  https://cloud.google.com/build/docs/view-build-results#filtering_build_results_using_queries).
- **HTTP** (an ``https://`` URL): POSTs ``{"run_id", "job_name", "schedule_time"}`` with the header
  ``Idempotency-Key: <run id>`` and a Google-signed ID token whose audience is
  ``DEDUP_TARGET_AUDIENCE``, by default :func:`scheduler_dedup.handler.callers.audience.target_audience` (the origin
  of a ``*.run.app`` URL, the full function URL on ``*.cloudfunctions.net``). The proxy cannot see the endpoint's state: a retry after a lost
  response calls again with the same key, and only an endpoint that deduplicates on
  ``Idempotency-Key`` (e.g. with ``@idempotent``) runs once. The run's result is the status code; the answer's
  body is never read. The URL is recorded, answered and logged as scheme, host and a hash of the rest
  (:func:`~scheduler_dedup.handler.core.safe_text.shown_url`): a webhook URL's path is its secret.
  Token: https://googleapis.dev/python/google-auth/latest/reference/google.oauth2.id_token.html
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import requests

from scheduler_dedup.handler.callers.audience import target_audience
from scheduler_dedup.handler.targets.answers import TargetType, answer_summary, classify, existence_check_refused
from scheduler_dedup.handler.core.deadline import read_bounded, total_deadline, with_total_deadline
from scheduler_dedup.handler.core.errors import NonRetryableJobError
from scheduler_dedup.handler.protocol.job import Job, ScheduledRun
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.safe_text import hide_url, scrub_secrets
from scheduler_dedup.handler.targets.google_api import google_api_session
from scheduler_dedup.handler.targets.settings import (BUILD_TRIGGER_RE, DEFAULT_CLOUD_BUILD_API, DEFAULT_RUN_API,
                                                      DEFAULT_TIMEOUT_SECONDS, DEFAULT_WORKFLOWS_API, TargetSettings)

log = logging.getLogger("scheduler_dedup")

#: Label key on Workflows executions holding the first 63 characters of the run id.
RUN_ID_LABEL = "dedup_run_id"
#: Env override carrying the run id into a Cloud Run job's containers.
RUN_ID_ENV = "DEDUP_RUN_ID"
#: Pages of 100 executions the Cloud Run job target scans for an earlier execution of a run.
CLOUD_RUN_SCAN_PAGES = 3
#: User-defined substitution carrying the run id into a Cloud Build trigger's build (user substitutions start
#: with ``_`` and use upper-case letters, digits and ``_``: https://cloud.google.com/build/docs/configuring-builds/substitute-variable-values).
RUN_ID_SUBSTITUTION = "_DEDUP_RUN_ID"
#: Pages of 100 builds (of the one trigger, in the run's time window) the Cloud Build target scans.
CLOUD_BUILD_SCAN_PAGES = 3
#: Seconds before a scheduled run's schedule time that its build may carry as ``createTime`` (clock skew).
CLOUD_BUILD_CLOCK_SKEW_SECONDS = 300
#: Seconds back from now that a forced run's builds are looked for (its schedule time is not when it started).
CLOUD_BUILD_MANUAL_LOOKBACK_SECONDS = 86400
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
    return run.schedule_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


class _CheckRefused(Exception):
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


def _call(session: HttpSession, method: str, url: str, timeout: float, what: str, target_type: TargetType,
          *, existence_check: bool = False, body_limit: int = MAX_API_ANSWER_BYTES,
          **kwargs: Any) -> DownstreamAnswer:
    """One HTTP call, classified by :func:`scheduler_dedup.handler.targets.answers.classify`: returns a 2xx answer, or raises.

    The call, its body included, ends within ``timeout`` seconds in all
    (:func:`~scheduler_dedup.handler.core.deadline.total_deadline`), and reads at most ``body_limit`` bytes of a
    2xx body (:data:`MAX_ERROR_ANSWER_BYTES` of any other), closing the connection on the rest.

    Args:
        timeout: seconds the whole call may take: connect, send, status line, headers and the body read.
        existence_check: the call is the pre-start ``list`` call; a refused one raises ``_CheckRefused``, as does a
            2xx answer larger than ``body_limit`` (no list can be judged from a part of it).
        body_limit: bytes of a 2xx body to read; 0 reads none (only the status is used).

    Raises:
        TargetRetryableError: no complete answer within ``timeout``, a connection error, or a status the table
            retries (401, 403, 408, 409, 429, 5xx).
        NonRetryableJobError: a status the table records failed (3xx, 400, 404, 422, other 4xx).
    """
    with total_deadline(timeout) as watch:
        try:
            # No redirects: requests would turn a POST into a body-less GET on 301/302/303 and the
            # run would be recorded done though the target never got it. A 3xx is a failure instead.
            response = with_total_deadline(session).request(method, url, timeout=timeout, allow_redirects=False,
                                                            stream=True, **kwargs)
        except requests.RequestException as exc:
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
                raise _CheckRefused(f"{what}: HTTP {status}, an answer larger than {body_limit} bytes or cut off")
            log.warning("%s: HTTP %s, an answer larger than %s bytes or cut off: its names are not recorded", what,
                        status, body_limit, extra={LogField.HTTP_STATUS: status})
        return got
    if existence_check and existence_check_refused(status):
        raise _CheckRefused(f"{what}: HTTP {status}")
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
    raise NonRetryableJobError(message)


def _json(answer: DownstreamAnswer, what: str) -> dict[str, Any]:
    """The JSON object of a complete answer's body, else ``{}``."""
    if not answer.complete:
        return {}
    try:
        body = json.loads(answer.body)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _first_listed(page: Callable[[str], dict[str, Any]], key: str, matches: Callable[[dict[str, Any]], bool],
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


def _check_skipped(run: ScheduledRun, exc: Exception) -> None:
    """Log that the look-up for an existing execution was refused and the run starts anyway.

    A missing list permission must not turn every run into a recorded failure: the check is a
    safety net for lost responses, and the downstream's own dedup on the run id is the last line.
    """
    log.warning("cannot check for an existing execution (%s); starting one", exc,
                extra={LogField.RUN_ID: run.run_id, LogField.OUTCOME: "existence_check_skipped"})


class WorkflowsTarget:
    """Start one execution of a workflow per run (see the module docstring for the guarantee).

    Args:
        workflow: ``projects/P/locations/L/workflows/W``.
        session: an authorized session (``AuthorizedSession`` with the cloud-platform scope).
        api: Workflows Executions API base URL, no trailing slash.
        timeout_seconds: timeout of each call, seconds.
    """

    def __init__(self, workflow: str, session: HttpSession, api: str = DEFAULT_WORKFLOWS_API,
                 timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        self.workflow, self.session, self.api, self.timeout = workflow, session, api, timeout_seconds

    def __call__(self, run: ScheduledRun) -> dict[str, Any]:
        """Start the execution, or find the one already started for ``run``.

        Returns:
            ``{"target": "workflows", "execution": name, "status_code": int, "existing": bool}``.

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`_call`.
        """
        url = f"{self.api}/v1/{self.workflow}/executions"
        label = run.run_id[:63]
        try:
            listed = _call(self.session, "GET", url, self.timeout, "Workflows executions.list", "workflows",
                           existence_check=True, params={"filter": f'labels.{RUN_ID_LABEL}="{label}"', "pageSize": 10})
        except _CheckRefused as exc:  # e.g. 400 on the filter: the check is best-effort, the run must still start
            _check_skipped(run, exc)
            listed = None
        executions = _json(listed, "list").get("executions", []) if listed is not None else []
        for execution in executions:
            if listed is not None and (execution.get("labels") or {}).get(RUN_ID_LABEL) == label:
                log.warning("workflow execution for this run already exists; not starting another",
                            extra={LogField.RUN_ID: run.run_id, LogField.EXECUTION: execution.get("name")})
                return {"target": "workflows", "execution": execution.get("name"),
                        "status_code": listed.status_code, "existing": True}
        argument = json.dumps({"run_id": run.run_id, "job_name": run.job_name, "schedule_time": rfc3339(run),
                               "attempt_id": run.attempt_id})
        created = _call(self.session, "POST", url, self.timeout, "Workflows executions.create", "workflows",
                        json={"argument": argument, "labels": {RUN_ID_LABEL: label}})
        return {"target": "workflows", "execution": _json(created, "create").get("name"),
                "status_code": created.status_code, "existing": False}


class CloudRunJobTarget:
    """Run a Cloud Run job once per run, with ``DEDUP_RUN_ID`` in its env (see the module docstring).

    Args:
        job: ``projects/P/locations/L/jobs/J``.
        session: an authorized session (cloud-platform scope).
        api: Cloud Run Admin API base URL, no trailing slash.
        timeout_seconds: timeout of each call, seconds.
    """

    def __init__(self, job: str, session: HttpSession, api: str = DEFAULT_RUN_API,
                 timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        self.job, self.session, self.api, self.timeout = job, session, api, timeout_seconds

    def _existing(self, run_id: str) -> str | None:
        url = f"{self.api}/v2/{self.job}/executions"

        def page(token: str) -> dict[str, Any]:
            params: dict[str, Any] = {"pageSize": 100, **({"pageToken": token} if token else {})}
            return _json(_call(self.session, "GET", url, self.timeout, "Cloud Run executions.list", "cloud_run_job",
                               existence_check=True, params=params), "list")

        def carries_run_id(execution: dict[str, Any]) -> bool:
            containers = (execution.get("template") or {}).get("containers") or []
            return any(env.get("name") == RUN_ID_ENV and env.get("value") == run_id
                       for container in containers for env in container.get("env") or [])

        found = _first_listed(page, "executions", carries_run_id, CLOUD_RUN_SCAN_PAGES)
        return str(found.get("name")) if found is not None else None

    def __call__(self, run: ScheduledRun) -> dict[str, Any]:
        """Run the job, or find the execution already started for ``run``.

        Returns:
            ``{"target": "cloud_run_job", "operation": name or None, "execution": name or None,
            "status_code": int, "existing": bool}``.

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`_call`.
        """
        try:
            existing = self._existing(run.run_id)
        except _CheckRefused as exc:  # e.g. 403 on list: the check is best-effort, the run must still start
            _check_skipped(run, exc)
            existing = None
        if existing is not None:
            log.warning("Cloud Run job execution for this run already exists; not running another",
                        extra={LogField.RUN_ID: run.run_id, LogField.EXECUTION: existing})
            return {"target": "cloud_run_job", "operation": None, "execution": existing, "status_code": 200,
                    "existing": True}
        body = {"overrides": {"containerOverrides": [{"env": [{"name": RUN_ID_ENV, "value": run.run_id}]}]}}
        response = _call(self.session, "POST", f"{self.api}/v2/{self.job}:run", self.timeout, "Cloud Run jobs.run",
                         "cloud_run_job", json=body)
        operation = _json(response, "run")
        return {"target": "cloud_run_job", "operation": operation.get("name"),
                "execution": (operation.get("metadata") or {}).get("name"), "status_code": response.status_code,
                "existing": False}


def cloud_build_trigger_parts(trigger: str) -> tuple[str, str]:
    """``(project, trigger id or name)`` of a trigger resource name ``projects/P/locations/L/triggers/T``.

    Raises:
        ValueError: not such a name.
    """
    match = BUILD_TRIGGER_RE.match(trigger)
    if match is None:
        raise ValueError(f"{trigger!r} is not projects/P/locations/L/triggers/T")
    return match.group("project"), match.group("trigger")


class CloudBuildTriggerTarget:
    """Run a Cloud Build trigger once per run, with ``_DEDUP_RUN_ID`` as a substitution (see the module docstring).

    Args:
        trigger: ``projects/P/locations/L/triggers/T`` (``T`` the trigger's id or name).
        session: an authorized session (cloud-platform scope).
        api: Cloud Build API base URL, no trailing slash.
        timeout_seconds: timeout of each call, seconds.
        clock: returns now as an aware UTC datetime (tests pass a fixed one).
    """

    def __init__(self, trigger: str, session: HttpSession, api: str = DEFAULT_CLOUD_BUILD_API,
                 timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)):
        self.trigger, self.session, self.api, self.timeout, self.clock = trigger, session, api, timeout_seconds, clock
        self.project, self.trigger_ref = cloud_build_trigger_parts(trigger)
        self.parent = trigger.rsplit("/triggers/", 1)[0]
        self._trigger_id: str | None = None

    def _resolved_trigger_id(self) -> str:
        """The trigger's id (builds carry ``buildTriggerId``, never the trigger's name): ``triggers.get`` once."""
        if self._trigger_id is None:
            got = _json(_call(self.session, "GET", f"{self.api}/v1/{self.trigger}", self.timeout,
                              "Cloud Build triggers.get", "cloud_build_trigger", existence_check=True), "get")
            trigger_id = str(got.get("id") or "")
            if not trigger_id:
                raise _CheckRefused("Cloud Build triggers.get: the answer has no trigger id")
            self._trigger_id = trigger_id
        return self._trigger_id

    def _window_start(self, run: ScheduledRun) -> datetime:
        if run.manual:
            return self.clock() - timedelta(seconds=CLOUD_BUILD_MANUAL_LOOKBACK_SECONDS)
        return run.schedule_time - timedelta(seconds=CLOUD_BUILD_CLOCK_SKEW_SECONDS)

    def _existing(self, run: ScheduledRun) -> dict[str, Any] | None:
        trigger_id = self._resolved_trigger_id()
        since = self._window_start(run).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        query = f'trigger_id="{trigger_id}" AND create_time>="{since}"'
        url = f"{self.api}/v1/{self.parent}/builds"

        def page(token: str) -> dict[str, Any]:
            params: dict[str, Any] = {"projectId": self.project, "filter": query, "pageSize": 100,
                                      **({"pageToken": token} if token else {})}
            return _json(_call(self.session, "GET", url, self.timeout, "Cloud Build builds.list",
                               "cloud_build_trigger", existence_check=True, params=params), "list")

        def carries_run_id(build: dict[str, Any]) -> bool:
            return ((build.get("substitutions") or {}).get(RUN_ID_SUBSTITUTION) == run.run_id
                    and build.get("buildTriggerId") in (None, trigger_id))

        return _first_listed(page, "builds", carries_run_id, CLOUD_BUILD_SCAN_PAGES)

    def __call__(self, run: ScheduledRun) -> dict[str, Any]:
        """Run the trigger, or find the build already started for ``run``.

        Returns:
            ``{"target": "cloud_build_trigger", "operation": name or None, "build": build name or id,
            "build_status": Build.Status or None, "status_code": int, "existing": bool}``.

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`_call`.
        """
        try:
            existing = self._existing(run)
        except _CheckRefused as exc:  # e.g. 403 on list: the check is best-effort, the run must still start
            _check_skipped(run, exc)
            existing = None
        if existing is not None:
            name = existing.get("name") or existing.get("id")
            log.warning("Cloud Build build for this run already exists; not running the trigger again",
                        extra={LogField.RUN_ID: run.run_id, LogField.EXECUTION: name})
            return {"target": "cloud_build_trigger", "operation": None, "build": name,
                    "build_status": existing.get("status"), "status_code": 200, "existing": True}
        body = {"projectId": self.project, "triggerId": self.trigger_ref,
                "source": {"projectId": self.project, "substitutions": {RUN_ID_SUBSTITUTION: run.run_id}}}
        response = _call(self.session, "POST", f"{self.api}/v1/{self.trigger}:run", self.timeout,
                         "Cloud Build triggers.run", "cloud_build_trigger", json=body)
        operation = _json(response, "run")
        build = (operation.get("metadata") or {}).get("build") or {}
        return {"target": "cloud_build_trigger", "operation": operation.get("name"),
                "build": build.get("name") or build.get("id"), "build_status": build.get("status"),
                "status_code": response.status_code, "existing": False}


class IdTokenSource:
    """Google-signed ID tokens for one audience, cached until 5 minutes before they expire.

    Uses ``google.oauth2.id_token.fetch_id_token`` (metadata server on Cloud Run, or a service
    account key file): https://googleapis.dev/python/google-auth/latest/reference/google.oauth2.id_token.html

    Raises (from :meth:`token`):
        google.auth.exceptions.DefaultCredentialsError: no credentials can mint ID tokens.
    """

    def __init__(self, audience: str):
        self.audience = audience
        self._lock = threading.Lock()
        self._token = ""
        self._expires = 0.0

    def token(self) -> str:
        with self._lock:
            if time.time() < self._expires - 300:
                return self._token
            import google.auth.jwt
            import google.auth.transport.requests
            import google.oauth2.id_token

            token = google.oauth2.id_token.fetch_id_token(google.auth.transport.requests.Request(), self.audience)
            claims = google.auth.jwt.decode(token, verify=False)
            self._token, self._expires = token, float(claims.get("exp", 0))
            return token


class HttpTarget:
    """POST to a URL once per run with ``Idempotency-Key: <run id>`` (see the module docstring).

    Args:
        url: the endpoint.
        session: a plain session (the ID token is added per call).
        token: returns the bearer ID token, or None for no ``Authorization`` header (tests).
        timeout_seconds: timeout of the call, seconds.
    """

    def __init__(self, url: str, session: HttpSession, token: Callable[[], str] | None,
                 timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        self.url, self.session, self.token, self.timeout = url, session, token, timeout_seconds
        self.shown_url = hide_url(url)  # from now on no text of this process shows the URL whole

    def __call__(self, run: ScheduledRun) -> dict[str, Any]:
        """Call the endpoint.

        Returns:
            ``{"target": "http", "url": shown URL, "status_code": int}``; the URL as
            :func:`~scheduler_dedup.handler.core.safe_text.shown_url` shows it (scheme, host, a hash of the rest).

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`_call`.
        """
        headers = {"Idempotency-Key": run.run_id}
        if self.token is not None:
            try:
                headers["Authorization"] = f"Bearer {self.token()}"
            except Exception as exc:  # metadata server hiccup: retry later, do not record failed
                raise TargetRetryableError("could not mint an ID token for the HTTP target: "
                                           f"{scrub_secrets(repr(exc))[:200]}") from exc
        body = {"run_id": run.run_id, "job_name": run.job_name, "schedule_time": rfc3339(run)}
        response = _call(self.session, "POST", self.url, self.timeout, f"POST {self.shown_url}", "http", json=body,
                         headers=headers, body_limit=0)  # only the status is used: the body is never read
        return {"target": "http", "url": self.shown_url, "status_code": response.status_code}


def build_target(settings: TargetSettings, session: HttpSession | None = None) -> Job:
    """The :data:`Job` for a non-``python`` target.

    Args:
        settings: the target settings.
        session: the HTTP session to use; by default an ``AuthorizedSession`` on
            ``google.auth.default()`` for Google APIs (a plain ``requests.Session`` with
            ``DEDUP_TARGET_AUTH=none``, or for the HTTP target, which adds its ID token itself).

    Raises:
        ValueError: ``settings.type`` is ``python``.
        google.auth.exceptions.DefaultCredentialsError: no Application Default Credentials.
    """
    if settings.type == "http":
        audience = settings.audience or target_audience(settings.target)
        token = None if settings.auth == "none" else IdTokenSource(audience).token
        return HttpTarget(settings.target, session or requests.Session(), token, settings.timeout_seconds)
    if session is None:
        session = google_api_session(settings.auth)
    if settings.type == "workflows":
        return WorkflowsTarget(settings.target, session, settings.workflows_api, settings.timeout_seconds)
    if settings.type == "cloud_run_job":
        return CloudRunJobTarget(settings.target, session, settings.run_api, settings.timeout_seconds)
    if settings.type == "cloud_build_trigger":
        return CloudBuildTriggerTarget(settings.target, session, settings.cloud_build_api, settings.timeout_seconds)
    raise ValueError(f"target type {settings.type!r} has no proxy target: load DEDUP_JOB instead")
