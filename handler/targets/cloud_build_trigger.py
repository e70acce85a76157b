"""The Cloud Build trigger target (``projects/P/locations/L/triggers/T``, ``T`` its id or name): one build per run.

The trigger runs with the substitution ``_DEDUP_RUN_ID=<run id>``, and with the run's data interval
(``_DEDUP_PREVIOUS_SCHEDULE_TIME``, ``_DEDUP_SCHEDULE_TIME``) when the trigger declares those substitutions: under the
default ``MUST_MATCH`` a substitution the build config does not use fails the build (``BuildOptions.substitutionOption``). Before running it, the target resolves the
trigger's id (``triggers.get``, once per instance) and lists that trigger's builds created since the run could have
started (from the schedule time less :data:`CLOUD_BUILD_CLOCK_SKEW_SECONDS`; for a forced run, from
:data:`CLOUD_BUILD_MANUAL_LOOKBACK_SECONDS` before now), newest first; a build carrying the run id, in any status,
holds the run until it ends (the run check reads it, :mod:`.executions`). The trigger's config must use
``$_DEDUP_RUN_ID`` (docs/targets-and-auth.md). API: https://cloud.google.com/build/docs/api/reference/rest/v1/projects.locations.triggers/run
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from scheduler_dedup.handler.core.downstream import DownstreamExecution
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.targets.executions import reusable
from scheduler_dedup.handler.targets.call import (CheckRefused, HttpSession, call, check_skipped, first_listed,
                                                   json_object, previous_rfc3339, rfc3339)
from scheduler_dedup.handler.targets.settings import BUILD_TRIGGER_RE, DEFAULT_CLOUD_BUILD_API, DEFAULT_TIMEOUT_SECONDS

log = logging.getLogger("scheduler_dedup")

#: User-defined substitution carrying the run id into a Cloud Build trigger's build (user substitutions start
#: with ``_`` and use upper-case letters, digits and ``_``: https://cloud.google.com/build/docs/configuring-builds/substitute-variable-values).
RUN_ID_SUBSTITUTION = "_DEDUP_RUN_ID"
#: Substitutions carrying the run's data interval, sent only to a trigger that declares them (module docstring).
SCHEDULE_TIME_SUBSTITUTION, PREVIOUS_SCHEDULE_TIME_SUBSTITUTION = "_DEDUP_SCHEDULE_TIME", "_DEDUP_PREVIOUS_SCHEDULE_TIME"
#: Pages of 100 builds (of the one trigger, in the run's time window) the Cloud Build target scans.
CLOUD_BUILD_SCAN_PAGES = 3
#: Seconds before a scheduled run's schedule time that its build may carry as ``createTime`` (clock skew).
CLOUD_BUILD_CLOCK_SKEW_SECONDS = 300
#: Seconds back from now that a forced run's builds are looked for (its schedule time is not when it started).
CLOUD_BUILD_MANUAL_LOOKBACK_SECONDS = 86400


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
        self._declared: frozenset[str] = frozenset()  # the trigger's own substitutions' names

    def _resolved_trigger_id(self) -> str:
        """The trigger's id (builds carry ``buildTriggerId``, never the trigger's name): ``triggers.get`` once."""
        if self._trigger_id is None:
            got = json_object(call(self.session, "GET", f"{self.api}/v1/{self.trigger}", self.timeout,
                              "Cloud Build triggers.get", "cloud_build_trigger", existence_check=True), "get")
            trigger_id = str(got.get("id") or "")
            if not trigger_id:
                raise CheckRefused("Cloud Build triggers.get: the answer has no trigger id")
            self._trigger_id = trigger_id
            self._declared = frozenset(got.get("substitutions") or {})
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
            return json_object(call(self.session, "GET", url, self.timeout, "Cloud Build builds.list",
                               "cloud_build_trigger", existence_check=True, params=params), "list")

        def carries_run_id(build: dict[str, Any]) -> bool:
            return ((build.get("substitutions") or {}).get(RUN_ID_SUBSTITUTION) == run.run_id
                    and build.get("buildTriggerId") in (None, trigger_id) and reusable("cloud_build_trigger", build))

        return first_listed(page, "builds", carries_run_id, CLOUD_BUILD_SCAN_PAGES)

    def _substitutions(self, run: ScheduledRun) -> dict[str, str]:
        """The run id, and the data interval's bounds the trigger declares (known once ``triggers.get`` answered)."""
        interval = {SCHEDULE_TIME_SUBSTITUTION: rfc3339(run), PREVIOUS_SCHEDULE_TIME_SUBSTITUTION: previous_rfc3339(run)}
        return {RUN_ID_SUBSTITUTION: run.run_id,
                **{name: value for name, value in interval.items() if name in self._declared and value is not None}}

    def __call__(self, run: ScheduledRun) -> DownstreamExecution:
        """Run the trigger, or find the build already started for ``run``.

        Returns:
            ``{"target": "cloud_build_trigger", "operation": name or None, "build": build name or id,
            "build_status": Build.Status or None, "status_code": int, "existing": bool}``.

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`~scheduler_dedup.handler.targets.call.call`.
        """
        try:
            existing = self._existing(run)
        except CheckRefused as exc:  # e.g. 403 on list: the check is best-effort, the run must still start
            check_skipped(run, exc)
            existing = None
        if existing is not None:
            name = existing.get("name") or existing.get("id")
            log.warning("Cloud Build build for this run already exists; not running the trigger again",
                        extra={LogField.RUN_ID: run.run_id, LogField.EXECUTION: name})
            return DownstreamExecution("cloud_build_trigger", {
                "target": "cloud_build_trigger", "operation": None, "build": name,
                "build_status": existing.get("status"), "status_code": 200, "existing": True})
        body = {"projectId": self.project, "triggerId": self.trigger_ref,
                "source": {"projectId": self.project, "substitutions": self._substitutions(run)}}
        response = call(self.session, "POST", f"{self.api}/v1/{self.trigger}:run", self.timeout,
                         "Cloud Build triggers.run", "cloud_build_trigger", json=body)
        operation = json_object(response, "run")
        build = (operation.get("metadata") or {}).get("build") or {}
        return DownstreamExecution("cloud_build_trigger", {
                "target": "cloud_build_trigger", "operation": operation.get("name"),
                "build": build.get("name") or build.get("id"), "build_status": build.get("status"),
                "status_code": response.status_code, "existing": False})
