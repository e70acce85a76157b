"""The Workflows target (``projects/P/locations/L/workflows/W``): one execution per run.

The execution carries the label ``dedup_run_id`` (the run id's first 63 characters, a label value's limit) and the
full run id in its ``argument``, with the run's data interval (``previous_schedule_time``, ``schedule_time``).
Before creating one, the target lists executions with that label on every call (a lost answer releases the claim, so a
retry looks like a first delivery); one found that has not failed or been cancelled stands for the run (a failed one
stays in the history, and a re-run starts a new one).
What it cannot see (an execution deleted by retention, one whose create is still in flight) is on
docs/targets-and-auth.md. API: https://cloud.google.com/workflows/docs/reference/executions/rest/v1/projects.locations.workflows.executions
"""

from __future__ import annotations

import json
import logging
from typing import Any

from scheduler_dedup.handler.core.downstream import DownstreamExecution
from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.protocol.job import ScheduledRun
from scheduler_dedup.handler.targets.executions import reusable
from scheduler_dedup.handler.targets.call import (CheckRefused, HttpSession, call, check_skipped, json_object,
                                                   previous_rfc3339, rfc3339)
from scheduler_dedup.handler.targets.settings import DEFAULT_TIMEOUT_SECONDS, DEFAULT_WORKFLOWS_API

log = logging.getLogger("scheduler_dedup")

#: Label key on Workflows executions holding the first 63 characters of the run id.
RUN_ID_LABEL = "dedup_run_id"


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

    def __call__(self, run: ScheduledRun) -> DownstreamExecution:
        """Start the execution, or find the one already started for ``run``.

        Returns:
            ``{"target": "workflows", "execution": name, "status_code": int, "existing": bool}``.

        Raises:
            TargetRetryableError, NonRetryableJobError: see :func:`~scheduler_dedup.handler.targets.call.call`.
        """
        url = f"{self.api}/v1/{self.workflow}/executions"
        label = run.run_id[:63]
        try:
            listed = call(self.session, "GET", url, self.timeout, "Workflows executions.list", "workflows",
                           existence_check=True, params={"filter": f'labels.{RUN_ID_LABEL}="{label}"', "pageSize": 10})
        except CheckRefused as exc:  # e.g. 400 on the filter: the check is best-effort, the run must still start
            check_skipped(run, exc)
            listed = None
        executions = json_object(listed, "list").get("executions", []) if listed is not None else []
        for execution in executions:
            if listed is not None and (execution.get("labels") or {}).get(RUN_ID_LABEL) == label \
                    and reusable("workflows", execution):
                log.warning("workflow execution for this run already exists; not starting another",
                            extra={LogField.RUN_ID: run.run_id, LogField.EXECUTION: execution.get("name")})
                return DownstreamExecution("workflows", {"target": "workflows", "execution": execution.get("name"),
                                                         "status_code": listed.status_code, "existing": True})
        argument = json.dumps({"run_id": run.run_id, "job_name": run.job_name, "schedule_time": rfc3339(run),
                               "previous_schedule_time": previous_rfc3339(run), "attempt_id": run.attempt_id})
        created = call(self.session, "POST", url, self.timeout, "Workflows executions.create", "workflows",
                        json={"argument": argument, "labels": {RUN_ID_LABEL: label}})
        name = json_object(created, "create").get("name")
        return DownstreamExecution("workflows", {"target": "workflows", "execution": name,
                                                 "status_code": created.status_code, "existing": False})
