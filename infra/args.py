"""Typed inputs of :class:`~scheduler_dedup.infra.job.component.DedupScheduledJob`.

The inputs are ``TypedDict`` classes so that

* mypy/pyright reject a misspelt key in a Python stack (``DedupScheduledJobArgs(shedule=...)``),
* the component constructor also rejects unknown keys at run time (:class:`DedupConfigError`), and
* Pulumi's component analyzer (``pulumi.provider.experimental``) derives the package schema for
  other languages from these annotations and the docstring under each field.

Plain (non-``Input``) types are used for every value the constructor validates at preview time
(schedule, deadlines, retry policy); only resource names of proxy targets may be outputs of
other resources. Units are in the names: ``*_seconds`` are whole seconds.
"""


from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import pulumi


def input_keys(inputs: Any) -> tuple[str, ...]:
    """The keys of a ``TypedDict`` of inputs below, in the order they are declared: what the component checks a
    given mapping's keys against (so an input added here is accepted without a second list)."""
    return tuple(inputs.__annotations__)


class RetryConfigArgs(TypedDict):
    """Cloud Scheduler retry policy of the job (Job.retryConfig).

    Limits are Cloud Scheduler's (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#RetryConfig).
    The component's defaults recover a crashed attempt: the waits before the retries add up to at least the lease
    (``lease_seconds``), so a retry comes after a crashed attempt's lease expires and completes the run; a policy
    whose retries end sooner is refused at preview.
    """

    retry_count: NotRequired[int]
    """Retries after a failed attempt, 0 to 5 (Scheduler refuses more). Default 5 (Scheduler's own default, 0, would lose the run of any crashed or failed attempt)."""
    max_retry_duration_seconds: NotRequired[int]
    """Time limit for retrying, from the first attempt, in seconds; 0 means unlimited. Default 0."""
    min_backoff_seconds: NotRequired[int]
    """First wait between retries, in seconds. Default: the smallest whole number, at least 5, for which the retries span 1.5 x ``lease_seconds`` (15 with the default 300 s lease: waits 15, 30, 60, 120, 240 s)."""
    max_backoff_seconds: NotRequired[int]
    """Largest wait between retries, in seconds. Default 3600."""
    max_doublings: NotRequired[int]
    """How many times the wait doubles before it grows linearly. Default 5."""


class WorkflowTargetArgs(TypedDict):
    """Proxy target: start one Workflows execution per scheduled run (DEDUP_TARGET_TYPE=workflows)."""

    workflow: pulumi.Input[str]
    """Full workflow resource name ``projects/P/locations/L/workflows/W``."""


class CloudRunJobTargetArgs(TypedDict):
    """Proxy target: run one Cloud Run job execution per scheduled run (DEDUP_TARGET_TYPE=cloud_run_job)."""

    job: pulumi.Input[str]
    """Full job resource name ``projects/P/locations/L/jobs/J``."""


class CloudBuildTriggerTargetArgs(TypedDict):
    """Proxy target: run one build of a Cloud Build trigger per scheduled run (DEDUP_TARGET_TYPE=cloud_build_trigger)."""

    trigger: pulumi.Input[str]
    """Full trigger resource name ``projects/P/locations/L/triggers/T`` (``T`` the trigger's id or name; ``L`` is ``global`` for a global trigger). The build gets the substitution ``_DEDUP_RUN_ID``: its config must use ``$_DEDUP_RUN_ID`` or set ``options.substitutionOption: ALLOW_LOOSE``. The runtime identity gets ``roles/cloudbuild.builds.editor`` on the trigger's project: Cloud Build grants roles only on projects and its resources take no IAM condition."""
    service_account_email: NotRequired[pulumi.Input[str]]
    """Email of the service account the trigger's builds run as, if the trigger names one (or the Compute Engine default service account, if the project's builds run as it): running the trigger needs ``iam.serviceAccounts.actAs`` on it, so the runtime identity gets ``roles/iam.serviceAccountUser`` on that account only. Default: none (builds run as the legacy Cloud Build service account, which needs no grant)."""


class AppEngineArgs(TypedDict):
    """Scheduler target App Engine: the handler is an App Engine standard service and the Scheduler job delivers with an App Engine target (``appEngineHttpTarget``), which carries no OIDC token; the handler checks App Engine's own proof of a Scheduler delivery instead (DEDUP_APP_ENGINE_CALLER). Default (no ``app_engine``): a Cloud Run service called with OIDC. The project needs an App Engine application (``gcloud app create``); the component does not create one."""

    service: str
    """App Engine service that receives the deliveries (AppEngineRouting.service), e.g. ``default`` or ``dedup``: 1-63 lower-case letters, digits and hyphens, starting with a letter."""
    version: NotRequired[str]
    """Version the Scheduler job routes to (AppEngineRouting.version): 1-63 lower-case letters, digits and hyphens, not starting with ``ah-``, not ``default`` or ``latest``. With ``deploy``: the id of the deployed version; default ``dedup-`` and 16 hex digits of the deploy archive's SHA-256 (a changed archive is a new version, and the job routes to it). Without ``deploy``: default none, the versions serving the service's traffic."""
    relative_uri: NotRequired[str]
    """Path (and query) the deliveries are POSTed to: starts with ``/``, at most 2083 characters, no spaces (AppEngineHttpTarget.relativeUri), not under App Engine's ``/_ah/`` and not the run check's path. Default ``/``."""
    deploy: NotRequired[bool]
    """Deploy the handler from the deploy archive (the one Cloud Run builds from: ``job_source`` + ``job``, or a proxy target) as an App Engine standard version of ``service``: runtime python312, the archive's ``app.yaml`` entrypoint (gunicorn serving ``main:app``), automatic scaling up to ``max_instance_count``, the runtime identity as its service account, the handler's ``DEDUP_*`` environment. Its requests end at App Engine's 10-minute deadline, so ``attempt_deadline_seconds`` is at most 600. False: only the Scheduler job (and store, identities, grants); serve the handler in ``service`` yourself, e.g. ``gcloud app deploy`` of the unpacked archive with the environment the component would set. Default true."""
    location: NotRequired[str]
    """The App Engine application's location id, as ``gcloud app describe`` shows it (``us-central``, ``europe-west``, ``europe-west2``): checked against ``region`` at preview, also offline (``scheduler-dedup check``), since Scheduler creates App Engine jobs only in the application's region (``us-central`` is ``us-central1``, ``europe-west`` is ``europe-west1``). Without it, the application's own location is checked once ``pulumi preview`` reads it. Default: none."""
    request_timeout_seconds: NotRequired[int]
    """Without ``deploy``: the request deadline of your App Engine service, seconds (600 with automatic scaling, up to 86400 with basic or manual scaling): the lease covers it and the attempt deadline may not exceed it. Default 600. With ``deploy`` it is 600 and cannot be set."""


class HttpTargetArgs(TypedDict):
    """Proxy target: one HTTP POST per scheduled run with an ``Idempotency-Key`` (DEDUP_TARGET_TYPE=http)."""

    url: pulumi.Input[str]
    """The https URL to call; the handler sends a Google-signed ID token for it (see ``audience``)."""
    cloud_run_service: NotRequired[pulumi.Input[str]]
    """If the URL is a Cloud Run service: its full name ``projects/P/locations/L/services/S``; the runtime identity then gets ``roles/run.invoker`` on that service only. Otherwise no role is granted."""
    audience: NotRequired[str]
    """Audience of the ID token the handler sends (DEDUP_TARGET_AUDIENCE). Default by host: the origin of a ``*.run.app`` URL, the full function URL ``https://REGION-PROJECT.cloudfunctions.net/FUNCTION`` on ``*.cloudfunctions.net`` (the origin is refused there), else the origin. Set it to a Cloud Run custom audience for a receiver behind a custom domain."""


class DedupStoreRefArgs(TypedDict):
    """A DedupStore as plain values: its outputs, read in the same program or from its stack with a ``StackReference``."""

    project: pulumi.Input[str]
    """Project id of the store's database (store output ``project``)."""
    instance_id: NotRequired[pulumi.Input[str]]
    """Spanner instance id (store output ``instance_id``); required for a Spanner store."""
    database_id: pulumi.Input[str]
    """Firestore or Spanner database id (store output ``database_id``)."""
    collections: pulumi.Input[list[str]]
    """Collections whose TTL policy the store owns (store output ``collections``); the job's ``collection`` must be one of them."""
    ttl_owner: NotRequired[str]
    """Where the TTL policy lives, for readers of the job's stack and the policy pack (``DEDUP_TTL_OWNER``), e.g. ``stack acme/scheduler-dedup/store``. Default ``DedupStore (another stack)``."""
    kind: NotRequired[str]
    """The store's kind (store output ``kind``): ``firestore`` (default), ``spanner`` (``instance_id`` is then required) or ``memorystore`` (whose outputs follow), a plain string known at preview: it decides what the job creates."""
    redis_host: NotRequired[pulumi.Input[str]]
    """Memorystore: the instance's primary endpoint (store output ``redis_host``)."""
    redis_port: NotRequired[pulumi.Input[int]]
    """Memorystore: its TLS port, 6378 (store output ``redis_port``)."""
    auth_secret: NotRequired[pulumi.Input[str]]
    """Memorystore: Secret Manager secret id of the AUTH string (store output ``auth_secret``); the job mounts it as a file."""
    ca_secret: NotRequired[pulumi.Input[str]]
    """Memorystore: Secret Manager secret id of the server CA (store output ``ca_secret``); the job mounts it as a file."""
    network: NotRequired[pulumi.Input[str]]
    """Memorystore: the instance's authorized network, where the job's Direct VPC egress goes (store output ``network``)."""
    subnetwork: NotRequired[pulumi.Input[str]]
    """Memorystore: the subnetwork of the job's region for Direct VPC egress (store output ``subnetwork``)."""
    wait_timeout_ms: NotRequired[int]
    """Memorystore: ``DEDUP_REDIS_WAIT_TIMEOUT_MS`` (store output ``wait_timeout_ms``). Default 500."""


class AlertsArgs(TypedDict):
    """Alerts the component provisions: log-based metrics, alert policies and an hourly watchdog job (see :mod:`scheduler_dedup.infra.job.alerts`)."""

    notification_channels: Sequence[pulumi.Input[str]]
    """Notification channels every policy notifies, ``projects/P/notificationChannels/N`` (at least one)."""
    grace_seconds: NotRequired[int]
    """Seconds after a fire time before an expected run without a record is reported missed, 60 to 604800. Default: the job's retry window, at least 300."""
    released_threshold: NotRequired[int]
    """The released alert fires when more than this many deliveries were released (retryable failure) within the job's retry window (at least 1 h, at most 1 day), 0 to 1000. Default 2."""
    failure_threshold: NotRequired[int]
    """Consecutive failed runs before the run-failed alert, 1 to 1000. Default 1: every failed run alerts at once (a log match on the failure); above 1 the hourly run check counts the streak in the records and alerts once when it is reached. Either way a recovery notice follows the first completed run after an alerted streak."""
    max_runtime_seconds: NotRequired[int]
    """Alert (once per run) on a run still in progress this many seconds after its claim, even while its lease is renewed: a hung job. 60 to 604800; found by the hourly run check, so up to an hour late. Default: not checked."""
    renotify_seconds: NotRequired[int]
    """Re-notify an open incident of the metric-based policies (watchdog silent, deliveries stopped, runs released) this often, 1800 to 86400 (Cloud Monitoring's NotificationChannelStrategy.renotifyInterval range). Log-match policies notify on each new matching line instead. Default: no reminders."""


class SecretEnvArgs(TypedDict):
    """A Secret Manager secret version as one environment variable of the job (Cloud Run ``valueSource.secretKeyRef``)."""

    secret: str
    """The secret: its id ``S`` in the job's project, or ``projects/P/secrets/S`` with ``P`` the job's project id (a secret of another project is refused). The runtime identity gets ``roles/secretmanager.secretAccessor`` on this secret only."""
    version: NotRequired[str]
    """A version number (``3``: pinned, a rotation needs a new deploy) or ``latest`` (read when an instance starts). Default ``latest``."""


class SecretFileArgs(TypedDict):
    """A Secret Manager secret version as a file in the job's container (a Cloud Run secret volume)."""

    secret: str
    """The secret, as in :class:`SecretEnvArgs`. The runtime identity gets ``roles/secretmanager.secretAccessor`` on this secret only."""
    path: str
    """Absolute path of the file, e.g. ``/secrets/db/password``: its folder (``/secrets/db``) is the volume's mount path and holds this secret only; not under ``/secrets/redis-*`` (a Memorystore store's) and not a system folder (``/``, ``/dev``, ``/proc``, ``/sys``, ``/etc``, ``/usr``, ``/bin``, ``/lib``, ``/tmp``, ``/workspace``)."""
    version: NotRequired[str]
    """A version number or ``latest`` (re-read from the file on every open). Default ``latest``."""


class VpcEgressArgs(TypedDict):
    """How the job reaches private addresses (a Cloud SQL private IP, a VM): Direct VPC egress (``network`` and/or ``subnetwork``) or a Serverless VPC Access ``connector``, not both (https://cloud.google.com/run/docs/configuring/vpc-direct-vpc, https://cloud.google.com/run/docs/configuring/vpc-connectors)."""

    network: NotRequired[str]
    """Direct VPC egress: the VPC network, ``projects/P/global/networks/N`` or ``N``. Default with ``subnetwork``: the subnetwork's network."""
    subnetwork: NotRequired[str]
    """Direct VPC egress: the subnetwork in the job's region, ``projects/P/regions/R/subnetworks/S`` or ``S``. Default with ``network``: the subnetwork named like the network."""
    connector: NotRequired[str]
    """A Serverless VPC Access connector in the job's region, ``projects/P/locations/R/connectors/C``."""
    egress: NotRequired[str]
    """``PRIVATE_RANGES_ONLY`` (only RFC 1918 and other private ranges go into the VPC) or ``ALL_TRAFFIC`` (everything does, e.g. for a static outbound IP through Cloud NAT). Default ``PRIVATE_RANGES_ONLY``."""


class JobRoleArgs(TypedDict):
    """One role for the job's own work, granted to the runtime identity on one resource (non-authoritative IAM member)."""

    role: str
    """A role, ``roles/NAME`` (predefined) or ``projects/P/roles/NAME`` (custom), e.g. ``roles/storage.objectCreator``."""
    resource: str
    """Where it is granted, by full name: ``projects/P`` (the whole project: prefer a narrower one), ``buckets/B`` (a Cloud Storage bucket), ``projects/P/topics/T`` (Pub/Sub), ``projects/P/secrets/S`` (Secret Manager) or ``projects/P/datasets/D`` (BigQuery)."""


class DedupScheduledJobArgs(TypedDict):
    """Inputs of DedupScheduledJob. Give exactly one of: ``job_source`` + ``job``, ``image`` (+ ``job``; Cloud Run only), or one proxy target. ``app_engine`` serves the handler on App Engine instead of Cloud Run."""

    schedule: str
    """unix-cron schedule with five fields, e.g. ``*/15 * * * *``. English (groc) forms such as ``every 5 minutes`` are refused: Scheduler sends X-CloudScheduler-ScheduleTime only for unix-cron."""
    region: str
    """Region of the Cloud Run service, the Scheduler job and (by default) the Firestore database, e.g. ``us-central1``."""
    project: NotRequired[str]
    """Google Cloud project id. Default: the provider's ``gcp:project`` config."""
    time_zone: NotRequired[str]
    """IANA time zone of the schedule, e.g. ``Europe/Berlin``. Default ``Etc/UTC``."""
    job_source: NotRequired[str]
    """Directory with the Python job code; its files go to the deploy archive root."""
    job: NotRequired[str]
    """Job entry point ``module:function`` (DEDUP_JOB), importable from ``job_source`` or from ``image``."""
    image: NotRequired[str]
    """A prebuilt container image (handler + job) to deploy instead of building from source."""
    workflow_target: NotRequired[WorkflowTargetArgs]
    """Proxy target: a Workflows workflow."""
    cloud_run_job_target: NotRequired[CloudRunJobTargetArgs]
    """Proxy target: a Cloud Run job."""
    cloud_build_trigger_target: NotRequired[CloudBuildTriggerTargetArgs]
    """Proxy target: a Cloud Build trigger."""
    http_target: NotRequired[HttpTargetArgs]
    """Proxy target: an https URL."""
    app_engine: NotRequired[AppEngineArgs]
    """Serve the handler on App Engine standard and deliver with a Scheduler App Engine target instead of Cloud Run with OIDC (see AppEngineArgs). ``image``, ``base_image``, ``request_timeout_seconds``, ``cpu_always_allocated``, ``oidc_audience``, ``scheduler_service_account_email``, ``build_service_account_email`` and ``alerts`` are Cloud Run's and refused with it."""
    attempt_deadline_seconds: NotRequired[int]
    """How long Scheduler waits for the handler's response: 15 to 1800 seconds for an HTTP target (Cloud Run), 15 to 86400 for an App Engine target (at most the App Engine request deadline, 600 when the component deploys the handler). Default 180."""
    request_timeout_seconds: NotRequired[int]
    """Cloud Run request timeout in seconds, >= attempt deadline, <= 3600. Default: the attempt deadline + 15 (195), so Scheduler's cut-off and Cloud Run's do not race. With ``app_engine``: set ``app_engine.request_timeout_seconds`` instead."""
    lease_seconds: NotRequired[int]
    """How long a claim blocks other attempts (DEDUP_LEASE_SECONDS), >= request timeout and attempt deadline. Default max(300, request timeout)."""
    retention_seconds: NotRequired[int]
    """How long completed run records are kept before the TTL policy deletes them (DEDUP_RETENTION_SECONDS), >= the retry window. Default 604800 (7 days)."""
    manual_tolerance_seconds: NotRequired[int]
    """Tolerance for manual "force run" requests (DEDUP_MANUAL_TOLERANCE_SECONDS). Default 5."""
    overlap: NotRequired[str]
    """Overlap policy (DEDUP_OVERLAP): ``allow`` (runs of the job may execute at once), ``skip`` (a run due while another run executes is recorded ``skipped_overlap`` and does not run) or ``buffer_one`` (it waits for that run, one waiter at most). Default ``allow``."""
    catch_up_window_seconds: NotRequired[int]
    """Catch-up window (DEDUP_CATCH_UP_WINDOW_SECONDS), 0 to 604800 seconds: on a delivery after a gap, the handler first runs the job's fire times of the last this-many seconds that have no record, once each, through the same claim. Default 0 (off)."""
    retry: NotRequired[RetryConfigArgs]
    """Scheduler retry policy. Default: 5 retries spanning 1.5 x the lease (see RetryConfigArgs)."""
    collection: NotRequired[str]
    """Firestore collection (Spanner: table) of run records (DEDUP_COLLECTION). Default ``scheduler_runs``."""
    database_id: NotRequired[str]
    """Firestore database id. Default: ``<component name>-dedup`` (created), or ``(default)`` when ``create_database`` is false and no id is given. Spanner (``store_kind="spanner"``): the job's database id, 2 to 30 characters, default ``<name, cut to 24>-dedup``."""
    create_database: NotRequired[bool]
    """Create the Firestore database (native mode). False: use an existing one named by ``database_id``. Default true."""
    database_location: NotRequired[str]
    """Firestore location id of a created database, e.g. ``nam5`` or ``us-central1``. Default: ``region``."""
    cpu_always_allocated: NotRequired[bool]
    """CPU always allocated on the Cloud Run service (``cpu_idle=false``, instance-based billing), so the lease renewal thread keeps running after Scheduler hangs up. False: request-based billing, cheaper for sparse jobs, but a job that outlives its attempt deadline (or a slow lease renewal) may lose its lease and run twice. Default true."""
    resource_prefix: NotRequired[str]
    """Prefix every GCP resource id derives from (the database ``<prefix>-dedup``, the service, the Scheduler job, the accounts, the image repository), 1-40 lowercase letters, digits or hyphens. Default: the component name. To rename the component without replacing anything, set it to the old name and give the component ``aliases`` with the old name (docs/renaming.md)."""
    protect_database: NotRequired[bool]
    """Pulumi ``protect`` on the created Firestore database (or Spanner database and created instance): a plan that would delete or replace it (and with it the run records late retries are deduplicated against) fails at preview. Default true; set false and ``pulumi up`` before ``pulumi destroy``."""
    deletion_protection: NotRequired[bool]
    """Cloud Run service deletion protection (the provider defaults it on; we default it off so ``pulumi destroy`` works). Default false."""
    base_image: NotRequired[str]
    """Cloud Run functions base image for source deploys. Default ``<region>-docker.pkg.dev/serverless-runtimes/google-22/runtimes/python312``."""
    max_instance_count: NotRequired[int]
    """Upper bound of Cloud Run instances. Default 3."""
    min_instance_count: NotRequired[int]
    """Cloud Run instances kept running even without requests (``template.scaling.min_instance_count``), 0 to ``max_instance_count``. Default 0 (Cloud Run's). A Python job that outlives its attempt deadline keeps running with no request in flight, and with 0 Cloud Run may scale its instance in and kill it: 1 keeps one instance (billed while it lives). Preview warns about 0 for Python jobs. With ``app_engine``: the deployed version's automatic scaling ``min_instances``."""
    oidc_audience: NotRequired[str]
    """Audience of the Scheduler's OIDC token, accepted by the service as a custom audience and checked by the handler. Default ``https://scheduler-dedup.invalid/projects/P/locations/R/services/S``."""
    store_kind: NotRequired[str]
    """The run store without ``store``: ``firestore`` (a Firestore database of the job's own) or ``spanner`` (a Spanner database of the job's own with its table and row deletion policy, in ``spanner_instance``; DEDUP_STORE). With ``store``, the store's kind (giving another is refused). Default ``firestore``."""
    spanner_instance: NotRequired[str]
    """With ``store_kind="spanner"`` and no ``store``: an existing Spanner instance id to create the job's database in. Default: an instance of the job's own, ``<name>-dedup``, 100 processing units in ``regional-<region>`` (the smallest; it costs by the hour, see docs/stores.md)."""
    store: NotRequired[DedupStoreRefArgs]
    """A shared store (a ``DedupStore``, or its outputs, e.g. read from its stack with a ``StackReference``). The job then creates no database, no TTL policy and no index, only its own runtime identity's grant on that database; ``database_id``, ``create_database`` and ``database_location`` must not be given. Default: the job has a store of its own."""
    scheduler_service_account_email: NotRequired[pulumi.Input[str]]
    """Email of an existing service account to send the Scheduler OIDC token as, shared by several jobs. The job grants it ``roles/run.invoker`` on its own service only. Default: a dedicated account ``<name>-sched``."""
    build_service_account_email: NotRequired[pulumi.Input[str]]
    """Email of an existing service account for Cloud Build (source deploys), shared by several jobs. The job grants it read on its own source bucket and write on its own image repository; ``roles/logging.logWriter`` on the project is the account owner's to grant, once. Default: a dedicated account ``<name>-build``."""
    env: NotRequired[dict[str, str]]
    """Environment variables of the job's container, ``NAME: value``. Names follow Cloud Run's rules (https://cloud.google.com/run/docs/configuring/services/overview-environment-variables; ``scheduler_dedup.handler.core.env_names``): a letter or ``_`` first, then letters, digits and ``_`` only (``1BAD`` and ``MY-VAR`` are refused), not starting with ``X_GOOGLE_``, not a name Cloud Run sets (``PORT``, ``K_SERVICE``, ``K_REVISION``, ``K_CONFIGURATION``, ``FUNCTION_TARGET``, ``FUNCTION_SIGNATURE_TYPE``), not ``DEDUP_*``, ``GOOGLE_CLOUD_PROJECT`` or ``THREADS`` (the handler's), not a variable that redirects the handler's store, credentials, metadata server, TLS trust or proxy in any case (``FIRESTORE_EMULATOR_HOST``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``GCE_METADATA_HOST``, ``REQUESTS_CA_BUNDLE``, ``HTTPS_PROXY``...: ``REDIRECTING_ENV``), at most 1000 with the handler's. A value that looks like a credential gets an advisory at preview: use ``secret_env``. Default: none."""
    secret_env: NotRequired[dict[str, SecretEnvArgs]]
    """Secret Manager secrets as environment variables, ``NAME: {secret, version}`` (names as in ``env``, and not also in ``env``). Cloud Run only. Default: none."""
    secret_files: NotRequired[list[SecretFileArgs]]
    """Secret Manager secrets as files (see SecretFileArgs), e.g. a service account key or a TLS certificate. Cloud Run only. Default: none."""
    cpu: NotRequired[str]
    """vCPUs of each Cloud Run instance: ``1``, ``2``, ``4``, ``6`` or ``8`` (less than 1 needs concurrency 1, and the handler serves several requests at once; https://cloud.google.com/run/docs/configuring/services/cpu). Default ``1`` (Cloud Run's)."""
    memory: NotRequired[str]
    """Memory of each Cloud Run instance, ``512Mi`` to ``32Gi`` (``Mi``/``Gi``; ``M``/``G`` are powers of ten), within the CPU's range: 1 CPU up to 4 GiB, 2 up to 8 GiB, 4 from 2 to 16 GiB, 6 from 4 to 24 GiB, 8 from 4 to 32 GiB (https://cloud.google.com/run/docs/configuring/services/memory-limits). Default ``512Mi`` (Cloud Run's)."""
    labels: NotRequired[dict[str, str]]
    """Labels on every child that takes labels (the Cloud Run service and its revisions, the source bucket, the image repository, a Spanner instance of its own, the alert policies' user labels): keys 1-63 lower-case letters, digits, ``_`` or ``-`` starting with a letter, values 0-63 of the same, at most 64 (https://cloud.google.com/resource-manager/docs/labels-overview). The component adds ``managed-by: scheduler-dedup``. Default: none."""
    vpc: NotRequired[VpcEgressArgs]
    """VPC egress of the job (see VpcEgressArgs). Cloud Run only; with a Memorystore store only ``egress`` (the store's network is the job's). Default: none (no private addresses)."""
    job_roles: NotRequired[list[JobRoleArgs]]
    """Roles the job's own work needs (write a report to a bucket, publish to a topic), each granted to the runtime identity on the one resource named: the one place to give the job access, recorded as IAM member resources named ``<name>-job-role-...`` that the policy pack checks. Default: none."""
    alerts: NotRequired[AlertsArgs]
    """Provision alerting: log-based metrics, alert policies (run failed, fenced, released repeatedly, takeover, missed, stuck, watchdog silent, deliveries stopped) and an hourly watchdog job that reports missed runs even when Scheduler stops. Default: none."""
    paused: NotRequired[bool]
    """Pause the Scheduler job (``Job.paused``): no deliveries until set false again. While paused the handler gets ``DEDUP_PAUSED_SINCE``, the run check and ``runs`` report the fire times as ``paused`` (not missed), and the deliveries-stopped alert is disabled; resuming adds ``DEDUP_RESUMED_AT``, so the paused span is never reported missed, while a run missed before the pause still is (``DEDUP_SCHEDULE_SINCE`` does not move). Default false."""


class DedupStoreArgs(TypedDict):
    """Inputs of DedupStore: one Firestore database (created or adopted) and the single TTL policy and run history indexes of each collection it owns; with ``kind="spanner"`` a Spanner database (in a created or adopted instance) with one table per collection, its row deletion policy and history index; with ``kind="memorystore"`` a Memorystore for Redis instance."""

    location: str
    """Firestore location id of a created database, e.g. ``nam5``, ``eur3`` or ``us-central1`` (https://cloud.google.com/firestore/docs/locations). Spanner: the region of a created instance's regional config (``regional-<location>``), e.g. ``us-central1``. Memorystore: the instance's region."""
    project: NotRequired[str]
    """Google Cloud project id. Default: the provider's ``gcp:project`` config."""
    database_id: NotRequired[str]
    """Firestore or Spanner database id. Default ``scheduler-dedup`` (created), or ``(default)`` when a Firestore store's ``create_database`` is false."""
    create_database: NotRequired[bool]
    """Create the database (Firestore native mode). False: adopt an existing one named by ``database_id``; the store then owns only the TTL policies and indexes. A Spanner store always creates its database (its DDL holds the tables). Default true."""
    collections: NotRequired[list[str]]
    """Collections (Spanner: tables) of run records this store owns the TTL policy of; jobs pick one with their ``collection``. Default ``["scheduler_runs"]``."""
    deletion_protection: NotRequired[bool]
    """Firestore delete protection of a created database (default false); Memorystore: of the instance (default false); Spanner: drop protection of the database (default true: the policy pack's advisory ``spanner-store-drop-protection`` flags a Spanner store without it)."""
    protect_database: NotRequired[bool]
    """Pulumi ``protect`` on what holds the run records and the stack created: the database (Firestore or Spanner), a created Spanner instance, the Memorystore instance. A plan that would delete or replace one fails at preview. Default true; set false and ``pulumi up`` before ``pulumi destroy``."""
    kind: NotRequired[str]
    """``firestore`` (default), ``spanner``: a Spanner database (in a created or adopted instance) with one table per collection, its row deletion policy and history index; or ``memorystore``: a Memorystore for Redis instance (STANDARD_HA, Redis 7, ``noeviction``, AUTH, TLS, RDB snapshots) whose AUTH string and server CA go to Secret Manager. For both, ``location`` is the region, and ``create_database`` does not apply."""
    memory_size_gb: NotRequired[int]
    """Memorystore: capacity in GB, 1 to 300. Default 1 (the smallest instance)."""
    authorized_network: NotRequired[str]
    """Memorystore: the VPC network the instance is reachable from, ``projects/P/global/networks/N``. Default: the project's ``default`` network."""
    subnetwork: NotRequired[str]
    """Memorystore: the subnetwork (in the jobs' region) their Direct VPC egress uses. Default ``default``."""
    wait_timeout_ms: NotRequired[int]
    """Memorystore: how long a claim or completion waits for the replica's acknowledgement (``WAIT``), 0 to 60000 ms; 0 turns it off. Default 500."""
    instance_id: NotRequired[str]
    """Memorystore: the instance id, default ``<store name>-dedup``. Spanner: the instance id, default ``scheduler-dedup``."""
    create_instance: NotRequired[bool]
    """Spanner: create the instance. False: adopt an existing one named by ``instance_id`` (the store then creates only the database). Default true."""
    instance_config: NotRequired[str]
    """Spanner: instance config of a created instance (https://cloud.google.com/spanner/docs/instance-configurations). Default ``regional-<location>``."""
    processing_units: NotRequired[int]
    """Spanner: compute capacity of a created instance, 100 to 1000 in steps of 100, then multiples of 1000. Default 100 (the smallest)."""
