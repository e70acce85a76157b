"""The Cloud Run job target (``projects/P/locations/L/jobs/J``): one execution per run.

The job runs with the container env overrides ``DEDUP_RUN_ID=<run id>`` and its data interval,
``DEDUP_PREVIOUS_SCHEDULE_TIME`` and ``DEDUP_SCHEDULE_TIME``. ``jobs.run`` takes no labels and
``executions.list`` no filter, so before running, the target pages through the newest executions
(:data:`CLOUD_RUN_SCAN_PAGES` pages of 100) for that override; one found that has not failed or been cancelled stands for the run. The job should still
treat ``DEDUP_RUN_ID`` as an idempotency token (docs/targets-and-auth.md). API:
https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs/run
"""

from __future__ import annotations

import logging
from typing import Any

from scheduler_dedup.handler.core.downstream import DownstreamExecution
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.targets.executions import reusable
from scheduler_dedup.handler.targets.call import (CheckRefused, HttpSession, call, check_skipped, first_listed,
                                                   json_object, previous_rfc3339, rfc3339)
from scheduler_dedup.handler.targets.settings import DEFAULT_RUN_API, DEFAULT_TIMEOUT_SECONDS

log = logging.getLogger("scheduler_dedup")

#: Env override carrying the run id into a Cloud Run job's containers.
RUN_ID_ENV = "DEDUP_RUN_ID"
#: Env overrides carrying the run's data interval ``[previous schedule time, schedule time)``, RFC 3339 UTC (the
#: previous one absent for a forced run).
SCHEDULE_TIME_ENV, PREVIOUS_SCHEDULE_TIME_ENV = "DEDUP_SCHEDULE_TIME", "DEDUP_PREVIOUS_SCHEDULE_TIME"
#: Pages of 100 executions the Cloud Run job target scans for an earlier execution of a run.
CLOUD_RUN_SCAN_PAGES = 3


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
            return json_object(call(self.session, "GET", url, self.timeout, "Cloud Run executions.list", "cloud_run_job",
                               existence_check=True, params=params), "list")

        def carries_run_id(execution: dict[str, Any]) -> bool:
            containers = (execution.get("template") or {}).get("containers") or []
            return reusable("cloud_run_job", execution) and any(
                env.get("name") == RUN_ID_ENV and env.get("value") == run_id
                for container in containers for env in container.get("env") or [])

        found = first_listed(page, "executions", carries_run_id, CLOUD_RUN_SCAN_PAGES)
        return str(found.get("name")) if found is not None else None

    def __call__(self, run: ScheduledRun) -> DownstreamExecution:
        """Run the job, or find the execution already started for ``run``.

        Returns:
            ``{"target": "cloud_run_job", "operation": name or None, "execution": name or None,
            "status_code": int, "existing": bool}``.

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`~scheduler_dedup.handler.targets.call.call`.
        """
        try:
            existing = self._existing(run.run_id)
        except CheckRefused as exc:  # e.g. 403 on list: the check is best-effort, the run must still start
            check_skipped(run, exc)
            existing = None
        if existing is not None:
            log.warning("Cloud Run job execution for this run already exists; not running another",
                        extra={LogField.RUN_ID: run.run_id, LogField.EXECUTION: existing})
            return DownstreamExecution("cloud_run_job", {"target": "cloud_run_job", "operation": None,
                                                         "execution": existing, "status_code": 200, "existing": True})
        env = [{"name": RUN_ID_ENV, "value": run.run_id}, {"name": SCHEDULE_TIME_ENV, "value": rfc3339(run)}]
        previous = previous_rfc3339(run)
        if previous is not None:
            env.append({"name": PREVIOUS_SCHEDULE_TIME_ENV, "value": previous})
        body = {"overrides": {"containerOverrides": [{"env": env}]}}
        response = call(self.session, "POST", f"{self.api}/v2/{self.job}:run", self.timeout, "Cloud Run jobs.run",
                         "cloud_run_job", json=body)
        operation = json_object(response, "run")
        return DownstreamExecution("cloud_run_job", {"target": "cloud_run_job", "operation": operation.get("name"),
                                                     "execution": (operation.get("metadata") or {}).get("name"),
                                                     "status_code": response.status_code, "existing": False})
