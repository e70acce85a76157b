"""Every environment variable of the handler, declared once: its default, who sets it and what it means.

The settings objects (:class:`~scheduler_dedup.handler.config.settings.Settings`,
:class:`~scheduler_dedup.handler.targets.settings.TargetSettings`, :class:`~scheduler_dedup.handler.callers.oidc_settings.CallerAuthSettings`
and the start-up checks of :mod:`scheduler_dedup.handler.service.startup`) read the environment through :func:`declared`, a
view that raises :class:`UndeclaredVariableError` for a name not declared here. So no variable can be read without
being documented, and ``scripts/gen_docs`` renders :data:`VARIABLES` as the reference page
``docs/reference/environment.md``. A store module may declare its own variables with :func:`declare`; the
generator imports every store module of :mod:`scheduler_dedup.handler.stores`.

This module imports nothing of ours, so every settings module can import it. Defaults are written as they would be
in the environment; a test checks that each one is the value the handler uses when the variable is unset.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

#: Sections of the reference page, in page order.
Group = Literal["store", "job", "callers", "schedule", "passed on", "local", "renamed"]
GROUP_TITLES: dict[Group, str] = {
    "store": "Run store and records",
    "job": "The job and proxy targets",
    "callers": "Caller verification",
    "schedule": "Schedule and monitoring",
    "passed on": "Set for other programs",
    "local": "Local development and tests",
    "renamed": "Renamed or removed",
}


@dataclass(frozen=True)
class Variable:
    """One environment variable.

    Attributes:
        name: the variable, e.g. ``DEDUP_LEASE_SECONDS``.
        group: its section of the reference page (:data:`GROUP_TITLES`).
        doc: what it means: accepted values, units and the source of any rule; Markdown.
        default: its value when unset, as written in the environment (``"300"``); None when unset means off,
            required or derived (``doc`` says which).
        component: how the ``DedupScheduledJob`` component sets it on the Cloud Run service; empty when it does not.
        reader: who reads it: ``handler`` (the handler and ``idempotent``), or another program.
    """

    name: str
    group: Group
    doc: str
    default: str | None = None
    component: str = ""
    reader: str = "handler"


#: Every declared variable, by name, in declaration order.
VARIABLES: dict[str, Variable] = {}


def declare(name: str, group: Group, doc: str, *, default: str | None = None, component: str = "",
            reader: str = "handler") -> str:
    """Declare a variable (once) and return its name.

    Raises:
        ValueError: ``name`` is declared already (one declaration, one doc).
    """
    if name in VARIABLES:
        raise ValueError(f"{name} is declared twice: keep its one declaration in scheduler_dedup.handler.core.variables")
    VARIABLES[name] = Variable(name, group, " ".join(doc.split()), default, " ".join(component.split()), reader)
    return name


class UndeclaredVariableError(RuntimeError):
    """Code read an environment variable that is not declared (a programming error, never a user's).

    Not a ``KeyError``, so ``Mapping.get`` does not turn it into a default.
    """


class DeclaredEnvironment(Mapping[str, str]):
    """A read-only view of an environment that refuses to read a variable not declared in :data:`VARIABLES`."""

    def __init__(self, env: Mapping[str, str]):
        self._env = env

    def __getitem__(self, name: str) -> str:
        if name not in VARIABLES:
            raise UndeclaredVariableError(
                f"{name} is read but not declared: declare it with its default and meaning in "
                "scheduler_dedup.handler.core.variables (or with declare() in its store module), then run scripts/gen_docs")
        return self._env[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


def declared(env: Mapping[str, str]) -> DeclaredEnvironment:
    """``env`` behind a :class:`DeclaredEnvironment` (itself when it already is one)."""
    return env if isinstance(env, DeclaredEnvironment) else DeclaredEnvironment(env)


# ---------------------------------------------------------------- run store and records

declare("GOOGLE_CLOUD_PROJECT", "store", """
    Required. The project id of the run store; also the run key's project when a delivery carries no
    `X-Dedup-Project` header. Cloud Run does not set it by itself.""",
        component="the job's project (`project` input, else the provider's `gcp:project`)")
declare("GCLOUD_PROJECT", "store", "The older name of `GOOGLE_CLOUD_PROJECT`, read only when that one is unset.")
declare("DEDUP_STORE", "store", """
    The run store, one of `scheduler_dedup.handler.config.settings.STORE_KINDS`: `firestore`, `redis` (Memorystore) or
    `spanner`. See [Stores](../stores.md).""",
        default="firestore", component="`redis` for a job on a `DedupStore` of kind `memorystore`, `spanner` for a "
                                       "job on a Spanner store; unset otherwise")
declare("DEDUP_COLLECTION", "store", """
    Top-level collection of the run records (no `/`, not starting with `__`). Its TTL policy is on the
    `expire_at` field.""",
        default="scheduler_runs", component="`collection`")
declare("DEDUP_LEASE_SECONDS", "store", """
    How long a claim stays live without renewal, 1 to 86400 seconds. The lease is renewed every third of it while
    the job runs; a crashed attempt's run is answered 409 until its lease expires, at most this long after the
    crash, and only then taken over. See [crash recovery](../failures.md#crash-recovery).""",
        default="300", component="`lease_seconds` (default the larger of 300 and the request timeout)")
declare("DEDUP_RETENTION_SECONDS", "store", """
    How long a finished record is kept: `expire_at` is the finish time plus this, and the TTL policy deletes the
    record after it. At least `DEDUP_LEASE_SECONDS`, at most 10 years, and it must outlast the Scheduler job's
    retry window, or a late retry would run the job again.""",
        default="604800", component="`retention_seconds`")
declare("DEDUP_MANUAL_TOLERANCE_SECONDS", "store", """
    A schedule time more than this many seconds ahead of now is a forced run (`gcloud scheduler jobs run`),
    deduplicated on a key of its own; 0 to 3600. It only absorbs clock skew. See
    [forced runs](../how-it-works.md#forced-runs).""",
        default="5", component="`manual_tolerance_seconds`")
declare("DEDUP_OVERLAP", "store", """
    The job's overlap policy: `allow` (runs of the job may execute at once; each still runs once), `skip` (a run due
    while another run of the job executes is recorded `skipped_overlap` and does not run), `buffer_one` (it waits
    for that run; one waiter at most, a third is skipped) or `replace` (it cancels that run's downstream execution,
    records that run `cancelled`, then runs; only for a `cloud_run_job`, `workflows` or `cloud_build_trigger`
    target). A run forwarded to a downstream execution executes until that execution ends. Enforced across instances
    by a per-job lease record in the run store. See [Overlap and backfill](../overlap-and-backfill.md).""",
        default="allow", component="`overlap`")
declare("DEDUP_CATCH_UP_WINDOW_SECONDS", "schedule", """
    Catch-up window, 0 (off) to 604800 seconds. When the fire time just before a delivery's has no record (a gap:
    the job was paused, the service down), the handler first runs the fire times of this window that have no
    record, oldest first, once each, through the same claim. The window is counted back from the store's clock,
    never before `DEDUP_SCHEDULE_SINCE` nor past `DEDUP_RETENTION_SECONDS`. Needs `DEDUP_SCHEDULE`. See
    [Overlap and backfill](../overlap-and-backfill.md#catch-up).""",
        default="0", component="`catch_up_window_seconds`")
declare("DEDUP_ATTEMPT_DEADLINE_SECONDS", "schedule", """
    The Scheduler job's attempt deadline, 15 to 86400 seconds. A delivery's catch-up spends at most half of it and
    leaves the rest of the window to the next delivery. See
    [Overlap and backfill](../overlap-and-backfill.md#catch-up).""",
        default="180", component="`attempt_deadline_seconds`, when `catch_up_window_seconds` is set")
declare("DEDUP_STORE_TIMEOUT_SECONDS", "store", """
    How long one store operation may take, retries of transient errors included, 0.5 to 600 seconds. Keep it well
    under the attempt deadline, so a store outage is answered (500) while Scheduler still listens.""",
        default="20", component="a quarter of the attempt deadline, 2 to 20 seconds")

# ---------------------------------------------------------------- the job and proxy targets

declare("DEDUP_TARGET_TYPE", "job", """
    What runs once per scheduled run: `python` (the callable `DEDUP_JOB`), `workflows`, `cloud_run_job`,
    `cloud_build_trigger` or `http` (a proxy target named by `DEDUP_TARGET`). See
    [targets](../targets-and-auth.md#proxy-targets).""",
        default="python", component="from the inputs: `python` for `job_source`/`image`, else the proxy target's type")
declare("DEDUP_JOB", "job", """
    The job, `module:function`, importable from the deploy archive's root or the image. Required when
    `DEDUP_TARGET_TYPE` is `python`, ignored otherwise. The module is not imported by the start-up check, only its
    format is.""",
        component="`job`")
declare("DEDUP_TARGET", "job", """
    The proxy target: `projects/P/locations/L/workflows/W`, `projects/P/locations/L/jobs/J`,
    `projects/P/locations/L/triggers/T` (a Cloud Build trigger by id or name; `global` for a global trigger) or an
    `https://` URL. Only a project id may hold `.` or `:` (a domain-scoped project); a custom method after the id
    (`.../jobs/J:run`) is refused. Required unless `DEDUP_TARGET_TYPE` is `python`, refused with it.""",
        component="`workflow_target`, `cloud_run_job_target`, `cloud_build_trigger_target` or `http_target`")
declare("DEDUP_TARGET_TIMEOUT_SECONDS", "job", """
    Timeout of each downstream call, above 0 and at most 3600 seconds, for the whole call: fetching its access or ID
    token from the metadata server, connecting, the headers and the body; keep it below the Scheduler job's attempt
    deadline.""",
        default="30", component="half the attempt deadline, 5 to 30 seconds (proxy targets only)")
declare("DEDUP_TARGET_AUDIENCE", "job", """
    Audience of the ID token sent to an HTTP target. Unset, it follows the host: the origin of a `*.run.app` URL, the
    full function URL `https://REGION-PROJECT.cloudfunctions.net/FUNCTION` on `*.cloudfunctions.net`, else the
    origin. Another spelling of a `*.run.app` or `*.cloudfunctions.net` audience than the one that works is refused
    at start-up. See [HTTP target](../targets-and-auth.md#http).""",
        component="`http_target.audience` (always written out)")
declare("DEDUP_TARGET_AUTH", "job", """
    `google` (Application Default Credentials; an ID token for HTTP targets), or `none`: **tests only**, no
    credentials are looked up and no `Authorization` header is sent.""",
        default="google")
declare("DEDUP_WORKFLOWS_API", "job", "Base URL of the Workflows Executions API (tests only).",
        default="https://workflowexecutions.googleapis.com")
declare("DEDUP_RUN_API", "job", """
    Base URL of the Cloud Run Admin API (tests only): Cloud Run job targets and trust mode's reading of the
    service's IAM policy.""",
        default="https://run.googleapis.com")
declare("DEDUP_CLOUD_BUILD_API", "job", """
    Base URL of the Cloud Build API (tests only): a Cloud Build trigger target's `triggers.get`, `builds.list` and
    `triggers.run`.""",
        default="https://cloudbuild.googleapis.com")

# ---------------------------------------------------------------- caller verification

declare("DEDUP_OIDC_AUDIENCE", "callers", """
    Accepted token audiences, comma-separated, compared exactly as google-auth compares. Setting it turns caller
    verification on, together with `DEDUP_ALLOWED_CALLERS`: one without the other is a start-up error. See
    [caller verification](../targets-and-auth.md#caller-verification).""",
        component="the component's audience (`oidc_audience`, default "
                  "`https://scheduler-dedup.invalid/projects/P/locations/R/services/S`)")
declare("DEDUP_ALLOWED_CALLERS", "callers", """
    Accepted callers, comma-separated: service-account emails, or IAM members `serviceAccount:EMAIL` (normalised to
    the email). Any other member type (`user:`, `group:`, `domain:`...) and any email that is not a service
    account's (`*.gserviceaccount.com`) stops the handler at start-up: no Scheduler token can carry it.""",
        component="the Scheduler identity's email (`<name>-sched`, or `scheduler_service_account_email`)")
declare("DEDUP_SECRET_ENV", "job", """
    Names of the job's variables that hold secrets, comma-separated (names only, never values). The handler reads
    their values at start-up and scrubs them from every answer, run record, log line and `runs` output, as it does
    for any variable whose name marks it secret (Sentry's default list: `PASSWORD`, `SECRET`, `TOKEN`, `API_KEY`,
    `AUTH`, `CREDENTIALS`...). See [what leaves the handler](../targets-and-auth.md#secret-values).""",
        component="the names of `secret_env`")
declare("DEDUP_SECRET_FILES", "job", """
    Paths of the job's mounted secret files, comma-separated. The handler reads each at start-up and scrubs its
    content (whole, and each line) like a secret variable's value.""",
        component="`folder/file_name` of each of `secret_files`")
declare("DEDUP_ALLOWED_CALLER_IDS", "callers", """
    The allowed callers' unique ids (`uniqueId`, decimal digits), comma-separated. When set, the ID token's `sub`
    claim, the account's unique id, must be one of them besides its email being allowed: an account deleted and
    recreated under the same email has a new unique id and is refused. Needs caller verification on. See
    [caller verification](../targets-and-auth.md#caller-verification).""",
        component="the unique id of the Scheduler identity the component creates (unset for a "
                  "`scheduler_service_account_email` it is given)")
declare("DEDUP_OIDC_CERTS_URL", "callers", "Google's token-signing certificate endpoint (tests only).",
        default="https://www.googleapis.com/oauth2/v1/certs")
declare("DEDUP_TRUST_CLOUD_RUN_IAM", "callers", """
    `true` or `false`. `true` accepts tokens whose signature Cloud Run removed after verifying them, only while the
    handler proves its own service private; needs caller verification on and `DEDUP_SERVICE`. See
    [the trust model](../targets-and-auth.md#the-trust-model).""",
        default="false", component="`true`")
declare("DEDUP_SERVICE", "callers", """
    This Cloud Run service's own name, `projects/P/locations/L/services/S`. Trust mode reads its IAM policy and
    `invokerIamDisabled` through the Cloud Run Admin API (`DEDUP_RUN_API`).""",
        component="the service's name")
declare("DEDUP_SCHEDULER_JOB", "callers", """
    The one Scheduler job this handler serves, `projects/P/locations/L/jobs/J`. With it, a delivery naming another
    job is refused with 403, the run is keyed on this name whatever the `X-Dedup-*` headers say, and the run check
    checks only this job. See [one job per handler](../targets-and-auth.md#one-job-per-handler).""",
        component="the Scheduler job's name")
declare("DEDUP_APP_ENGINE_CALLER", "callers", """
    `true` or `false`. `true` (on App Engine, whose Scheduler target carries no OIDC token) admits only requests
    carrying `X-Appengine-Cron: true` or `X-AppEngine-QueueName: __cron`, headers App Engine sets for Scheduler's
    App Engine target and strips from external requests; any other request gets 403 before the store is touched.
    Refused beside `DEDUP_OIDC_AUDIENCE` / `DEDUP_ALLOWED_CALLERS`. See
    [on App Engine](../targets-and-auth.md#on-app-engine).""",
        default="false", component="`true` with `app_engine` (not set on Cloud Run)")
declare("DEDUP_APP_ENGINE_OPEN_REASON", "callers", """
    On App Engine (`GAE_APPLICATION` or `GAE_SERVICE` set by its runtime) the caller check fails closed: unset
    `DEDUP_APP_ENGINE_CALLER` means `true` there, and `false` stops the handler at start-up unless this variable says
    why the app is open on purpose (logged at start-up). App Engine has no IAM gate, so an open app lets anyone run
    the job or claim a coming run.""")
declare("GAE_APPLICATION", "callers", "Set by App Engine's runtime: the app's id. Its presence means the handler "
        "serves on App Engine (see `DEDUP_APP_ENGINE_OPEN_REASON`).")
declare("GAE_SERVICE", "callers", "Set by App Engine's runtime: the service's name (see `GAE_APPLICATION`).")
declare("DEDUP_ALLOW_TEST_ENDPOINTS", "local", """
    `1` or `true` in tests and local tools only (`scheduler-dedup demo`, `run-local` and the test fixtures set it):
    admits settings that point the handler at test servers, which stop it at start-up otherwise: a plain-http or
    non-Google `DEDUP_OIDC_CERTS_URL`, `DEDUP_RUN_API`, `DEDUP_WORKFLOWS_API` or `DEDUP_CLOUD_BUILD_API` (whoever
    answers the certificate URL signs tokens the handler accepts; an API host receives the runtime account's access
    token), and `DEDUP_TARGET_AUTH=none` to a host that is not loopback; and, on a deployed handler (`K_SERVICE` or
    `GAE_APPLICATION` set), variables that redirect its store, credentials, metadata server, TLS trust or proxy
    (`FIRESTORE_EMULATOR_HOST`, `GOOGLE_APPLICATION_CREDENTIALS`, `HTTPS_PROXY`...). The policy pack refuses it in a
    stack, also when its value comes from a secret.""")
declare("HOME", "local", """
    Set by the container runtime (from the image's user). Application Default Credentials read the gcloud credentials
    file under it (`HOME/.config/gcloud/application_default_credentials.json`) before the attached service account
    (https://cloud.google.com/docs/authentication/application-default-credentials), so a deployed handler (`K_SERVICE`
    or `GAE_APPLICATION` set) refuses to start when that file exists, and a job's `env`, `secret_env` or stack may not
    set it.""", reader="the container runtime")
declare("K_SERVICE", "local", """
    Set by Cloud Run (services and functions) on every instance: the service's name. Its presence (or App Engine's
    `GAE_APPLICATION`) means a deployed handler, which refuses to start beside a variable that redirects its store,
    credentials, metadata server, TLS trust or proxy (`FIRESTORE_EMULATOR_HOST`, `GOOGLE_APPLICATION_CREDENTIALS`,
    `REQUESTS_CA_BUNDLE`, `HTTPS_PROXY`...; the list and its sources: `scheduler_dedup.handler.core.env_names`)
    unless `DEDUP_ALLOW_TEST_ENDPOINTS` is set (https://cloud.google.com/run/docs/container-contract#env-vars).""",
        reader="Cloud Run")

declare("DEDUP_IDEMPOTENCY_DISABLED", "local", """
    `1` or `true` in unit tests only: `idempotent` and `idempotent_endpoint` run the function on every call and open
    no run store (a warning is logged once). `0`, `false` or empty is off; any other value (`yes`, `on`) is a
    `ConfigError` at each call. The policy pack refuses anything but off in a stack. See
    [idempotent](../idempotent.md#switching-it-off-in-unit-tests).""")

# ---------------------------------------------------------------- schedule and monitoring

declare("DEDUP_SCHEDULE", "schedule", """
    The Scheduler job's unix-cron schedule, stored on every run record, so that run history and the run check know
    the expected fire times. Without it nothing can be reported missed, and the run check answers 500
    `not_configured`.""",
        component="`schedule`")
declare("DEDUP_TIME_ZONE", "schedule", """
    The schedule's tz database time zone (Cloud Scheduler's default is `Etc/UTC`), stored beside it.""",
        default="Etc/UTC", component="`time_zone`")
declare("DEDUP_SCHEDULE_SINCE", "schedule", """
    When the Scheduler job got its current schedule (created, or its schedule, time zone or name last changed),
    RFC 3339 with an offset. Stored on every record; no fire time before it is expected, so a fresh deploy reports
    nothing missed. Unset, run history bounds its windows by the job's earliest record.""",
        component="a `time.Static` timestamp, replaced when schedule, time zone or job name change")
declare("DEDUP_PAUSED_SINCE", "schedule", """
    When the Scheduler job was last paused, RFC 3339 with an offset. The run check and run history report the fire
    times from then on (until `DEDUP_RESUMED_AT`, when set) as one `paused` span, not as missed runs, so a planned
    pause pages nothing; a run missed before the pause is still missed. A pause made outside the stack
    (`gcloud scheduler jobs pause`) does not set it.""",
        component="a `time.Static` timestamp, replaced when `paused` turns true and kept after a resume")
declare("DEDUP_RESUMED_AT", "schedule", """
    When the pause that began at `DEDUP_PAUSED_SINCE` ended, RFC 3339 with an offset; unset while the job is
    paused. Fire times from then on are expected again. Equal to `DEDUP_PAUSED_SINCE` for a job never paused.""",
        component="a `time.Static` timestamp, replaced when `paused` changes")
declare("DEDUP_SCHEDULER_API", "schedule", """
    The Cloud Scheduler API, `https://cloudscheduler.googleapis.com`, that the run check reads its own job
    (`DEDUP_SCHEDULER_JOB`) from, so a pause made outside the stack (`gcloud scheduler jobs pause`) is reported as
    `paused`, not as missed runs. Unset: not read. The runtime account needs `roles/cloudscheduler.viewer`.""")
declare("DEDUP_RUN_KEY_LOCATION", "schedule", """
    The location run keys are made with, in place of the Scheduler job's region: the region of the job's first
    deploy, kept when `region` moves, so the old and the new Scheduler job, both firing while `pulumi up` moves the
    job, key a fire time to one run (and the run check reads the records of both). Unset: the delivery's location
    (`X-Dedup-Location`, the full job name, or `DEDUP_SCHEDULER_JOB`'s). See
    [moving a job to another region](../renaming.md#moving-a-job-to-another-region).""",
        component="the region of the job's first deploy (pinned by `time.Static` `<name>-key-location`)")
declare("DEDUP_KEY_LOCAL_TIME", "schedule", """
    `true` or `false`. `true` keys each run on its wall-clock time in `DEDUP_TIME_ZONE` instead of its UTC instant:
    on the day clocks go back, a delivery of the repeated hour at its second instant is then a duplicate. The
    trade-off: a schedule that fires more than once an hour runs each repeated wall-clock time once, not twice.""",
        default="false")

# ---------------------------------------------------------------- set for other programs

declare("DEDUP_RUN_ID", "passed on", """
    The run id, set by the handler as a container env override on each execution of a Cloud Run job target. The job
    deduplicates on it, e.g. with `@idempotent(key=lambda: os.environ["DEDUP_RUN_ID"])`.""",
        reader="your Cloud Run job")
declare("DEDUP_SCHEDULE_TIME", "passed on", """
    The run's schedule time (RFC 3339, UTC), the end of its data interval, set with `DEDUP_RUN_ID` on each execution
    of a Cloud Run job target. See [the run's interval](../how-it-works.md#the-runs-interval).""",
        reader="your Cloud Run job")
declare("DEDUP_PREVIOUS_SCHEDULE_TIME", "passed on", """
    The schedule's fire time before the run's (RFC 3339, UTC), the start of its data interval, on the job's wall
    clock in its time zone; set with `DEDUP_RUN_ID` on each execution of a Cloud Run job target, absent for a forced
    run. See [the run's interval](../how-it-works.md#the-runs-interval).""",
        reader="your Cloud Run job")
declare("DEDUP_TTL_OWNER", "passed on", """
    Where the TTL policy of this service's run records lives when the stack has none (a store in another stack),
    e.g. `stack acme/scheduler-dedup/store`. The handler does not read it; the policy pack's `dedup-firestore-ttl`
    and `dedup-ttl-owner-declared` do.""",
        component="for a job on a store from another stack: `store.ttl_owner`", reader="the policy pack")
declare("THREADS", "passed on", """
    functions-framework's gunicorn threads: how many requests one instance serves at once.""",
        component="8, and Cloud Run's request concurrency the same", reader="functions-framework")

# ---------------------------------------------------------------- local development

declare("FIRESTORE_EMULATOR_JAR", "local", """
    Path of `cloud-firestore-emulator.jar` for the local tools. Unset, they look in the Debian package's files, the
    Cloud SDK root `gcloud info` reports and the usual SDK folders.""",
        reader="the local tools")

# ---------------------------------------------------------------- renamed

declare("DEDUP_FIRESTORE_TIMEOUT_SECONDS", "renamed", """
    Renamed `DEDUP_STORE_TIMEOUT_SECONDS` (it bounds every store's calls). Set, it stops the handler at start-up
    with the new name.""")
