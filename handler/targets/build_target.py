"""The :data:`~scheduler_dedup.handler.protocol.job.Job` a non-``python`` target setting names, and what reads and
cancels the executions it starts (:func:`build_execution_control`)."""

from __future__ import annotations

import requests

from scheduler_dedup.handler.callers.audience import target_audience
from scheduler_dedup.handler.core.downstream import ExecutionControl
from scheduler_dedup.handler.protocol.job import Job
from scheduler_dedup.handler.targets.call import HttpSession
from scheduler_dedup.handler.targets.cloud_build_trigger import CloudBuildTriggerTarget
from scheduler_dedup.handler.targets.cloud_run_job import CloudRunJobTarget
from scheduler_dedup.handler.targets.executions import ExecutionApi
from scheduler_dedup.handler.targets.google_api import google_api_session
from scheduler_dedup.handler.targets.http_url import HttpTarget, IdTokenSource
from scheduler_dedup.handler.targets.settings import TargetSettings
from scheduler_dedup.handler.targets.workflows import WorkflowsTarget


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


def build_execution_control(settings: TargetSettings, session: HttpSession | None = None) -> ExecutionControl | None:
    """What reads and cancels the executions a ``cloud_run_job``, ``workflows`` or ``cloud_build_trigger`` target
    starts (:class:`~scheduler_dedup.handler.targets.executions.ExecutionApi`); None for ``python`` and ``http``.

    Raises:
        google.auth.exceptions.DefaultCredentialsError: no Application Default Credentials.
    """
    if settings.type in ("python", "http"):
        return None
    return ExecutionApi(settings, session or google_api_session(settings.auth))
