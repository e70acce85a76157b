"""The root stack program: read stack config, create one :class:`DedupScheduledJob` (or, with
``deploy: store``, one :class:`~scheduler_dedup.infra.stores.store.DedupStore` for job stacks to share), export its outputs.

A job stack whose config names a store stack (``storeStack: org/project/stack``) reads that stack's outputs with
a ``StackReference`` and passes them to the job as ``store``: the job creates no database and no TTL policy.

The repo root's ``__main__.py`` only calls :func:`main`. The offline checker
(``scheduler-dedup check``) and the tests run :func:`deploy_from_config` under Pulumi mocks through
:mod:`scheduler_dedup.infra.stack.mock_run`.

Config keys (namespace ``scheduler-dedup``, the project name in ``Pulumi.yaml``) are listed in
:data:`CONFIG_KEYS`; they are stable. Durations are whole seconds. ``gcp:project`` is the project.
"""

from __future__ import annotations

import difflib
import re

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from scheduler_dedup.infra.args import DedupScheduledJobArgs, DedupStoreRefArgs
from scheduler_dedup.infra.job.component import DedupScheduledJob
from scheduler_dedup.infra.errors import DedupConfigError, DedupConfigErrors
from scheduler_dedup.infra.stores.store import DedupStore, store_kind

PROJECT_NAME = "scheduler-dedup"
DEFAULT_COMPONENT_NAME = "scheduled-job"
DEFAULT_STORE_NAME = "dedup-store"
#: What a Firestore or Spanner store stack exports; a job stack's ``storeStack`` reads these names.
STORE_OUTPUTS = ("kind", "project", "instance_id", "database_id", "database_resource_name", "location", "collections",
                 "ttl_field")
#: What a Memorystore store stack (``storeKind: memorystore``) exports instead.
MEMORYSTORE_OUTPUTS = ("kind", "project", "location", "collections", "redis_host", "redis_port", "redis_url",
                       "auth_secret", "ca_secret", "network", "subnetwork", "wait_timeout_ms")
#: Stack config keys of a Memorystore store stack, and the DedupStore input each sets.
MEMORYSTORE_KEYS = {"redisMemorySizeGb": "memory_size_gb", "redisNetwork": "authorized_network",
                    "redisSubnetwork": "subnetwork", "redisWaitTimeoutMs": "wait_timeout_ms",
                    "deletionProtection": "deletion_protection", "protectDatabase": "protect_database",
                    "collection": "collections"}
#: Stack config keys of a Spanner store stack only (beyond :data:`STORE_KEYS`' shared ones).
SPANNER_KEYS = {"spannerInstance": "instance_id", "createSpannerInstance": "create_instance",
                "spannerInstanceConfig": "instance_config", "spannerProcessingUnits": "processing_units"}
#: Stack config keys a Firestore or Spanner store stack uses, and the DedupStore input each sets.
STORE_KEYS = {"storeKind": "kind", "databaseId": "database_id", "createDatabase": "create_database",
              "collection": "collections", "databaseLocation": "location", "deletionProtection": "deletion_protection",
              "protectDatabase": "protect_database", **SPANNER_KEYS}
#: Store stack keys of each type other than string.
_STORE_KEY_TYPES = {"createDatabase": "boolean", "deletionProtection": "boolean", "protectDatabase": "boolean",
                    "createSpannerInstance": "boolean", "spannerProcessingUnits": "integer",
                    "redisMemorySizeGb": "integer", "redisWaitTimeoutMs": "integer"}
#: Inputs one stack config key sets as a whole (a mapping or a list), whose errors name a part of it.
_WHOLE_VALUE_INPUTS = ("env", "secret_env", "secret_files", "labels", "job_roles")
_STACK_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$")


@dataclass(frozen=True)
class ConfigKey:
    """One stack config key: its type (``string``/``integer``/``boolean``/``array`` of strings/``object``: a YAML
    mapping or list, checked by the component) and the component input it sets."""

    key: str
    type: str
    arg: str  # dotted path into DedupScheduledJobArgs; "" for the component name
    description: str


#: Every stack config key the root program reads, in documentation order.
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("name", "string", "", "component name; GCP resource ids derive from it (default scheduled-job)"),
    ConfigKey("resourcePrefix", "string", "resource_prefix",
              "prefix GCP resource ids derive from (default: name); keep the old name when renaming"),
    ConfigKey("schedule", "string", "schedule", "unix-cron schedule, five fields"),
    ConfigKey("timeZone", "string", "time_zone", "IANA time zone of the schedule"),
    ConfigKey("region", "string", "region", "region of Cloud Run, Scheduler and the database"),
    ConfigKey("jobSource", "string", "job_source", "directory of the Python job, relative to Pulumi.yaml"),
    ConfigKey("job", "string", "job", "job entry point module:function"),
    ConfigKey("image", "string", "image", "prebuilt container image instead of jobSource"),
    ConfigKey("workflow", "string", "workflow_target.workflow", "proxy target: projects/P/locations/L/workflows/W"),
    ConfigKey("cloudRunJob", "string", "cloud_run_job_target.job", "proxy target: projects/P/locations/L/jobs/J"),
    ConfigKey("cloudBuildTrigger", "string", "cloud_build_trigger_target.trigger",
              "proxy target: projects/P/locations/L/triggers/T (its build gets the substitution _DEDUP_RUN_ID)"),
    ConfigKey("cloudBuildTriggerServiceAccountEmail", "string", "cloud_build_trigger_target.service_account_email",
              "the service account cloudBuildTrigger's builds run as, for the actAs grant on it"),
    ConfigKey("httpUrl", "string", "http_target.url", "proxy target: https URL"),
    ConfigKey("httpCloudRunService", "string", "http_target.cloud_run_service",
              "Cloud Run service behind httpUrl: projects/P/locations/L/services/S"),
    ConfigKey("httpAudience", "string", "http_target.audience",
              "ID-token audience for httpUrl (default per host: origin of *.run.app, full URL on *.cloudfunctions.net)"),
    ConfigKey("appEngineService", "string", "app_engine.service",
              "serve the handler on App Engine standard: the service Scheduler's App Engine target delivers to"),
    ConfigKey("appEngineVersion", "string", "app_engine.version",
              "App Engine version routed to (default: dedup-<archive hash> when deployed, else the serving ones)"),
    ConfigKey("appEngineRelativeUri", "string", "app_engine.relative_uri", "path the App Engine target POSTs to (default /)"),
    ConfigKey("appEngineDeploy", "boolean", "app_engine.deploy",
              "deploy the handler as an App Engine standard version (default true; false: only the Scheduler job)"),
    ConfigKey("appEngineLocation", "string", "app_engine.location",
              "the App Engine application's location id (gcloud app describe), checked against region"),
    ConfigKey("appEngineRequestTimeoutSeconds", "integer", "app_engine.request_timeout_seconds",
              "request deadline of your own App Engine service (appEngineDeploy false), s (default 600)"),
    ConfigKey("attemptDeadlineSeconds", "integer", "attempt_deadline_seconds",
              "Scheduler attempt deadline: 15..1800 s (Cloud Run), 15..86400 s (App Engine)"),
    ConfigKey("requestTimeoutSeconds", "integer", "request_timeout_seconds", "Cloud Run request timeout, s"),
    ConfigKey("leaseSeconds", "integer", "lease_seconds", "claim lease, s"),
    ConfigKey("retentionSeconds", "integer", "retention_seconds", "run record retention (TTL), s"),
    ConfigKey("manualToleranceSeconds", "integer", "manual_tolerance_seconds", "manual run tolerance, s"),
    ConfigKey("overlap", "string", "overlap", "overlap policy: allow, skip or buffer_one"),
    ConfigKey("catchUpWindowSeconds", "integer", "catch_up_window_seconds",
              "run missed fire times of this window once each on the next delivery, s (0 = off)"),
    ConfigKey("retryCount", "integer", "retry.retry_count", "Scheduler retries, 0..5"),
    ConfigKey("maxRetryDurationSeconds", "integer", "retry.max_retry_duration_seconds", "retry time limit, s (0 = none)"),
    ConfigKey("minBackoffSeconds", "integer", "retry.min_backoff_seconds", "first retry wait, s"),
    ConfigKey("maxBackoffSeconds", "integer", "retry.max_backoff_seconds", "largest retry wait, s"),
    ConfigKey("maxDoublings", "integer", "retry.max_doublings", "times the retry wait doubles"),
    ConfigKey("collection", "string", "collection", "Firestore collection of run records"),
    ConfigKey("databaseId", "string", "database_id", "Firestore database id"),
    ConfigKey("createDatabase", "boolean", "create_database", "create the database (false: use databaseId)"),
    ConfigKey("databaseLocation", "string", "database_location", "Firestore location of a created database"),
    ConfigKey("deletionProtection", "boolean", "deletion_protection", "Cloud Run / database deletion protection"),
    ConfigKey("protectDatabase", "boolean", "protect_database",
              "Pulumi protect on the database, and on a Spanner or Memorystore instance the stack creates: a plan "
              "replacing or deleting one fails (default true)"),
    ConfigKey("cpuAlwaysAllocated", "boolean", "cpu_always_allocated",
              "CPU always allocated on Cloud Run (false: request-based billing, cheaper, a long job may run twice)"),
    ConfigKey("baseImage", "string", "base_image", "Cloud Run functions base image"),
    ConfigKey("maxInstanceCount", "integer", "max_instance_count", "max Cloud Run instances"),
    ConfigKey("minInstanceCount", "integer", "min_instance_count",
              "Cloud Run instances kept without requests (1: a job outliving its attempt deadline is not scaled in)"),
    ConfigKey("oidcAudience", "string", "oidc_audience", "override the OIDC audience"),
    ConfigKey("env", "object", "env", "the job's environment variables, NAME: value (not DEDUP_*, PORT, K_*)"),
    ConfigKey("secretEnv", "object", "secret_env",
              "Secret Manager secrets as env vars, NAME: {secret: ID, version: N or latest}"),
    ConfigKey("secretFiles", "object", "secret_files",
              "Secret Manager secrets as files, a list of {secret: ID, path: /secrets/DIR/FILE, version}"),
    ConfigKey("cpu", "string", "cpu", "vCPUs per Cloud Run instance: 1, 2, 4, 6 or 8 (default 1)"),
    ConfigKey("memory", "string", "memory", "memory per Cloud Run instance, 512Mi to 32Gi within the CPU's range"),
    ConfigKey("labels", "object", "labels", "labels on every child that takes labels, key: value"),
    ConfigKey("vpcNetwork", "string", "vpc.network", "Direct VPC egress: the network"),
    ConfigKey("vpcSubnetwork", "string", "vpc.subnetwork", "Direct VPC egress: the subnetwork in the job's region"),
    ConfigKey("vpcConnector", "string", "vpc.connector",
              "Serverless VPC Access connector projects/P/locations/R/connectors/C instead of Direct VPC egress"),
    ConfigKey("vpcEgress", "string", "vpc.egress", "PRIVATE_RANGES_ONLY (default) or ALL_TRAFFIC"),
    ConfigKey("jobRoles", "object", "job_roles",
              "roles for the job's own work, a list of {role, resource} (resource: projects/P, buckets/B, ...)"),
    ConfigKey("paused", "boolean", "paused", "pause the Scheduler job: fire times are reported paused, not missed"),
    ConfigKey("alertNotificationChannels", "array", "alerts.notification_channels",
              "turn alerting on: notification channels projects/P/notificationChannels/N"),
    ConfigKey("alertGraceSeconds", "integer", "alerts.grace_seconds", "seconds before a run without a record is missed"),
    ConfigKey("alertReleasedThreshold", "integer", "alerts.released_threshold",
              "releases within the retry window before the released alert fires"),
    ConfigKey("alertFailureThreshold", "integer", "alerts.failure_threshold",
              "consecutive failed runs before the run-failed alert (default 1)"),
    ConfigKey("alertMaxRuntimeSeconds", "integer", "alerts.max_runtime_seconds",
              "alert on a run still in progress this long after its claim"),
    ConfigKey("alertRenotifySeconds", "integer", "alerts.renotify_seconds",
              "re-notify open incidents of the metric-based policies this often"),
    ConfigKey("storeStack", "string", "store", "a store stack (org/project/stack): use its database and TTL policy"),
    ConfigKey("storeKind", "string", "store_kind",
              "firestore (default), spanner or memorystore: the store this stack deploys (deploy: store), the kind of "
              "its storeStack, or (firestore, spanner) the job's own store"),
    ConfigKey("spannerInstance", "string", "spanner_instance",
              "Spanner: existing instance id for the database (default: an instance of its own, 100 processing "
              "units)"),
    ConfigKey("createSpannerInstance", "boolean", "",
              "spanner store stack: create the instance (default true; false: adopt spannerInstance)"),
    ConfigKey("spannerInstanceConfig", "string", "",
              "spanner store stack: instance config of a created instance (default regional-<region>)"),
    ConfigKey("spannerProcessingUnits", "integer", "",
              "spanner store stack: processing units of a created instance (default 100, the smallest)"),
    ConfigKey("redisMemorySizeGb", "integer", "", "memorystore store stack: capacity, GB (default 1)"),
    ConfigKey("redisNetwork", "string", "", "memorystore store stack: authorized VPC network (default: default)"),
    ConfigKey("redisSubnetwork", "string", "", "memorystore store stack: subnetwork for the jobs' Direct VPC egress"),
    ConfigKey("redisWaitTimeoutMs", "integer", "", "memorystore store stack: WAIT timeout of decisive writes, ms"),
    ConfigKey("schedulerServiceAccountEmail", "string", "scheduler_service_account_email",
              "shared Scheduler OIDC account instead of <name>-sched"),
    ConfigKey("buildServiceAccountEmail", "string", "build_service_account_email",
              "shared Cloud Build account instead of <name>-build"),
    ConfigKey("deploy", "string", "", "job (default), or store: deploy a DedupStore for job stacks to share"),
)


def _unknown_keys() -> list[DedupConfigError]:
    """A ``scheduler-dedup:*`` stack config key that the program does not read, one error each (a typo would
    otherwise silently fall back to a default, e.g. ``retrycount`` leaving retries at 0), naming the closest known
    key."""
    from pulumi.runtime.config import CONFIG, get_config_env

    known = {entry.key for entry in CONFIG_KEYS}
    present = {*CONFIG.get(), *get_config_env()}
    errors = []
    for full_key in sorted(present):
        namespace, _, key = full_key.partition(":")
        if namespace == PROJECT_NAME and key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            hint = f"did you mean {PROJECT_NAME}:{close[0]}?" if close else f"known keys: {', '.join(sorted(known))}"
            errors.append(DedupConfigError(key, f"stack config {full_key} is not a setting of this stack; {hint}"))
    return errors


def _refuse_unknown_keys() -> None:
    """Raises: DedupConfigError (or DedupConfigErrors): every stack config key the program does not read."""
    _raise_all(_unknown_keys())


def _raise_all(errors: list[DedupConfigError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise DedupConfigErrors(errors)


def args_from_config(config: pulumi.Config, *, base_dir: Path | None = None) -> tuple[str, DedupScheduledJobArgs]:
    """Translate stack config into ``(component name, DedupScheduledJobArgs)``.

    Args:
        config: the project's :class:`pulumi.Config`.
        base_dir: folder that a relative ``jobSource`` is relative to (default: the working
            directory, which ``pulumi up`` sets to the folder of ``Pulumi.yaml``).

    Raises:
        DedupConfigError: a key has the wrong type (e.g. a non-integer deadline) or is unknown;
            :class:`DedupConfigErrors` for several.
    """
    name, args, errors = _read_config(config, base_dir=base_dir)
    _raise_all(errors)
    return name, args


def _read_config(config: pulumi.Config, *, base_dir: Path | None = None
                 ) -> tuple[str, DedupScheduledJobArgs, list[DedupConfigError]]:
    """``(component name, the args of the keys that could be read, an error per key that could not)``."""
    errors = _unknown_keys()
    name = DEFAULT_COMPONENT_NAME
    raw: dict[str, Any] = {}
    for entry in CONFIG_KEYS:
        try:
            if entry.type == "integer":
                value: Any = config.get_int(entry.key)
            elif entry.type == "boolean":
                value = config.get_bool(entry.key)
            elif entry.type == "object":
                value = config.get_object(entry.key)
            elif entry.type == "array":
                value = config.get_object(entry.key)
                if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
                    errors.append(DedupConfigError(entry.arg, f"stack config {PROJECT_NAME}:{entry.key} must be a list "
                                                              f"of strings, got {value!r}"))
                    continue
            else:
                value = config.get(entry.key)
        except pulumi.ConfigTypeError as exc:
            errors.append(DedupConfigError(entry.arg or "name", f"stack config {PROJECT_NAME}:{entry.key}: {exc}"))
            continue
        if value is None:
            continue
        if entry.key == "name":
            name = value
            continue
        if not entry.arg:  # deploy, and the keys only a store stack reads
            if entry.key != "deploy":
                errors.append(DedupConfigError(entry.key, f"stack config {PROJECT_NAME}:{entry.key} is a setting of a "
                                                          "store stack (deploy: store): remove it from this job stack"))
            continue
        if entry.key == "jobSource":
            path = Path(value)
            value = str(path if path.is_absolute() else (base_dir or Path.cwd()) / path)
        target = raw
        *parents, leaf = entry.arg.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return name, raw, errors  # type: ignore[return-value]  # keys are DedupScheduledJobArgs keys by construction


def deploy_from_config(*, base_dir: Path | None = None) -> DedupScheduledJob:
    """Create one :class:`DedupScheduledJob` from the stack config (see :data:`CONFIG_KEYS`).

    Every problem is reported at once: keys that cannot be read and the component's refusals of the rest, each
    naming its stack config key.

    Raises:
        DedupConfigError: invalid config, before any resource is created (:class:`DedupConfigErrors` for several).
    """
    import pulumi_gcp as gcp

    from scheduler_dedup.infra.job.settings import resolve_settings

    name, args, errors = _read_config(pulumi.Config(), base_dir=base_dir)
    try:
        store_stack = args.get("store")
        if isinstance(store_stack, str):
            args["store"] = store_from_stack(store_stack, str(args.get("store_kind") or "firestore"))
        if errors:  # the component is not created: still report what it would refuse of the keys that were read
            resolve_settings(name, args, default_project=gcp.config.project)
            _raise_all(errors)
        return DedupScheduledJob(name, args)
    except DedupConfigError as exc:
        found = [*errors, *(exc.errors if isinstance(exc, DedupConfigErrors) else [exc])]
        _raise_all(list({str(e): _in_stack_config_error(e) for e in found}.values()))
        raise


def _in_stack_config_error(error: DedupConfigError) -> DedupConfigError:
    """``error`` naming the stack config key of its input, where one sets it."""
    key = stack_key_for(error.field)
    if key is None or f"{PROJECT_NAME}:" in str(error):
        return error
    message = in_stack_config_terms(str(error).split(": ", 1)[-1])
    return DedupConfigError(error.field, f"{message} (stack config {PROJECT_NAME}:{key})")


def in_stack_config_terms(message: str) -> str:
    """``message`` with each component input it names (``retry.min_backoff_seconds``, ``lease_seconds``) replaced by
    the stack config key that sets it (``scheduler-dedup:minBackoffSeconds``), so root-stack users read the key
    they edit."""
    import re

    # only identifier-like inputs: plain words (schedule, job, region) also occur as words in messages
    names = sorted(((entry.arg, entry.key) for entry in CONFIG_KEYS if "_" in entry.arg or "." in entry.arg),
                   key=lambda pair: -len(pair[0]))
    top_level = {arg for arg, _ in names}
    for arg, key in names:
        # a nested input's leaf is its spelling too, unless a top-level input has that name (request_timeout_seconds)
        leaf = arg.rsplit(".", 1)[-1]
        spellings = (arg,) if leaf in top_level and leaf != arg else (arg, leaf)
        for spelling in (s for s in dict.fromkeys(spellings) if "_" in s or "." in s):
            message = re.sub(rf"(?<![\w.:-]){re.escape(spelling)}(?![\w])", f"{PROJECT_NAME}:{key}", message)
    return message


def store_from_stack(stack: str, kind: str = "firestore") -> DedupStoreRefArgs:
    """A job's ``store`` input from a store stack's outputs (:data:`STORE_OUTPUTS`, or :data:`MEMORYSTORE_OUTPUTS`
    for ``kind="memorystore"``), read with a ``StackReference``.

    Args:
        stack: the store stack's name, ``org/project/stack`` (or ``stack`` in this project and organization).
        kind: the store stack's kind (the job stack's ``storeKind``): it decides what the job creates, so it is
            stack config, known at preview, not the store stack's output; a store stack of another kind is refused
            once its ``kind`` output resolves.

    Raises:
        DedupConfigError: field ``store``: not a stack name; field ``store_kind``: not a store kind, or (inside the
            output, at preview) not the store stack's kind.
    """
    if not _STACK_NAME_RE.match(stack):
        raise DedupConfigError("store", f"{stack!r} is not a stack name: use org/project/stack, e.g. "
                                        "acme/scheduler-dedup/store")
    store_kind({"store_kind": kind}, "store_kind")
    reference = pulumi.StackReference(stack)

    def same_kind(values: list[Any]) -> Any:
        actual, project = values
        if actual is not None and actual != kind:
            raise DedupConfigError("store_kind", f"the store stack {stack} is a {actual} store, but this stack's "
                                                 f"storeKind is {kind}: set {PROJECT_NAME}:storeKind to {actual}")
        return project

    project = pulumi.Output.all(reference.get_output("kind"), reference.require_output("project")).apply(same_kind)
    if kind == "memorystore":
        ref: dict[str, Any] = {"kind": "memorystore", "project": project}
        for output in MEMORYSTORE_OUTPUTS[2:]:
            if output not in ("location", "redis_url"):
                ref[output] = reference.require_output(output)
        return ref  # type: ignore[return-value]
    found: DedupStoreRefArgs = {"kind": kind, "project": project, "database_id": reference.require_output("database_id"),
                                "collections": reference.require_output("collections"), "ttl_owner": f"stack {stack}"}
    if kind == "spanner":
        found["instance_id"] = reference.require_output("instance_id")
    return found


def store_from_config(config: pulumi.Config) -> DedupStore:
    """Create the :class:`DedupStore` of a store stack (``deploy: store``) from its config.

    Uses ``name`` (default ``dedup-store``), ``region`` or ``databaseLocation`` (its location), and the keys of
    :data:`STORE_KEYS` (``storeKind``, ``databaseId``, ``createDatabase``, ``collection``, ``deletionProtection``,
    ``protectDatabase``; on Spanner also :data:`SPANNER_KEYS`), or with ``storeKind: memorystore`` those of
    :data:`MEMORYSTORE_KEYS`; ``gcp:project`` is the project.

    Raises:
        DedupConfigError: a job setting in a store stack, or an invalid store input (naming the stack key).
    """
    for entry in CONFIG_KEYS:
        if entry.key in ("jobSource", "job", "image", "workflow", "cloudRunJob", "cloudBuildTrigger", "httpUrl",
                         "appEngineService", "storeStack") \
                and config.get(entry.key) is not None:
            raise DedupConfigError(entry.arg, f"a store stack (deploy: store) deploys no job: remove stack config "
                                              f"{PROJECT_NAME}:{entry.key}, and deploy jobs from stacks whose "
                                              f"storeStack names this one")
    kind = config.get("storeKind") or "firestore"
    store_kind({"kind": kind})
    if kind == "memorystore":
        return _memorystore_from_config(config)
    _refuse_store_keys(config, MEMORYSTORE_KEYS.keys() - STORE_KEYS.keys(), kind, "a Memorystore setting")
    if kind == "firestore":
        _refuse_store_keys(config, SPANNER_KEYS.keys(), kind, "a Spanner setting")
    args: dict[str, Any] = {"location": config.get("databaseLocation") or config.get("region") or "us-central1"}
    for key, arg in STORE_KEYS.items():
        value = _store_key(config, key)
        if value is not None:
            args[arg] = [value] if arg == "collections" else value
    try:
        return DedupStore(config.get("name") or DEFAULT_STORE_NAME, args)  # type: ignore[arg-type]
    except DedupConfigError as exc:
        stack_key = next((k for k, a in STORE_KEYS.items() if a == exc.field), None)
        if stack_key is None:
            raise
        raise DedupConfigError(exc.field, f"{str(exc).split(': ', 1)[-1]} (stack config {PROJECT_NAME}:{stack_key})") from None


def _memorystore_from_config(config: pulumi.Config) -> DedupStore:
    """A store stack's ``DedupStore(kind="memorystore")``: ``region`` is the instance's region.

    Raises:
        DedupConfigError: a Firestore-only key, or an invalid store input (naming the stack key).
    """
    _refuse_store_keys(config, ("databaseId", "createDatabase", "databaseLocation", *SPANNER_KEYS),
                       "memorystore", "a Firestore or Spanner database setting")
    args: dict[str, Any] = {"kind": "memorystore", "location": config.get("region") or "us-central1"}
    for key, arg in MEMORYSTORE_KEYS.items():
        value = _store_key(config, key)
        if value is not None:
            args[arg] = [value] if arg == "collections" else value
    try:
        return DedupStore(config.get("name") or DEFAULT_STORE_NAME, args)  # type: ignore[arg-type]
    except DedupConfigError as exc:
        stack_key = next((k for k, a in MEMORYSTORE_KEYS.items() if a == exc.field),
                         "region" if exc.field == "location" else None)
        if stack_key is None:
            raise
        raise DedupConfigError(exc.field,
                               f"{str(exc).split(': ', 1)[-1]} (stack config {PROJECT_NAME}:{stack_key})") from None


def _store_key(config: pulumi.Config, key: str) -> Any:
    """A store stack key's value in its type (:data:`_STORE_KEY_TYPES`), or None when unset."""
    kind = _STORE_KEY_TYPES.get(key, "string")
    return config.get_bool(key) if kind == "boolean" else config.get_int(key) if kind == "integer" else config.get(key)


def _refuse_store_keys(config: pulumi.Config, keys: Any, kind: str, what: str) -> None:
    """Raises: DedupConfigError: one of ``keys`` is set in a store stack of ``kind``, whose store does not read it."""
    for key in keys:
        if config.get(key) is not None:
            raise DedupConfigError(key, f"stack config {PROJECT_NAME}:{key} is {what}, which a {kind} store stack "
                                        f"(storeKind: {kind}) does not read: remove it, or set storeKind")


def stack_key_for(field: str) -> str | None:
    """The stack config key that sets component input ``field`` (e.g. ``attempt_deadline_seconds`` ->
    ``attemptDeadlineSeconds``), or None if no key sets it."""
    exact = next((entry.key for entry in CONFIG_KEYS if entry.arg == field), None)
    if exact is not None:  # request_timeout_seconds is the top-level input, not app_engine.request_timeout_seconds
        return exact
    for entry in CONFIG_KEYS:
        if entry.arg and field == entry.arg.rsplit(".", 1)[-1]:
            return entry.key
    # a part of a mapping or list the job's own configuration keys hold: env.PORT, secret_files[0].path
    whole = re.split(r"[.\[]", field, maxsplit=1)[0]
    if whole in _WHOLE_VALUE_INPUTS:
        return next(entry.key for entry in CONFIG_KEYS if entry.arg == whole)
    return None


def main(*, base_dir: Path | None = None) -> DedupScheduledJob | DedupStore:
    """The root program: :func:`deploy_from_config` (or :func:`store_from_config` with ``deploy: store``) and
    export the component's outputs as stack outputs.

    Raises:
        DedupConfigError: invalid config, before any resource is created.
    """
    config = pulumi.Config()
    deploy = config.get("deploy") or "job"
    if deploy not in ("job", "store"):
        raise DedupConfigError("deploy", f"stack config {PROJECT_NAME}:deploy is {deploy!r}: use job or store")
    if deploy == "store":
        _refuse_unknown_keys()
        store = store_from_config(config)
        for output in (MEMORYSTORE_OUTPUTS if store.kind == "memorystore" else STORE_OUTPUTS):
            pulumi.export(output, getattr(store, output))
        return store
    component = deploy_from_config(base_dir=base_dir)
    pulumi.export("service_url", component.service_url)
    pulumi.export("job_name", component.job_name)
    pulumi.export("scheduler_service_account_email", component.scheduler_service_account_email)
    pulumi.export("runtime_service_account_email", component.runtime_service_account_email)
    pulumi.export("database_name", component.database_name)
    pulumi.export("oidc_audience", component.oidc_audience)
    return component
