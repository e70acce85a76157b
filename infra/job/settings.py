"""Validate :class:`~scheduler_dedup.infra.args.DedupScheduledJobArgs` and resolve every default.

:func:`resolve_settings` is pure (no Pulumi resources), so tests and the offline checker can call it,
and the component calls it before creating any child: a misconfiguration fails ``pulumi preview``
with a :class:`~scheduler_dedup.infra.errors.DedupConfigError` that names the field and the fix.

Sources of the limits (cited again at each check):

* Scheduler attempt deadline: HTTP targets 15 s to 30 min, App Engine targets 15 s to 24 h, default 3 min here —
  https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.attempt_deadline
  (:data:`~scheduler_dedup.handler.schedule.retry_windows.ATTEMPT_DEADLINES`, which the policy pack reads too)
* Scheduler retry policy, retryCount 0..5 and the backoff defaults —
  https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#RetryConfig
* unix-cron format, and that X-CloudScheduler-ScheduleTime is only sent for unix-cron schedules —
  https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules and
  https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job.FIELDS.schedule
* time zone: a name from the tz database — same page, ``Job.FIELDS.time_zone``
* Cloud Run request timeout, at most 60 min —
  https://cloud.google.com/run/docs/configuring/request-timeout
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import pulumi

from scheduler_dedup.handler.schedule.retry_windows import (
    APP_ENGINE_TARGET,
    ATTEMPT_DEADLINES,
    HTTP_TARGET,
    REQUEST_TIMEOUT_MARGIN_SECONDS,
    RetryPolicy,
    max_retry_duration_to_recover,
    min_backoff_to_recover,
    recovers_crash,
    retries_described,
    retry_window_seconds,
)
from scheduler_dedup.handler.schedule.cron import (
    DEFAULT_TIME_ZONE,
    is_iana_time_zone,
    oversized_step_forms,
    unix_cron_problem,
    unsettled_cron_forms,
)
from scheduler_dedup.handler.schedule.overlap import overlap_advisory
from scheduler_dedup.handler.schedule.time_zones import fixed_offset_abbreviation_problem, time_zone_alias_advisory
from scheduler_dedup.handler.callers.app_engine import APP_ENGINE_CALLER_ENV
from scheduler_dedup.handler.callers.audience import misspelt_target_audience, target_audience
from scheduler_dedup.handler.config.settings import (
    DEFAULT_COLLECTION,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_MANUAL_TOLERANCE_SECONDS,
    DEFAULT_RETENTION_SECONDS,
    store_timeout_for,
)
from scheduler_dedup.handler.core.record import TTL_OWNER_ENV
from scheduler_dedup.handler.service.server import SERVER_THREADS
from scheduler_dedup.handler.service.startup import startup_problems

from scheduler_dedup.infra.job.app_engine import AppEngineSettings, resolve_app_engine
from scheduler_dedup.infra.errors import DedupConfigError, DedupConfigErrors, bool_input
from scheduler_dedup.infra.project.locations import region_problem
from scheduler_dedup.infra.job.oidc_account import oidc_account_problem
from scheduler_dedup.infra.project.providers import child_project
from scheduler_dedup.infra.job.scale_in import scale_in_advisory
from scheduler_dedup.infra.stores.spanner import SpannerStoreSettings, resolve_spanner_settings
from scheduler_dedup.infra.stores.store import HANDLER_STORE, StoreRef, check_firestore_ids, check_spanner_ids, resolve_store_ref, store_kind

DEFAULT_ATTEMPT_DEADLINE_SECONDS = 180
REQUEST_TIMEOUT_MAX_SECONDS = 3600
RETRY_COUNT_MAX = 5
#: The component retries by default (Scheduler's default is 0): a crashed or failed attempt's run is retried.
DEFAULT_RETRY_COUNT = 5
DEFAULT_MIN_BACKOFF_SECONDS = 5
#: Default retries span this many times the lease, so a crashed attempt's run is taken over with room to spare.
CRASH_RECOVERY_FACTOR = 1.5
DEFAULT_MAX_BACKOFF_SECONDS = 3600
DEFAULT_MAX_DOUBLINGS = 5
DEFAULT_MAX_INSTANCE_COUNT = 3
AUDIENCE_HOST = "scheduler-dedup.invalid"

_ALLOWED_KEYS = frozenset(
    {
        "schedule", "region", "project", "time_zone", "job_source", "job", "image",
        "workflow_target", "cloud_run_job_target", "cloud_build_trigger_target", "http_target", "app_engine",
        "attempt_deadline_seconds",
        "request_timeout_seconds", "lease_seconds", "retention_seconds", "manual_tolerance_seconds",
        "retry", "collection", "database_id", "create_database", "database_location",
        "deletion_protection", "cpu_always_allocated", "base_image", "max_instance_count", "min_instance_count",
        "oidc_audience", "resource_prefix", "protect_database",
        "store", "store_kind", "spanner_instance", "scheduler_service_account_email", "build_service_account_email",
        "alerts",  # resolved by scheduler_dedup.infra.job.alerts.resolve_alerts
        "paused",
    }
)
_RETRY_KEYS = frozenset(
    {"retry_count", "max_retry_duration_seconds", "min_backoff_seconds", "max_backoff_seconds", "max_doublings"}
)
T = TypeVar("T")
_JOB_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


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
    store_kind: str = "firestore"
    """The run store's kind (:data:`~scheduler_dedup.infra.stores.store.STORE_KINDS`): the job's own store's
    (``store_kind``), or the shared store's; the handler's ``DEDUP_STORE`` is :data:`~scheduler_dedup.infra.stores.store.HANDLER_STORE` of it."""
    spanner_instance: pulumi.Input[str] | None = None
    """Spanner: the instance of the database (the job's own or the store's); None for other kinds."""
    spanner: SpannerStoreSettings | None = None
    """Spanner: the job's own store (no ``store``), created under the job; None otherwise."""
    app_engine: AppEngineSettings | None = None  # None: Cloud Run with an HTTP target and OIDC
    paused: bool = False
    """The Scheduler job is paused (``Job.paused``): the run check reports its fire times as ``paused``."""
    advisories: tuple[str, ...] = ()
    """Advisory findings of these settings (the policy pack's advisory rules say the same): the component warns
    with each at preview (:func:`advisories_of`)."""

    @property
    def scheduler_target(self) -> str:
        """The Scheduler job's target kind: ``http`` (Cloud Run) or ``app_engine``
        (:data:`~scheduler_dedup.handler.schedule.retry_windows.ATTEMPT_DEADLINES` keys)."""
        return APP_ENGINE_TARGET if self.app_engine is not None else HTTP_TARGET

    @property
    def retry_window_seconds(self) -> int:
        """See :func:`~scheduler_dedup.handler.schedule.retry_windows.retry_window_seconds`."""
        return int(retry_window_seconds(self.retry, self.attempt_deadline_seconds))


def _int(args: Mapping[str, Any], key: str, default: int, *, field: str | None = None) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise DedupConfigError(field or key, f"must be a whole number of seconds/count, got {value!r}")
    return int(value)


def _str(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DedupConfigError(key, f"must be a non-empty string, got {value!r}")
    return value.strip()


def validate_schedule(schedule: str) -> str:
    """Return ``schedule`` if it is a five-field unix-cron expression.

    Raises:
        DedupConfigError: groc (``every 5 minutes``), six-field, ``@hourly`` or invalid cron. Scheduler
            sends ``X-CloudScheduler-ScheduleTime`` only for unix-cron schedules
            (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules), and the handler
            keys runs on it.
    """
    problem = unix_cron_problem(schedule)
    if problem:
        raise DedupConfigError("schedule", problem)
    return " ".join(schedule.split())


def validate_time_zone(time_zone: str) -> str:
    """Return ``time_zone`` if it is an IANA tz database name (``Job.time_zone``).

    Raises:
        DedupConfigError: not a tz database name (the message suggests ``Etc/UTC``), or a fixed-offset abbreviation
            such as ``EST`` (UTC-5 all year; :func:`~scheduler_dedup.handler.schedule.time_zones.fixed_offset_abbreviation_problem`).
            An alias such as ``US/Eastern`` passes with an advisory (:func:`advisories_of`).
    """
    if not is_iana_time_zone(time_zone):
        raise DedupConfigError(
            "time_zone", f"{time_zone!r} is not an IANA time zone name; use e.g. 'Etc/UTC' or 'Europe/Berlin'"
        )
    fixed = fixed_offset_abbreviation_problem(time_zone)
    if fixed:
        raise DedupConfigError("time_zone", fixed)
    return time_zone


_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


def _resource_prefix(name: str, field: str = "name") -> str:
    """The prefix of GCP resource ids (``resource_prefix``, else the component name), checked to be usable in them
    (service, bucket, account ids).

    Raises:
        DedupConfigError: not 1-40 lowercase letters, digits or hyphens starting with a letter.
    """
    if not _NAME_RE.match(name) or name.endswith("-"):
        raise DedupConfigError(
            field, f"{name!r} must be 1-40 lowercase letters, digits or hyphens, starting with a letter "
            "(GCP resource ids are derived from it), e.g. 'nightly-report'"
        )
    return name


class _Problems:
    """Every :class:`DedupConfigError` of one resolution, so a config with four mistakes shows four at once."""

    def __init__(self) -> None:
        self.errors: list[DedupConfigError] = []

    def run(self, check: Callable[[], T], fallback: T) -> T:
        """``check()``, or ``fallback`` after recording the error it raised."""
        try:
            return check()
        except DedupConfigError as error:
            self.add(error)
            return fallback

    def add(self, error: DedupConfigError) -> None:
        self.errors.extend(error.errors if isinstance(error, DedupConfigErrors) else [error])

    def raise_any(self) -> None:
        """Raises: DedupConfigError (one problem) or :class:`DedupConfigErrors` (several)."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise DedupConfigErrors(self.errors)


@dataclass(frozen=True)
class _Target:
    type: str  # python | workflows | cloud_run_job | cloud_build_trigger | http
    job: str | None = None
    job_source: Path | None = None
    image: str | None = None
    workflow: pulumi.Input[str] | None = None
    cloud_run_job: pulumi.Input[str] | None = None
    cloud_build_trigger: pulumi.Input[str] | None = None
    cloud_build_service_account_email: pulumi.Input[str] | None = None
    http_url: pulumi.Input[str] | None = None
    http_service: pulumi.Input[str] | None = None
    http_audience: str | None = None


def _target(args: Mapping[str, Any]) -> _Target:
    """What runs: the python job (source or image) or one proxy target.

    Raises:
        DedupConfigError: the first problem of these inputs (they depend on one another).
    """
    job = _str(args, "job")
    job_source_str = _str(args, "job_source")
    image = _str(args, "image")
    targets = {k: args[k] for k in ("workflow_target", "cloud_run_job_target", "cloud_build_trigger_target",
                                    "http_target") if args.get(k) is not None}
    if len(targets) > 1:
        raise DedupConfigError(sorted(targets)[1], f"give only one proxy target, got {', '.join(sorted(targets))}")
    if targets:
        (key, target), = targets.items()
        if not isinstance(target, Mapping):
            raise DedupConfigError(key, f"must be a mapping, got {target!r}")
        if job_source_str is not None or job is not None or image is not None:
            raise DedupConfigError(key, "a proxy target runs no user code: remove job_source, job and image (the "
                                        "component deploys the bare handler), or remove the target")
        if key == "workflow_target":
            return _Target("workflows", workflow=_target_name(target, key, "workflow", "workflows"))
        if key == "cloud_run_job_target":
            return _Target("cloud_run_job", cloud_run_job=_target_name(target, key, "job", "jobs"))
        if key == "cloud_build_trigger_target":
            extra = set(target) - {"trigger", "service_account_email"}
            if extra:
                raise DedupConfigError(f"{key}.{sorted(extra)[0]}", "unknown key; valid keys are trigger, "
                                                                    "service_account_email")
            return _Target("cloud_build_trigger", cloud_build_trigger=_target_name(target, key, "trigger", "triggers"),
                           cloud_build_service_account_email=_service_account_email(
                               target, "service_account_email", field=f"{key}.service_account_email"))
        http_url = target.get("url")
        if isinstance(http_url, str) and not http_url.startswith("https://"):
            raise DedupConfigError(f"{key}.url", f"{http_url!r} must be an https:// URL")
        if http_url is None:
            raise DedupConfigError(f"{key}.url", "is required: the https URL to call")
        http_service = None
        if target.get("cloud_run_service") is not None:
            http_service = _target_name(target, key, "cloud_run_service", "services")
        extra = set(target) - {"url", "cloud_run_service", "audience"}
        if extra:
            raise DedupConfigError(f"{key}.{sorted(extra)[0]}",
                                   "unknown key; valid keys are url, cloud_run_service, audience")
        return _Target("http", http_url=http_url, http_service=http_service,
                       http_audience=_http_audience(target.get("audience"), http_url, f"{key}.audience"))
    if job_source_str is None and image is None:
        raise DedupConfigError(
            "job_source",
            "neither job_source nor image nor a proxy target is given: set job_source (a directory with your "
            "job module) and job ('module:function'), or image, or one of workflow_target, "
            "cloud_run_job_target, cloud_build_trigger_target, http_target",
        )
    if job_source_str is not None and image is not None:
        raise DedupConfigError("image", "give job_source or image, not both")
    if job is None:
        raise DedupConfigError("job", "is required with job_source or image: the entry point as 'module:function'")
    if not _JOB_RE.match(job):
        raise DedupConfigError("job", f"{job!r} is not 'module:function' (e.g. 'jobs:run')")
    job_source: Path | None = None
    if job_source_str is not None:
        job_source = Path(job_source_str).expanduser().resolve()
        if not job_source.is_dir():
            raise DedupConfigError("job_source", f"{job_source_str!r} is not a directory")
        module = job.split(":")[0].replace(".", "/")
        if not ((job_source / f"{module}.py").is_file() or (job_source / module / "__init__.py").is_file()):
            raise DedupConfigError(
                "job", f"module of {job!r} not found in job_source: expected {module}.py or {module}/__init__.py"
            )
        source = job_source / f"{module}.py"
        problem = _entry_point_problem(source if source.is_file() else job_source / module / "__init__.py",
                                       job.split(":")[1])
        if problem:
            raise DedupConfigError("job", f"{job!r}: {problem} (the handler would refuse DEDUP_JOB at start-up)")
    return _Target("python", job=job, job_source=job_source, image=image)


def _attempt_deadline(args: Mapping[str, Any], app_engine: AppEngineSettings | None) -> int:
    attempt_deadline = _int(args, "attempt_deadline_seconds", DEFAULT_ATTEMPT_DEADLINE_SECONDS)
    # Scheduler: HTTP targets [15 s, 30 min], App Engine targets [15 s, 24 h] (ATTEMPT_DEADLINES cites the page).
    kind = APP_ENGINE_TARGET if app_engine is not None else HTTP_TARGET
    deadlines = ATTEMPT_DEADLINES[kind]
    if attempt_deadline == 0 or deadlines.problem(attempt_deadline):
        raise DedupConfigError(
            "attempt_deadline_seconds",
            f"{attempt_deadline} s is outside Cloud Scheduler's range for {kind.replace('_', ' ')} targets; "
            f"use {deadlines.min_seconds:g} to {deadlines.max_seconds:g} seconds",
        )
    if app_engine is not None and attempt_deadline > app_engine.request_timeout_seconds:
        # App Engine ends a request at the service's deadline; Scheduler must not wait longer than that.
        where = "the deployed version's (automatic scaling)" if app_engine.deploy else "app_engine.request_timeout_seconds"
        raise DedupConfigError(
            "attempt_deadline_seconds",
            f"{attempt_deadline} s is longer than the App Engine request deadline, {where} "
            f"{app_engine.request_timeout_seconds} s: App Engine would end a request Scheduler still waits for; "
            f"lower it to at most {app_engine.request_timeout_seconds}",
        )
    return attempt_deadline


def _request_timeout(args: Mapping[str, Any], attempt_deadline: int | None, app_engine: AppEngineSettings | None) -> int:
    if app_engine is not None:  # the App Engine service's request deadline (resolve_app_engine checked it)
        return app_engine.request_timeout_seconds
    # Default: the attempt deadline plus a margin, so Scheduler's cut-off and Cloud Run's do not race
    # (the pack's advisory scheduler-attempt-deadline-margin checks the same margin).
    deadline = attempt_deadline or DEFAULT_ATTEMPT_DEADLINE_SECONDS
    request_timeout = _int(args, "request_timeout_seconds",
                           min(deadline + REQUEST_TIMEOUT_MARGIN_SECONDS, REQUEST_TIMEOUT_MAX_SECONDS))
    # Cloud Run: request timeout up to 60 minutes. https://cloud.google.com/run/docs/configuring/request-timeout
    if not 1 <= request_timeout <= REQUEST_TIMEOUT_MAX_SECONDS:
        raise DedupConfigError(
            "request_timeout_seconds", f"{request_timeout} s is outside Cloud Run's range; use 1 to {REQUEST_TIMEOUT_MAX_SECONDS}"
        )
    if attempt_deadline is not None and request_timeout < attempt_deadline:
        raise DedupConfigError(
            "request_timeout_seconds",
            f"{request_timeout} s is shorter than attempt_deadline_seconds ({attempt_deadline} s): Cloud Run would cut "
            f"a job that Scheduler still waits for; raise it to at least {attempt_deadline}",
        )
    return request_timeout


def _lease(args: Mapping[str, Any], request_timeout: int | None, attempt_deadline: int | None) -> int:
    lease = _int(args, "lease_seconds", max(DEFAULT_LEASE_SECONDS, request_timeout or 0))
    if request_timeout is not None and attempt_deadline is not None and (
            lease < request_timeout or lease < attempt_deadline):
        longest = max(request_timeout, attempt_deadline)
        raise DedupConfigError(
            "lease_seconds",
            f"{lease} s is shorter than the request timeout ({request_timeout} s) or the attempt deadline "
            f"({attempt_deadline} s): a retry could take over a claim whose job is still running; "
            f"raise it to at least {longest}",
        )
    return lease


def _retention(args: Mapping[str, Any], window: int | None) -> int:
    retention = _int(args, "retention_seconds", DEFAULT_RETENTION_SECONDS)
    if window is not None and retention < window:
        raise DedupConfigError(
            "retention_seconds",
            f"{retention} s is shorter than the retry window ({window} s, from the attempt deadline and the retry "
            f"config): a late retry would find no record and run the job again; raise it to at least {window} "
            "or shorten the retry config",
        )
    return retention


def _tolerance(args: Mapping[str, Any]) -> int:
    tolerance = _int(args, "manual_tolerance_seconds", DEFAULT_MANUAL_TOLERANCE_SECONDS)
    if tolerance < 0:
        raise DedupConfigError("manual_tolerance_seconds", "must be >= 0")
    return tolerance


@dataclass(frozen=True)
class _Store:
    store: StoreRef | None
    kind: str
    collection: str
    create_database: bool
    database_id: pulumi.Input[str]
    database_location: str
    spanner_instance: pulumi.Input[str] | None = None
    spanner: SpannerStoreSettings | None = None


def _store(args: Mapping[str, Any], prefix: str, project: str | None, region: str | None) -> _Store:
    """The run store: a shared one (``store=``, of any kind), or one of the job's own (``store_kind``: Firestore or
    Spanner).

    Raises:
        DedupConfigError: the first problem of the store inputs (they depend on one another).
    """
    kind = store_kind(args, "store_kind")
    spanner_instance = _str(args, "spanner_instance")
    if args.get("store") is not None:
        return _shared_store(args, resolve_store_ref(args["store"]), kind, spanner_instance, project, region)
    if kind == "memorystore":
        raise DedupConfigError("store_kind", "a job has no Memorystore instance of its own: create a "
                                             "DedupStore(kind='memorystore') and pass it (or its stack's outputs) as "
                                             "store")
    if spanner_instance is not None and kind != "spanner":
        raise DedupConfigError("spanner_instance", "applies to a Spanner store only: set store_kind to 'spanner', or "
                                                   "remove it")
    collection = _str(args, "collection") or DEFAULT_COLLECTION  # checked by _check_handler_settings
    if kind == "spanner":
        return _own_spanner_store(args, prefix, project, region, collection, spanner_instance)
    create_database = bool_input(args, "create_database", True)
    default_db = f"{prefix[:55].rstrip('-')}-dedup" if create_database else "(default)"
    database_id = _str(args, "database_id") or default_db  # checked by _check_handler_settings
    return _Store(None, kind, collection, create_database, database_id,
                  _str(args, "database_location") or region or "")


def _shared_store(args: Mapping[str, Any], store: StoreRef, kind: str, spanner_instance: str | None,
                  project: str | None, region: str | None) -> _Store:
    """A store of another component or stack (``store=``): its kind, database and one of its collections."""
    if args.get("store_kind") is not None and kind != store.kind:
        raise DedupConfigError("store_kind", f"is {kind!r}, but the store is a {store.kind} store: remove store_kind "
                                             "(the store decides) or pass a store of that kind")
    if spanner_instance is not None:
        raise DedupConfigError("spanner_instance", "the instance is the store's when store= is given: remove it")
    for key in ("database_id", "create_database", "database_location"):
        if args.get(key) is not None:
            raise DedupConfigError(key, "the database is the store's when store= is given: remove "
                                        f"{key} (or remove store to give the job a database of its own)")
    if isinstance(store.project, str) and project is not None and store.project != project:
        raise DedupConfigError("store.project", f"the store is in project {store.project!r}, the job in "
                                                f"{project!r}: deploy the job in the store's project")
    shared = store.collections if isinstance(store.collections, (list, tuple)) else None
    default_collection = shared[0] if shared and len(shared) == 1 else DEFAULT_COLLECTION
    collection = _str(args, "collection") or default_collection
    if shared is not None and collection not in shared:
        raise DedupConfigError("collection", f"{collection!r} is not a collection of the store ({', '.join(shared)}): "
                                             "use one of them, or add it to the store's collections")
    if store.kind == "spanner":
        check_spanner_ids(store.instance_id, store.database_id, collection)
    elif store.kind == "firestore" and project is not None:
        check_firestore_ids(project, store.database_id, collection)
    return _Store(store, store.kind, collection, False, store.database_id, region or "",
                  spanner_instance=store.instance_id)


def _own_spanner_store(args: Mapping[str, Any], prefix: str, project: str | None, region: str | None,
                       collection: str, instance: str | None) -> _Store:
    """A Spanner database of the job's own (:mod:`.spanner_store`), in ``spanner_instance`` or an instance of its own.

    Its table, database and instance ids are the handler's (``DEDUP_COLLECTION``, ``DEDUP_SPANNER_DATABASE``,
    ``DEDUP_SPANNER_INSTANCE``), checked again by :func:`_check_handler_settings`.
    """
    for key in ("create_database", "database_location"):
        if args.get(key) is not None:
            raise DedupConfigError(key, "a job's own Spanner store always creates its database (its DDL holds "
                                        f"the table), in spanner_instance or an instance of its own: remove {key}")
    database_id = _str(args, "database_id")
    if region is None and instance is None:  # the instance's region is unknown: reported as the region's problem
        return _Store(None, "spanner", collection, True, database_id or "", "", spanner_instance="")
    spanner = resolve_spanner_settings(
        {"instance_id": instance, "create_instance": instance is None, "database_id": database_id,
         "deletion_protection": args.get("deletion_protection", False),
         "protect_database": args.get("protect_database", True)},
        project=project or "", region=region, default_instance=f"{prefix[:55].rstrip('-')}-dedup",
        default_database=f"{prefix[:24].rstrip('-')}-dedup", tables=[collection])
    return _Store(None, "spanner", collection, True, spanner.database_id, spanner.instance_config,
                  spanner_instance=spanner.instance_id, spanner=spanner)


def _max_instances(args: Mapping[str, Any]) -> int:
    max_instances = _int(args, "max_instance_count", DEFAULT_MAX_INSTANCE_COUNT)
    if max_instances < 1:
        raise DedupConfigError("max_instance_count", "must be at least 1")
    return max_instances


def _min_instances(args: Mapping[str, Any], max_instances: int) -> int:
    min_instances = _int(args, "min_instance_count", 0)
    if not 0 <= min_instances <= max_instances:
        raise DedupConfigError("min_instance_count", f"{min_instances} is outside 0 to max_instance_count "
                                                     f"({max_instances}): use 0, or 1 to keep an instance for long jobs")
    return min_instances


def _region(args: Mapping[str, Any]) -> str:
    """The region of the Cloud Run service and the Scheduler job, offered by both (:mod:`.locations`)."""
    region = _required(args, "region", "a Cloud Run and Cloud Scheduler region such as 'us-central1'")
    problem = region_problem(region, ("Cloud Scheduler", "Cloud Run"))
    if problem:
        raise DedupConfigError("region", problem)
    return region


def _required(args: Mapping[str, Any], key: str, what: str) -> str:
    value = _str(args, key)
    if value is None:
        raise DedupConfigError(key, f"is required: {what}")
    return value


def resolve_settings(name: str, args: Mapping[str, Any], *, default_project: str | None = None,
                     provider_name: str | None = None) -> DedupSettings:
    """Validate the component inputs and apply every default.

    Every input is checked, and every problem is reported at once; a check that needs another input's value
    is skipped while that input is invalid (its own problem is reported), so no problem is reported twice.

    Args:
        name: the component's Pulumi name; GCP resource ids are derived from it.
        args: a :class:`~scheduler_dedup.infra.args.DedupScheduledJobArgs` mapping.
        default_project: project id used when ``args`` has none: the project of the explicit provider the
            component was given (``provider_name``), else the stack's ``gcp:project``
            (:func:`scheduler_dedup.infra.project.providers.project_source`).
        provider_name: the explicit ``gcp`` provider the children use, if any: a ``project`` other than its
            project is refused (the children would mix the provider's project and another).

    Returns:
        The resolved :class:`DedupSettings`.

    Raises:
        DedupConfigError: the one invalid field; the message names the field and the fix.
        DedupConfigErrors: several (a :class:`DedupConfigError` too, naming the first; ``errors`` holds each).
    """
    problems = _Problems()
    prefix = problems.run(lambda: _resource_prefix(_str(args, "resource_prefix") or name,
                                                    "resource_prefix" if args.get("resource_prefix") else "name"), None)
    unknown = sorted(set(args) - _ALLOWED_KEYS)
    for key in unknown:
        problems.add(DedupConfigError(key, f"unknown input; valid inputs are {', '.join(sorted(_ALLOWED_KEYS))}"))

    schedule = problems.run(lambda: validate_schedule(
        _required(args, "schedule", "a unix-cron expression such as '*/15 * * * *'")), None)
    time_zone = problems.run(lambda: validate_time_zone(_str(args, "time_zone") or DEFAULT_TIME_ZONE), None)
    region = problems.run(lambda: _region(args), None)
    project = problems.run(lambda: child_project(args, default_project, provider_name), None)
    target = problems.run(lambda: _target(args), None)
    # the Scheduler target: Cloud Run (HTTP target, OIDC) or App Engine
    app_engine = (problems.run(lambda: resolve_app_engine(args["app_engine"], args), None)
                  if args.get("app_engine") is not None else None)

    # --- deadlines, lease, retries, retention: each checked against the others that are valid ---
    attempt_deadline = problems.run(lambda: _attempt_deadline(args, app_engine), None)
    request_timeout = problems.run(lambda: _request_timeout(args, attempt_deadline, app_engine), None)
    lease = problems.run(lambda: _lease(args, request_timeout, attempt_deadline), None)
    retry = problems.run(lambda: _retry_policy(args.get("retry") or {}, lease or DEFAULT_LEASE_SECONDS,
                                               attempt_deadline or DEFAULT_ATTEMPT_DEADLINE_SECONDS), None)
    window = (int(retry_window_seconds(retry, attempt_deadline))
              if retry is not None and attempt_deadline is not None else None)
    retention = problems.run(lambda: _retention(args, window), None)
    tolerance = problems.run(lambda: _tolerance(args), None)

    store = problems.run(lambda: _store(args, prefix or name, project or None, region), None)
    if store is not None and store.kind == "firestore" and store.create_database and region is not None:
        where = region_problem(store.database_location, ("Firestore",))
        if where:
            problems.add(DedupConfigError("database_location" if args.get("database_location") else "region", where))
    scheduler_email = problems.run(lambda: _service_account_email(args, "scheduler_service_account_email"), None)
    if isinstance(scheduler_email, str) and project:
        misplaced = oidc_account_problem(scheduler_email, project)
        if misplaced:
            problems.add(DedupConfigError("scheduler_service_account_email", misplaced))
    build_email = problems.run(lambda: _service_account_email(args, "build_service_account_email"), None)
    deletion_protection = problems.run(lambda: bool_input(args, "deletion_protection", False), False)
    cpu_always_allocated = problems.run(lambda: bool_input(args, "cpu_always_allocated", True), True)
    protect_database = problems.run(lambda: bool_input(args, "protect_database", True), True)
    paused = problems.run(lambda: bool_input(args, "paused", False), False)
    max_instances = problems.run(lambda: _max_instances(args), DEFAULT_MAX_INSTANCE_COUNT)
    min_instances = problems.run(lambda: _min_instances(args, max_instances), 0)
    base_image = problems.run(lambda: _str(args, "base_image"), None) or (
        f"{region}-docker.pkg.dev/serverless-runtimes/google-22/runtimes/python312"
    )
    audience = problems.run(lambda: _str(args, "oidc_audience"), None)
    problems.raise_any()
    assert (prefix and schedule and time_zone and region and project and target and attempt_deadline
            and request_timeout and lease and retry and retention is not None and tolerance is not None and store)

    # Crash recovery (checked after the handler's own checks, below): a retry must still come once a crashed
    # attempt's lease has expired.
    crash_problem = None if recovers_crash(retry, lease, attempt_deadline) else (
        _crash_recovery_field(args.get("retry") or {}), _crash_recovery_fix(retry, lease, attempt_deadline))

    # Cloud Run service names: up to 49 chars, lowercase letters, digits, hyphens, start with a letter.
    service_name = prefix[:49].rstrip("-")
    scheduler_job_name = prefix[:500]
    audience = audience or f"https://{AUDIENCE_HOST}/projects/{project}/locations/{region}/services/{service_name}"
    settings = DedupSettings(
        name=name, resource_prefix=prefix, project=project, region=region, schedule=schedule, time_zone=time_zone,
        target_type=target.type, job=target.job, job_source=target.job_source, image=target.image,
        workflow=target.workflow, cloud_run_job=target.cloud_run_job, cloud_build_trigger=target.cloud_build_trigger,
        cloud_build_service_account_email=target.cloud_build_service_account_email, http_url=target.http_url,
        http_cloud_run_service=target.http_service, http_audience=target.http_audience,
        attempt_deadline_seconds=attempt_deadline, request_timeout_seconds=request_timeout, lease_seconds=lease,
        retention_seconds=retention, manual_tolerance_seconds=tolerance, retry=retry, collection=store.collection,
        database_id=store.database_id, create_database=store.create_database,
        database_location=store.database_location, deletion_protection=deletion_protection,
        cpu_always_allocated=cpu_always_allocated, base_image=base_image, max_instance_count=max_instances,
        service_name=service_name, scheduler_job_name=scheduler_job_name, oidc_audience=audience,
        store=store.store, scheduler_service_account_email=scheduler_email, build_service_account_email=build_email,
        min_instance_count=min_instances, protect_database=protect_database, app_engine=app_engine,
        store_kind=store.kind, spanner_instance=store.spanner_instance, spanner=store.spanner, paused=paused,
    )
    problems.run(lambda: _check_handler_settings(settings), None)
    if crash_problem is not None:
        problems.add(DedupConfigError(*crash_problem))
    problems.raise_any()
    return replace(settings, advisories=advisories_of(settings))


def advisories_of(s: DedupSettings) -> tuple[str, ...]:
    """What the settings do that a user would want to know at preview, though Scheduler accepts it; each message is
    the one the policy pack's advisory rule of the same concern gives:

    * the time zone is an alias of a canonical zone (:func:`~scheduler_dedup.handler.schedule.time_zones.time_zone_alias_advisory`;
      pack: ``scheduler-time-zone-canonical``);
    * the schedule uses a form Cloud Scheduler's cron page does not settle
      (:func:`~scheduler_dedup.handler.schedule.cron.unsettled_cron_forms`; pack: ``scheduler-schedule-unsettled``);
    * a step selects one value of its range, so the job runs less often than it reads
      (:func:`~scheduler_dedup.handler.schedule.cron.oversized_step_forms`; pack: ``scheduler-schedule-step``);
    * a run's retry window, or one slow attempt, reaches the next fire time, so Scheduler delays or skips it
      (:func:`~scheduler_dedup.handler.schedule.overlap.overlap_advisory`; pack: ``scheduler-runs-overlap``);
    * a Python job may outlive its attempt deadline on an instance Cloud Run may scale in
      (:func:`~scheduler_dedup.infra.job.scale_in.scale_in_advisory`; pack: ``dedup-scale-in``).
    """
    found = [f"schedule {message}" for message in (*unsettled_cron_forms(s.schedule), *oversized_step_forms(s.schedule))]
    alias = time_zone_alias_advisory(s.time_zone)
    if alias:
        found.append(f"time_zone {alias}")
    overlap = overlap_advisory(s.schedule, s.time_zone, s.attempt_deadline_seconds, s.retry_window_seconds)
    if overlap:
        found.append(overlap)
    scale_in = scale_in_advisory(s.target_type == "python", s.min_instance_count, s.attempt_deadline_seconds)
    if scale_in:
        found.append(scale_in)
    return tuple(found)


_SA_EMAIL_RE = re.compile(r"^[a-z0-9][a-z0-9-]*@[a-z0-9.-]+\.gserviceaccount\.com$")


def _service_account_email(args: Mapping[str, Any], key: str, *, field: str | None = None) -> pulumi.Input[str] | None:
    """A service account's email (plain values checked), or None when not given.

    Raises:
        DedupConfigError: not an ``...@....gserviceaccount.com`` email; names ``field`` (default ``key``).
    """
    value = args.get(key)
    if value is None or isinstance(value, pulumi.Output):
        return value
    if not isinstance(value, str) or not _SA_EMAIL_RE.match(value):
        raise DedupConfigError(field or key, f"{value!r} is not a service account email: use "
                                             "NAME@PROJECT.iam.gserviceaccount.com, or leave it out")
    return value


#: The handler's environment variable -> the component input that sets it.
_ENV_TO_FIELD = {
    "GOOGLE_CLOUD_PROJECT": "project", "DEDUP_DATABASE": "database_id", "DEDUP_COLLECTION": "collection",
    "DEDUP_LEASE_SECONDS": "lease_seconds", "DEDUP_RETENTION_SECONDS": "retention_seconds",
    "DEDUP_MANUAL_TOLERANCE_SECONDS": "manual_tolerance_seconds", "DEDUP_SCHEDULE": "schedule",
    "DEDUP_TIME_ZONE": "time_zone", "DEDUP_JOB": "job", "DEDUP_OIDC_AUDIENCE": "oidc_audience",
    "DEDUP_ALLOWED_CALLERS": "scheduler_service_account_email", "DEDUP_TARGET_AUDIENCE": "http_target.audience",
    "DEDUP_SERVICE": "name", "DEDUP_SCHEDULER_JOB": "name", "DEDUP_APP_ENGINE_CALLER": "app_engine",
    "DEDUP_STORE": "store_kind", "DEDUP_SPANNER_INSTANCE": "spanner_instance", "DEDUP_SPANNER_DATABASE": "database_id",
}


def _check_handler_settings(s: DedupSettings) -> None:
    """Check the environment the component gives the handler with the handler's own start-up checks.

    One function (:func:`scheduler_dedup.handler.service.startup.startup_problems`, also the policy pack's
    ``dedup-handler-settings``) decides, so a config the handler would refuse (and crash every revision on)
    fails at ``pulumi preview`` instead. Values that are outputs of other resources are not known yet and pass.

    Raises:
        DedupConfigError: names the component input, and the handler's message says the fix (one per refusal).
    """
    env: dict[str, Any] = dict(handler_environment(s))
    if s.app_engine is None:  # the component adds the Scheduler identity's email (an output) on Cloud Run
        env["DEDUP_ALLOWED_CALLERS"] = s.scheduler_service_account_email
    unknown = [name for name, value in env.items() if not isinstance(value, str)]
    problems = _Problems()
    for problem in startup_problems({k: v for k, v in env.items() if isinstance(v, str)}, unknown):
        variable = re.split(r"[= ]", problem, maxsplit=1)[0]
        problems.add(DedupConfigError(_ENV_TO_FIELD.get(variable, variable),
                                      f"the handler would refuse it at start-up: {problem}"))
    problems.raise_any()


def _entry_point_problem(module_file: Path, name: str) -> str | None:
    """Why the handler could not find ``name`` in ``module_file``, or None when it may (judged without importing
    the user's code). Counted as binding the name: a module-level ``def``, ``class``, assignment or import, also
    under ``if``/``try``/``with``; a ``*`` import or a module ``__getattr__`` may bind anything, so they pass.
    """
    import ast

    try:
        tree = ast.parse(module_file.read_text(encoding="utf-8"), filename=str(module_file))
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        return f"{module_file.name} cannot be parsed ({error}), so it cannot be imported"
    bound: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field_name in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field_name, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    if name in bound or "__getattr__" in bound:
        return None
    defined = sorted(n for n in bound if not n.startswith("_"))
    return (f"{module_file.name} defines no {name!r} at module level"
            + (f" (it defines {', '.join(defined[:8])})" if defined else "") + ": fix the function name after ':'")


def _http_audience(given: Any, url: Any, field: str) -> str | None:
    """The ID-token audience the handler sends to an HTTP target, written out whenever it can be known.

    ``given`` wins, unless it is a misspelling of the one value the target's host accepts
    (:func:`~scheduler_dedup.handler.callers.audience.misspelt_target_audience`); without it, the default for the
    URL's host kind (:func:`~scheduler_dedup.handler.callers.audience.target_audience`: the full function URL on
    ``*.cloudfunctions.net``, else the origin), or None when the URL is an output of another resource
    (the handler then applies the same default at start-up).

    Raises:
        DedupConfigError: not a non-empty string, a misspelling, or a Cloud Functions URL without a function.
    """
    if given is not None:
        if not isinstance(given, str) or not given.strip():
            raise DedupConfigError(field, f"must be a non-empty string, got {given!r}")
        problem = misspelt_target_audience(given.strip(), url) if isinstance(url, str) else None
        if problem:
            raise DedupConfigError(field, problem)
        return given.strip()
    if not isinstance(url, str):
        return None
    try:
        return target_audience(url)
    except ValueError as exc:
        raise DedupConfigError(field.rsplit(".", 1)[0] + ".url", f"{exc}; or set {field}") from None


def _target_name(target: Mapping[str, Any], key: str, field: str, collection: str) -> pulumi.Input[str]:
    value = target.get(field)
    if value is None:
        raise DedupConfigError(f"{key}.{field}", f"is required: projects/P/locations/L/{collection}/NAME")
    if isinstance(value, str) and not re.fullmatch(rf"projects/[^/]+/locations/[^/]+/{collection}/[^/]+", value):
        raise DedupConfigError(f"{key}.{field}", f"{value!r} is not a full name projects/P/locations/L/{collection}/NAME")
    return value


def _crash_recovery_field(retry: Any) -> str:
    """The input to name when the retries end before a crashed attempt's lease: the one the user wrote."""
    given = retry if isinstance(retry, Mapping) else {}
    for key in ("retry_count", "max_retry_duration_seconds", "min_backoff_seconds", "max_backoff_seconds",
                "max_doublings"):
        if key in given:
            return f"retry.{key}"
    return "lease_seconds"


def _crash_recovery_fix(retry: RetryPolicy, lease: int, attempt_deadline: int) -> str:
    """Why the retries end before a crashed attempt's lease, saying what Scheduler will do, and the fixes."""
    counted = RetryPolicy(max(retry.retry_count, 1), retry.max_retry_duration_seconds, retry.min_backoff_seconds,
                          retry.max_backoff_seconds, retry.max_doublings)
    hint = min_backoff_to_recover(counted, lease, attempt_deadline)
    fixes = [f"set retry.min_backoff_seconds to at least {hint}" + (" and retry.retry_count to at least 1"
                                                                    if retry.retry_count == 0 else "")
             if hint is not None else "raise retry.retry_count and retry.max_backoff_seconds"]
    duration = max_retry_duration_to_recover(retry, lease, attempt_deadline)
    if duration is not None:
        fixes.append(f"set retry.max_retry_duration_seconds to at least {duration}")
    return (f"a crashed attempt holds its run for up to lease_seconds ({lease} s), but "
            f"{retries_described(retry, attempt_deadline)}: every retry would get 409 and the run would never "
            f"complete. To fix it, {'; or '.join(fixes)}; or lower lease_seconds (the retries must come until at "
            "least the lease has passed)")

def _retry_policy(retry: Any, lease_seconds: int, attempt_deadline_seconds: int) -> RetryPolicy:
    """Resolve ``retry`` with the component's defaults and check RetryConfig's limits.

    https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#RetryConfig:
    retryCount "Values greater than 5 and negative values are not allowed"; maxBackoffDuration
    default 1 h; maxDoublings default 5; maxRetryDuration default 0 (unlimited). The component's own
    defaults make a crashed attempt's run recoverable: ``retry_count`` 5 (Scheduler's is 0) and
    ``min_backoff_seconds`` the smallest whole number (at least 5, Scheduler's default) for which the
    retries span 1.5 × ``lease_seconds`` (15 s for the default 300 s lease: waits 15, 30, 60, 120, 240 s).
    """
    if not isinstance(retry, Mapping):
        raise DedupConfigError("retry", f"must be a mapping, got {retry!r}")
    unknown = sorted(set(retry) - _RETRY_KEYS)
    if unknown:
        raise DedupConfigError(f"retry.{unknown[0]}", f"unknown key; valid keys are {', '.join(sorted(_RETRY_KEYS))}")
    problems = _Problems()  # every field's problem at once

    def whole(key: str, default: int, low: int = 0, high: int | None = None, meaning: str = "") -> int:
        value = _int(retry, key, default, field=f"retry.{key}")
        if value < low or (high is not None and value > high):
            bounds = f"use {low} to {high}" if high is not None else f"use {low} or more"
            raise DedupConfigError(f"retry.{key}", f"{value} is outside Cloud Scheduler's range; {bounds}{meaning}")
        return value

    count = problems.run(lambda: whole("retry_count", DEFAULT_RETRY_COUNT, 0, RETRY_COUNT_MAX), DEFAULT_RETRY_COUNT)
    duration = problems.run(lambda: whole("max_retry_duration_seconds", 0, meaning=" (0 means unlimited)"), 0)
    max_backoff = problems.run(lambda: whole("max_backoff_seconds", DEFAULT_MAX_BACKOFF_SECONDS),
                               DEFAULT_MAX_BACKOFF_SECONDS)
    doublings = problems.run(lambda: whole("max_doublings", DEFAULT_MAX_DOUBLINGS), DEFAULT_MAX_DOUBLINGS)
    spanning = min_backoff_to_recover(RetryPolicy(count, duration, 0, max_backoff, doublings),
                                      CRASH_RECOVERY_FACTOR * lease_seconds, attempt_deadline_seconds)
    default_min = max(DEFAULT_MIN_BACKOFF_SECONDS, spanning or 0) if spanning is not None else DEFAULT_MIN_BACKOFF_SECONDS
    default_min = min(default_min, max_backoff)
    min_backoff = problems.run(lambda: whole("min_backoff_seconds", default_min), default_min)
    bad = {error.field for error in problems.errors}
    if not bad & {"retry.min_backoff_seconds", "retry.max_backoff_seconds"} and min_backoff > max_backoff:
        problems.add(DedupConfigError(
            "retry.min_backoff_seconds", f"{min_backoff} s is longer than max_backoff_seconds ({max_backoff} s)"))
    problems.raise_any()
    return RetryPolicy(count, duration, min_backoff, max_backoff, doublings)


def service_resource_name(s: DedupSettings) -> str:
    """``projects/P/locations/R/services/S``: the handler's Cloud Run service (``DEDUP_SERVICE``)."""
    return f"projects/{s.project}/locations/{s.region}/services/{s.service_name}"


def scheduler_job_resource_name(s: DedupSettings) -> str:
    """``projects/P/locations/R/jobs/J``: the Scheduler job the handler serves (``DEDUP_SCHEDULER_JOB``)."""
    return f"projects/{s.project}/locations/{s.region}/jobs/{s.scheduler_job_name}"


def store_environment(s: DedupSettings) -> dict[str, pulumi.Input[str]]:
    """Where the handler's run store is: ``DEDUP_DATABASE`` (Firestore); ``DEDUP_STORE=spanner`` with
    ``DEDUP_SPANNER_INSTANCE`` and ``DEDUP_SPANNER_DATABASE``; or ``DEDUP_STORE=redis`` with the endpoint, the
    mounted secrets and ``WAIT`` (:func:`~scheduler_dedup.infra.stores.memorystore.redis_environment`)."""
    if s.store_kind == "spanner":
        assert s.spanner_instance is not None
        return {"DEDUP_STORE": HANDLER_STORE["spanner"], "DEDUP_SPANNER_INSTANCE": s.spanner_instance,
                "DEDUP_SPANNER_DATABASE": s.database_id}
    if s.store_kind == "memorystore":
        from scheduler_dedup.infra.stores.memorystore import redis_environment

        assert s.store is not None and s.store.redis is not None
        return {"DEDUP_DATABASE": s.database_id, **redis_environment(s.store.redis)}
    return {"DEDUP_DATABASE": s.database_id}


def handler_environment(s: DedupSettings) -> dict[str, pulumi.Input[str]]:
    """The handler's runtime contract: the ``DEDUP_*`` environment of the Cloud Run service or App Engine version.

    On Cloud Run, ``DEDUP_ALLOWED_CALLERS`` (the Scheduler service account email) is added by the component,
    since the email is an output of a child resource. On App Engine the Scheduler target sends no OIDC token:
    ``DEDUP_APP_ENGINE_CALLER=true`` replaces ``DEDUP_OIDC_AUDIENCE``, ``DEDUP_TRUST_CLOUD_RUN_IAM`` and
    ``DEDUP_SERVICE`` (:mod:`scheduler_dedup.handler.callers.app_engine`).
    """
    env: dict[str, pulumi.Input[str]] = {
        "GOOGLE_CLOUD_PROJECT": s.project,
        "DEDUP_COLLECTION": s.collection,
        **store_environment(s),
        "DEDUP_LEASE_SECONDS": str(s.lease_seconds),
        "DEDUP_RETENTION_SECONDS": str(s.retention_seconds),
        "DEDUP_MANUAL_TOLERANCE_SECONDS": str(s.manual_tolerance_seconds),
        # Stored on each run record, so run history and checks know the expected fire times.
        "DEDUP_SCHEDULE": s.schedule,
        "DEDUP_TIME_ZONE": s.time_zone,
        # Firestore and downstream calls must give up well inside the attempt deadline, so a failure
        # is answered (500, released) while Scheduler still listens: a quarter and a half of it.
        "DEDUP_STORE_TIMEOUT_SECONDS": str(store_timeout_for(s.attempt_deadline_seconds)),
        "DEDUP_TARGET_TYPE": s.target_type,
        # One job per handler: deliveries naming another job are refused (403), the run check checks this one.
        "DEDUP_SCHEDULER_JOB": scheduler_job_resource_name(s),
    }
    if s.app_engine is not None:
        # App Engine strips its X-AppEngine-* headers from external requests; Scheduler's App Engine target
        # sets them: the handler admits only requests carrying App Engine's cron proof.
        env[APP_ENGINE_CALLER_ENV] = "true"
    else:
        env["DEDUP_OIDC_AUDIENCE"] = s.oidc_audience
        # Cloud Run IAM is enforced (no public invoker, invoker check on), so Cloud Run verifies the
        # token and forwards it with its signature removed; the handler then checks its claims, after
        # reading its own service's IAM policy to prove the premise (roles/run.viewer on this service).
        env["DEDUP_TRUST_CLOUD_RUN_IAM"] = "true"
        env["DEDUP_SERVICE"] = service_resource_name(s)
        # gunicorn threads = Cloud Run request concurrency (the component sets both from SERVER_THREADS).
        env["THREADS"] = str(SERVER_THREADS)
    if s.store is not None and s.store.ttl_owner is not None:
        # Where the TTL policy of these run records lives, since this stack has none (policy pack: dedup-firestore-ttl).
        env[TTL_OWNER_ENV] = s.store.ttl_owner
    if s.target_type == "python":
        assert s.job is not None
        env["DEDUP_JOB"] = s.job
    else:
        target = {"workflows": s.workflow, "cloud_run_job": s.cloud_run_job, "cloud_build_trigger": s.cloud_build_trigger,
                  "http": s.http_url}[s.target_type]
        assert target is not None
        env["DEDUP_TARGET"] = target
        if s.http_audience is not None:
            env["DEDUP_TARGET_AUDIENCE"] = s.http_audience
        env["DEDUP_TARGET_TIMEOUT_SECONDS"] = str(max(5, min(30, s.attempt_deadline_seconds // 2)))
    return env
