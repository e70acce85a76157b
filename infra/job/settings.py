"""Validate :class:`~scheduler_dedup.infra.args.DedupScheduledJobArgs` and resolve every default.

:func:`resolve_settings` is pure (no Pulumi resources), so tests and the offline checker can call it,
and the component calls it before creating any child: a misconfiguration fails ``pulumi preview``
with a :class:`~scheduler_dedup.infra.errors.DedupConfigError` that names the field and the fix.

Each concern's rules live in their own module, with the sources of their limits: :mod:`.inputs` (readers),
:mod:`.schedule_inputs`, :mod:`.target` (with :mod:`.entry_point`), :mod:`.deadlines`, :mod:`.retry_policy`,
:mod:`.job_store`, :mod:`.instances` and :mod:`.environment` (the handler's ``DEDUP_*`` environment).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from scheduler_dedup.handler.protocol.lease import lost_lease_advisory
from scheduler_dedup.handler.config.settings import DEFAULT_LEASE_SECONDS
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE
from scheduler_dedup.handler.schedule.overlap import overlap_advisory
from scheduler_dedup.handler.schedule.retry_windows import recovers_crash, retry_window_seconds
from scheduler_dedup.handler.schedule.schedule_checks import schedule_advisories
from scheduler_dedup.infra.errors import DedupConfigError, bool_input, read_str
from scheduler_dedup.infra.job.app_engine import resolve_app_engine
from scheduler_dedup.infra.args import DedupScheduledJobArgs, input_keys
from scheduler_dedup.handler.schedule.overlap_policy import replace_problem
from scheduler_dedup.infra.job.catch_up_inputs import catch_up_advisories, catch_up_error, expected_run_seconds
from scheduler_dedup.infra.job.overlap_inputs import resolve_catch_up_window, resolve_overlap
from scheduler_dedup.infra.job.deadlines import (
    DEFAULT_ATTEMPT_DEADLINE_SECONDS,
    REQUEST_TIMEOUT_MAX_SECONDS,
    as_written,
    resolve_attempt_deadline,
    resolve_lease,
    resolve_request_timeout,
    resolve_retention,
    resolve_tolerance,
)
from scheduler_dedup.infra.job.function_deploy import function_env_problem, function_path_problems, function_url
from scheduler_dedup.infra.job.cpu_allocation import function_cpu_advisory
from scheduler_dedup.infra.job.environment import check_handler_settings, handler_environment
from scheduler_dedup.infra.job.inputs import Problems, required_str, resource_prefix, service_account_email
from scheduler_dedup.infra.job.instances import DEFAULT_MAX_INSTANCE_COUNT, resolve_max_instances, resolve_min_instances
from scheduler_dedup.infra.job.job_config import resolve_job_config
from scheduler_dedup.infra.job.job_env import MAX_ENV_VARS
from scheduler_dedup.infra.job.job_names import derive_job_names, name_problems
from scheduler_dedup.infra.job.job_store import resolve_job_store
from scheduler_dedup.infra.job.oidc_account import oidc_account_problem
from scheduler_dedup.infra.job.resolved import DedupSettings
from scheduler_dedup.infra.job.retry_policy import crash_recovery_field, crash_recovery_fix, resolve_retry_policy
from scheduler_dedup.infra.job.scale_in import scale_in_advisory
from scheduler_dedup.infra.job.schedule_inputs import resolve_region, validate_schedule, validate_time_zone
from scheduler_dedup.infra.job.target import resolve_target
from scheduler_dedup.infra.project.providers import child_project
from scheduler_dedup.infra.stores.store import piece

__all__ = ["DEFAULT_ATTEMPT_DEADLINE_SECONDS", "DedupSettings", "advisories_of", "handler_environment",
           "resolve_settings", "validate_schedule", "validate_time_zone"]

AUDIENCE_HOST = "scheduler-dedup.invalid"
#: The component's inputs: the keys of :class:`~scheduler_dedup.infra.args.DedupScheduledJobArgs`.
ALLOWED_KEYS = frozenset(input_keys(DedupScheduledJobArgs))


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
    problems = Problems()
    prefix = problems.run(lambda: resource_prefix(read_str(args, "resource_prefix") or name,
                                                    "resource_prefix" if args.get("resource_prefix") else "name"), None)
    unknown = sorted(set(args) - ALLOWED_KEYS)
    for key in unknown:
        problems.add(DedupConfigError(key, f"unknown input; valid inputs are {', '.join(sorted(ALLOWED_KEYS))}"))

    schedule = problems.run(lambda: validate_schedule(
        required_str(args, "schedule", "a unix-cron expression such as '*/15 * * * *'")), None)
    time_zone = problems.run(lambda: validate_time_zone(read_str(args, "time_zone") or DEFAULT_TIME_ZONE), None)
    region = problems.run(lambda: resolve_region(args), None)
    project = problems.run(lambda: child_project(args, default_project, provider_name), None)
    target = problems.run(lambda: resolve_target(args), None)
    # the Scheduler target: Cloud Run (HTTP target, OIDC) or App Engine
    app_engine = (problems.run(lambda: resolve_app_engine(args["app_engine"], args), None)
                  if args.get("app_engine") is not None else None)

    # --- deadlines, lease, retries, retention: each checked against the others that are valid ---
    attempt_deadline = problems.run(lambda: resolve_attempt_deadline(args, app_engine), None)
    # A value refused only for how it relates to another still takes part in the checks after it, as written: a
    # file with three such mistakes shows all three at once, not one per run.
    request_timeout = problems.run(lambda: resolve_request_timeout(args, attempt_deadline, app_engine),
                                   as_written(args, "request_timeout_seconds", 1, REQUEST_TIMEOUT_MAX_SECONDS))
    lease = problems.run(lambda: resolve_lease(args, request_timeout, attempt_deadline),
                         as_written(args, "lease_seconds", 1))
    retry = problems.run(lambda: resolve_retry_policy(args.get("retry") or {}, lease or DEFAULT_LEASE_SECONDS,
                                               attempt_deadline or DEFAULT_ATTEMPT_DEADLINE_SECONDS), None)
    window = (int(retry_window_seconds(retry, attempt_deadline))
              if retry is not None and attempt_deadline is not None else None)
    retention = problems.run(lambda: resolve_retention(args, window), None)
    tolerance = problems.run(lambda: resolve_tolerance(args), None)
    overlap = problems.run(lambda: resolve_overlap(args), "allow")
    if target is not None:
        cannot = replace_problem(overlap, target.type, "overlap", "the target's type")
        if cannot:
            problems.add(DedupConfigError("overlap", cannot.split(": ", 1)[1]))
    catch_up = problems.run(lambda: resolve_catch_up_window(args), 0)

    store = problems.run(lambda: resolve_job_store(args, prefix or name, project or None, region), None)
    if store is not None and region is not None:
        where = piece(store.kind).location_problem(store)
        if where:
            problems.add(DedupConfigError("database_location" if args.get("database_location") else "region", where))
    scheduler_email = problems.run(lambda: service_account_email(args, "scheduler_service_account_email"), None)
    if isinstance(scheduler_email, str) and project:
        misplaced = oidc_account_problem(scheduler_email, project)
        if misplaced:
            problems.add(DedupConfigError("scheduler_service_account_email", misplaced))
    build_email = problems.run(lambda: service_account_email(args, "build_service_account_email"), None)
    deletion_protection = problems.run(lambda: bool_input(args, "deletion_protection", False), False)
    # The source deploy (job_source, or a proxy target: no image, no App Engine) is a Cloud Run function, which cannot
    # have what function_path_problems names; its CPU is allocated per request.
    source_deploy = target is not None and target.image is None and args.get("app_engine") is None
    if source_deploy:
        for problem in function_path_problems(args):
            problems.add(problem)
    cpu_always_allocated = problems.run(lambda: bool_input(args, "cpu_always_allocated", not source_deploy),
                                        not source_deploy)
    protect_database = problems.run(lambda: bool_input(args, "protect_database", True), True)
    paused = problems.run(lambda: bool_input(args, "paused", False), False)
    max_instances = problems.run(lambda: resolve_max_instances(args), DEFAULT_MAX_INSTANCE_COUNT)
    min_instances = problems.run(lambda: resolve_min_instances(args, max_instances), 0)
    base_image = problems.run(lambda: read_str(args, "base_image"), None) or (
        f"{region}-docker.pkg.dev/serverless-runtimes/google-22/runtimes/python312"
    )
    audience = problems.run(lambda: read_str(args, "oidc_audience"), None)
    job_config = problems.run(lambda: resolve_job_config(
        args, project or None, region, store_network=store is not None and piece(store.kind).STORE_NETWORK), None)
    if prefix and project and region:  # every name the job derives, against Google's rules, at preview
        for error in name_problems(derive_job_names(name, prefix, project, region),
                                   "resource_prefix" if args.get("resource_prefix") else "name"):
            problems.add(error)
    if problems.errors and retry is not None and lease is not None and attempt_deadline is not None \
            and not recovers_crash(retry, lease, attempt_deadline):  # shown now too, not on the next run
        problems.add(DedupConfigError(crash_recovery_field(args.get("retry") or {}),
                                      crash_recovery_fix(retry, lease, attempt_deadline)))
    problems.raise_any()
    assert (prefix and schedule and time_zone and region and project and target and attempt_deadline
            and request_timeout and lease and retry and retention is not None and tolerance is not None and store
            and job_config)

    # Crash recovery (checked after the handler's own checks, below): a retry must still come once a crashed
    # attempt's lease has expired.
    crash_problem = None if recovers_crash(retry, lease, attempt_deadline) else (
        crash_recovery_field(args.get("retry") or {}), crash_recovery_fix(retry, lease, attempt_deadline))

    names = derive_job_names(name, prefix, project, region)
    service_name, scheduler_job_name = names.service, names.scheduler_job
    audience = audience or (function_url(project, region, service_name) if source_deploy else
                            f"https://{AUDIENCE_HOST}/projects/{project}/locations/{region}/services/{service_name}")
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
        store_kind=store.kind, instance_id=store.instance_id, own_store=store.own, job_config=job_config,
        paused=paused,
        overlap=overlap, catch_up_window_seconds=catch_up,
        expected_run_seconds=expected_run_seconds(args, target.type),
    )
    problems.run(lambda: check_handler_settings(settings), None)
    # Cloud Run: at most MAX_ENV_VARS per container; the component adds two beside handler_environment.
    count = len(handler_environment(settings)) + 2 + len(job_config.env) + len(job_config.secret_env)
    if count > MAX_ENV_VARS:
        problems.add(DedupConfigError("env", f"{count} environment variables with the handler's; Cloud Run takes at "
                                             f"most {MAX_ENV_VARS} per container: move settings into a mounted file "
                                             "(secret_files) or fewer variables"))
    too_large = function_env_problem({**handler_environment(settings), **job_config.env}) if source_deploy else None
    if too_large:
        problems.add(DedupConfigError("env", too_large))
    if crash_problem is not None:
        problems.add(DedupConfigError(*crash_problem))
    catch_up_problem = catch_up_error(settings)
    if catch_up_problem is not None:
        problems.add(catch_up_problem)
    problems.raise_any()
    return replace(settings, advisories=advisories_of(settings))


def advisories_of(s: DedupSettings) -> tuple[str, ...]:
    """What the settings do that a user would want to know at preview, though Scheduler accepts it; each message is
    the one the policy pack's advisory rule of the same concern gives:

    * the time zone is an alias of a canonical zone (:func:`~scheduler_dedup.handler.schedule.time_zones.time_zone_alias_advisory`;
      pack: ``scheduler-time-zone-canonical``);
    * the schedule uses a form Cloud Scheduler's cron page does not settle
      (:func:`~scheduler_dedup.handler.schedule.cron.readings.unsettled_cron_forms`; pack: ``scheduler-schedule-unsettled``);
    * a step selects one value of its range, so the job runs less often than it reads
      (:func:`~scheduler_dedup.handler.schedule.cron.oversized_steps.oversized_step_forms`; pack: ``scheduler-schedule-step``);
    * a run's retry window, or one slow attempt, reaches the next fire time, so Scheduler delays or skips it
      (:func:`~scheduler_dedup.handler.schedule.overlap.overlap_advisory`; pack: ``scheduler-runs-overlap``);
    * a Python job built from source runs on a Cloud Run function, with CPU per request
      (:func:`~scheduler_dedup.infra.job.cpu_allocation.function_cpu_advisory`; pack: ``dedup-cpu-always-allocated``);
    * a Python job may outlive its attempt deadline on an instance Cloud Run may scale in (not on App Engine)
      (:func:`~scheduler_dedup.infra.job.scale_in.scale_in_advisory`; pack: ``dedup-scale-in``);
    * a gap as long as the catch-up window takes more than one delivery to catch up
      (:func:`~scheduler_dedup.handler.schedule.catch_up_budget.catch_up_advisory`; pack: ``dedup-catch-up-budget``);
    * a plain environment variable looks like a credential
      (:func:`~scheduler_dedup.infra.job.job_env.credential_advisory`);
    * a downstream target's execution cannot be stopped when its lease is lost
      (:func:`~scheduler_dedup.handler.protocol.lease.lost_lease_advisory`).
    """
    found = schedule_advisories(s.schedule, s.time_zone)
    overlap = overlap_advisory(s.schedule, s.time_zone, s.attempt_deadline_seconds, s.retry_window_seconds)
    if overlap:
        found.append(overlap)
    # on App Engine the handler runs in no Cloud Run service, which the advisory is about
    python_on_function = s.target_type == "python" and s.image is None and s.app_engine is None
    per_request = function_cpu_advisory(python_on_function)
    if per_request:
        found.append(per_request)
    scale_in = scale_in_advisory(s.target_type == "python" and s.app_engine is None, s.min_instance_count,
                                 s.attempt_deadline_seconds)
    if scale_in:
        found.append(scale_in)
    found.extend(catch_up_advisories(s))
    found.extend(s.job_config.advisories())
    lost_lease = lost_lease_advisory(s.target_type)
    if lost_lease:
        found.append(lost_lease)
    return tuple(found)
