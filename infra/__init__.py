"""Pulumi component and root-stack program of scheduler-dedup.

Public names:

* :class:`DedupScheduledJob` — the component (type ``scheduler-dedup:index:DedupScheduledJob``).
* :class:`DedupStore` — one Firestore database and TTL policy shared by many jobs
  (type ``scheduler-dedup:index:DedupStore``; :class:`DedupStoreArgs`, and :class:`DedupStoreRefArgs` for
  a job's ``store`` input).
* :class:`DedupScheduledJobArgs`, :class:`RetryConfigArgs`, :class:`WorkflowTargetArgs`,
  :class:`CloudRunJobTargetArgs`, :class:`CloudBuildTriggerTargetArgs`, :class:`HttpTargetArgs`,
  :class:`AppEngineArgs` (App Engine as the Scheduler target), :class:`AlertsArgs` — its typed inputs
  (``alerts``: metrics, alert policies and a missed-run watchdog, ``scheduler_dedup.infra.job.alerts``).
* :class:`DedupConfigError` — raised before any child is created when an input is invalid.
* :func:`build_deploy_archive` — the deploy zip (``scheduler_dedup.infra.job.archive``).
* :func:`deploy_from_config` — the root stack program (``scheduler_dedup.infra.stack.program``).
* ``scheduler_dedup.infra.stack.mock_run.run_stack_config`` — run the root program under Pulumi mocks.
"""

from scheduler_dedup.infra.job.archive import DeployArchive, build_deploy_archive
from scheduler_dedup.infra.args import (
    AlertsArgs,
    AppEngineArgs,
    CloudBuildTriggerTargetArgs,
    CloudRunJobTargetArgs,
    DedupScheduledJobArgs,
    DedupStoreArgs,
    DedupStoreRefArgs,
    HttpTargetArgs,
    RetryConfigArgs,
    WorkflowTargetArgs,
)
from scheduler_dedup.infra.job.component import DedupScheduledJob
from scheduler_dedup.infra.errors import DedupConfigError, DeployArchiveError
from scheduler_dedup.infra.job.settings import DedupSettings, resolve_settings
from scheduler_dedup.infra.stores.store import DedupStore
from scheduler_dedup.infra.stack.program import CONFIG_KEYS, deploy_from_config

__all__ = [
    "AlertsArgs",
    "AppEngineArgs",
    "CONFIG_KEYS",
    "CloudBuildTriggerTargetArgs",
    "CloudRunJobTargetArgs",
    "DedupConfigError",
    "DedupScheduledJob",
    "DedupScheduledJobArgs",
    "DedupSettings",
    "DedupStore",
    "DedupStoreArgs",
    "DedupStoreRefArgs",
    "DeployArchive",
    "DeployArchiveError",
    "HttpTargetArgs",
    "RetryConfigArgs",
    "WorkflowTargetArgs",
    "build_deploy_archive",
    "deploy_from_config",
    "resolve_settings",
]
