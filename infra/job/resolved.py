"""The resolved settings of one :class:`~scheduler_dedup.infra.job.component.DedupScheduledJob`: every input with
its default applied (:func:`~scheduler_dedup.infra.job.settings.resolve_settings` makes it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from scheduler_dedup.handler.schedule.retry_windows import APP_ENGINE_TARGET, HTTP_TARGET, RetryPolicy, retry_window_seconds
from scheduler_dedup.infra.job.app_engine import AppEngineSettings
from scheduler_dedup.infra.job.job_config import JobConfig
from scheduler_dedup.infra.job.job_names import JobNames, derive_job_names
from scheduler_dedup.infra.stores.base import StoreRef
from scheduler_dedup.infra.stores.store import DEFAULT_KIND


@dataclass(frozen=True)
class DedupSettings:
    """Every input of the component with its default applied; all durations in whole seconds."""

    name: str
    resource_prefix: str
    project: str
    region: str
    schedule: str
    time_zone: str
    target_type: str  # python | workflows | cloud_run_job | cloud_build_trigger | http
    job: str | None
    job_source: Path | None
    image: str | None
    workflow: pulumi.Input[str] | None
    cloud_run_job: pulumi.Input[str] | None
    cloud_build_trigger: pulumi.Input[str] | None
    cloud_build_service_account_email: pulumi.Input[str] | None  # the trigger's builds' identity (actAs)
    http_url: pulumi.Input[str] | None
    http_cloud_run_service: pulumi.Input[str] | None
    http_audience: str | None  # DEDUP_TARGET_AUDIENCE; None: the handler's default for the URL (an output)
    attempt_deadline_seconds: int
    request_timeout_seconds: int
    lease_seconds: int
    retention_seconds: int
    manual_tolerance_seconds: int
    retry: RetryPolicy
    collection: str
    database_id: pulumi.Input[str]  # a plain str unless it comes from a store's StackReference
    create_database: bool
    database_location: str
    deletion_protection: bool
    cpu_always_allocated: bool
    base_image: str
    max_instance_count: int
    service_name: str
    scheduler_job_name: str
    oidc_audience: str
    store: StoreRef | None = None
    scheduler_service_account_email: pulumi.Input[str] | None = None
    build_service_account_email: pulumi.Input[str] | None = None
    min_instance_count: int = 0
    protect_database: bool = True
    store_kind: str = DEFAULT_KIND
    """The run store's kind (:data:`~scheduler_dedup.infra.stores.store.STORE_KINDS`): the job's own store's
    (``store_kind``), or the shared store's; the handler's ``DEDUP_STORE`` is :data:`~scheduler_dedup.infra.stores.store.HANDLER_STORE` of it."""
    instance_id: pulumi.Input[str] | None = None
    """The instance of the database (Spanner: the job's own or the store's, ``spanner_instance``); None for other
    kinds."""
    own_store: Any = None
    """What the store's piece resolved of the job's own store with the inputs (Spanner's settings), created under the
    job; None otherwise (:class:`~scheduler_dedup.infra.stores.base.JobStore`)."""
    app_engine: AppEngineSettings | None = None  # None: Cloud Run with an HTTP target and OIDC
    paused: bool = False
    """The Scheduler job is paused (``Job.paused``): the run check reports its fire times as ``paused``."""
    job_config: JobConfig = JobConfig()
    """The job's own environment, secrets, CPU and memory, labels, VPC egress and roles (:mod:`.job_config`)."""
    overlap: str = "allow"
    """The overlap policy (``overlap``, DEDUP_OVERLAP): :data:`~scheduler_dedup.handler.schedule.overlap_policy.OVERLAP_POLICIES`."""
    catch_up_window_seconds: int = 0
    """The catch-up window (``catch_up_window_seconds``, DEDUP_CATCH_UP_WINDOW_SECONDS), seconds; 0 is off."""
    expected_run_seconds: int | None = None
    """The longest a run is expected to take, seconds (a Python job's ``alerts.max_runtime_seconds``), or None:
    unknown (:func:`~scheduler_dedup.infra.job.catch_up_inputs.expected_run_seconds`)."""
    advisories: tuple[str, ...] = ()
    """Advisory findings of these settings (the policy pack's advisory rules say the same): the component warns
    with each at preview (:func:`advisories_of`)."""

    @property
    def names(self) -> JobNames:
        """Every GCP name the job derives (:func:`~scheduler_dedup.infra.job.job_names.derive_job_names`)."""
        return derive_job_names(self.name, self.resource_prefix, self.project, self.region)

    @property
    def scheduler_target(self) -> str:
        """The Scheduler job's target kind: ``http`` (Cloud Run) or ``app_engine``
        (:data:`~scheduler_dedup.handler.schedule.retry_windows.ATTEMPT_DEADLINES` keys)."""
        return APP_ENGINE_TARGET if self.app_engine is not None else HTTP_TARGET

    @property
    def retry_window_seconds(self) -> int:
        """See :func:`~scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds`."""
        return int(retry_window_seconds(self.retry, self.attempt_deadline_seconds))
