"""Rules on the service that runs the dedup handler (a Cloud Run v2 or v1 service, or a gen2 function): its
``DEDUP_*`` settings and the handler's start-up checks, the audience it sends its proxy target, a lease that
covers the request timeout and attempt deadline, retries that outlast a crashed attempt's lease, CPU always
allocated, an instance kept for jobs that outlive the attempt deadline, a catch-up that fits its share of the
attempt deadline, a location Cloud Run is offered in, environment variable names Cloud Run takes (on any Cloud Run
service or job), and ``idempotent`` left on (on any service, function or job)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.callers.audience import misspelt_target_audience, target_audience
from scheduler_dedup.handler.callers.app_engine import APP_ENGINE_CALLER_ENV
from scheduler_dedup.handler.config.environment import IDEMPOTENCY_DISABLED_ENV, idempotency_disabled
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.env_names import env_name_problem, home_mount_problem, redirecting_variable
from scheduler_dedup.handler.service.startup import ALLOW_TEST_ENDPOINTS_ENV, startup_problems
from scheduler_dedup.infra.project.locations import region_problem
from scheduler_dedup.infra.job.cpu_allocation import function_cpu_advisory
from scheduler_dedup.infra.job.scale_in import scale_in_advisory
from scheduler_dedup.handler.schedule.catch_up_budget import DEFAULT_ATTEMPT_DEADLINE_SECONDS, catch_up_advisory
from scheduler_dedup.handler.schedule.retry_windows import (
    RetryPolicy,
    max_retry_duration_to_recover,
    min_backoff_to_recover,
    recovers_crash,
    crash_unrecovered,
    retries_described,
)

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.readings import read_retry
from scheduler_dedup.policies.reading.model import UNKNOWN, Resource, get, is_unknown, number
from scheduler_dedup.policies.rules.base import (
    rule,
    _calls_run_check,
    _deadline_and_timeout,
    _env_seconds,
    _env_shown,
    _fmt,
    _seconds_cfg,
    _timeout,
)
from scheduler_dedup.policies.reading.topology import (
    APP_ENGINE_VERSION,
    CLOUD_FUNCTION_V2,
    CLOUD_RUN_SERVICE,
    CLOUD_RUN_SERVICE_V1,
    SERVICE_TYPES,
    Topology,
    env_value,
    is_dedup_service,
    service_env,
    service_mount_paths,
    service_timeout_field,
)


# ---------------------------------------------------------------- dedup-target-audience

@rule(name="dedup-target-audience", enforcement="mandatory",
      description="The ID-token audience the handler sends to its HTTP proxy target (DEDUP_TARGET_AUDIENCE or its "
                  "default) is one the target's host accepts (the full function URL on *.cloudfunctions.net).")
def dedup_target_audience(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """The ID-token audience the handler sends to its HTTP proxy target is one the target's host accepts.

    ``DEDUP_TARGET_AUDIENCE`` (or, unset, the handler's default for ``DEDUP_TARGET``) is judged by
    :func:`~scheduler_dedup.handler.callers.audience.misspelt_target_audience` and
    :func:`~scheduler_dedup.handler.callers.audience.target_audience`, the functions the handler runs at start-up:
    on ``*.cloudfunctions.net`` only the full function URL works. Unknown values pass.
    """
    findings: list[tuple[Resource | None, str]] = []
    for service in Topology.of(resources).dedup_services():
        env = service_env(service)
        kind, url = env_value(env, "DEDUP_TARGET_TYPE", None), env_value(env, "DEDUP_TARGET", None)
        audience = env_value(env, "DEDUP_TARGET_AUDIENCE", None)
        if kind != "http" or not isinstance(url, str) or is_unknown(url) or is_unknown(audience):
            continue
        if isinstance(audience, str) and audience.strip():
            problem = misspelt_target_audience(audience.strip(), url)
            if problem:
                findings.append((service, f"service {service.name}: env DEDUP_TARGET_AUDIENCE={problem}"))
            continue
        try:
            target_audience(url)
        except ValueError as error:
            findings.append((service, f"service {service.name}: env DEDUP_TARGET={error}; the handler refuses it at "
                                      "start-up"))
    return findings


# ---------------------------------------------------------------- dedup-lease-covers-deadline
@rule(name="dedup-lease-covers-deadline", enforcement="mandatory",
      description="The handler's lease (DEDUP_LEASE_SECONDS) is at least the service request timeout, which is at "
                  "least the job's attempt deadline.",
      config_schema={"leaseMarginSeconds": {"type": "number", "default": 0, "minimum": 0,
                                            "description": "extra seconds the lease must exceed the request timeout by"}})
def dedup_lease_covers_deadline(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """``DEDUP_LEASE_SECONDS`` >= the service's request timeout (``template.timeout``) >= each calling job's ``attemptDeadline``.

    A lease shorter than the request timeout lets a second delivery take over a run that is still
    executing; a request timeout shorter than the attempt deadline makes Cloud Run cut attempts that
    Scheduler still waits for. Defaults: lease 300 s (handler), timeout 300 s (Cloud Run), deadline 180 s
    (Scheduler). Config ``leaseMarginSeconds`` (default 0) demands extra lease beyond the timeout.
    """
    margin = _seconds_cfg(config, "leaseMarginSeconds")
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        lease, error = _env_seconds(service, limits.ENV_LEASE, limits.DEFAULT_LEASE_S)
        if error:
            findings.append((service, error))
        timeout_reading = _timeout(service)
        if timeout_reading.problem:
            findings.append((service, f"service {service.name}: {timeout_reading.problem}"))
        timeout = timeout_reading.value
        if isinstance(lease, float) and isinstance(timeout, float) and lease < timeout + margin:
            findings.append((service, f"env {limits.ENV_LEASE}={_env_shown(service, limits.ENV_LEASE, lease)} is shorter "
                                      f"than the request timeout {timeout_reading.shown}"
                                      + (f" plus {_fmt(margin)}" if margin else "") +
                                      f" of service {service.name}: a retry could take over a run that is still "
                                      f"executing. Set {limits.ENV_LEASE} to at least {timeout + margin:g} or lower "
                                      f"{service_timeout_field(service)[0]}"))
        for pairing in topology.jobs_of(service):
            deadline_reading, _ = _deadline_and_timeout(pairing)
            if deadline_reading.problem:
                findings.append((pairing.job, f"job {pairing.job.name}: {deadline_reading.problem}, so the lease and "
                                              "request timeout cannot be checked against it" + pairing.note))
            deadline = deadline_reading.value
            if isinstance(deadline, float) and isinstance(timeout, float) and timeout < deadline:
                findings.append((pairing.job, f"attemptDeadline {deadline_reading.shown} of job {pairing.job.name} is longer "
                                              f"than service {service.name}'s request timeout {timeout_reading.shown}: set the "
                                              "service's "
                                              f"{service_timeout_field(service)[0]} to at least \"{_fmt(deadline)}\" (and {limits.ENV_LEASE} "
                                              "with it) or lower attemptDeadline" + pairing.note))
            # With a known timeout, lease < deadline is already reported above (lease < timeout, or
            # timeout < deadline "and DEDUP_LEASE_SECONDS with it").
            if (isinstance(deadline, float) and isinstance(lease, float) and lease < deadline
                    and not isinstance(timeout, float)):
                findings.append((pairing.job, f"env {limits.ENV_LEASE}={_env_shown(service, limits.ENV_LEASE, lease)} of "
                                              f"service {service.name} is shorter than "
                                              f"job {pairing.job.name}'s attemptDeadline {deadline_reading.shown}: set "
                                              f"{limits.ENV_LEASE} to at least {deadline:g}" + pairing.note))
    return findings


# ---------------------------------------------------------------- dedup-retries-outlast-lease

@rule(name="dedup-retries-outlast-lease", enforcement="mandatory",
      description="A crashed attempt's run is retried after its lease expires: the waits before the job's retries "
                  "add up to at least DEDUP_LEASE_SECONDS.")
def dedup_retries_outlast_lease(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A crashed attempt's run is retried after its lease expires: the job's retries span ``DEDUP_LEASE_SECONDS``.

    An attempt that dies holding the claim (instance killed, Firestore down at completion) blocks the run
    with 409 until its lease expires, up to ``DEDUP_LEASE_SECONDS`` (default 300) after the crash. Only a
    retry that comes later takes the run over: the waits before retries 1..``retryCount`` must add up to
    at least the lease (:func:`~scheduler_dedup.handler.schedule.retry_windows.crash_recovery_seconds`, the condition the
    component enforces). ``retryCount`` 0 (Scheduler's default) never recovers. Unreadable retry settings
    are findings; unknown values pass.
    """
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        lease, _ = _env_seconds(service, limits.ENV_LEASE, limits.DEFAULT_LEASE_S)  # unreadable: the lease rule's
        if not isinstance(lease, float):
            continue
        lease_shown = _env_shown(service, limits.ENV_LEASE, lease)
        for pairing in topology.jobs_of(service):
            if _calls_run_check(pairing.job):
                continue  # the watchdog's run check claims nothing, so no crashed claim waits for a retry
            reading = read_retry(pairing.job.props)
            retry_problems = [p for p in reading.problems if p.startswith("retryConfig.")]
            if retry_problems:
                findings += [(pairing.job, f"job {pairing.job.name}: {problem}; whether a retry outlasts a crashed "
                                           "attempt's lease cannot be checked" + pairing.note)
                             for problem in retry_problems]
                continue
            policy = reading.policy
            deadline = reading.deadline.value or limits.SCHEDULER_HTTP_DEADLINE_DEFAULT_S
            if policy is None or recovers_crash(policy, lease, deadline):
                continue
            written = get(pairing.job.props, "retryConfig.retryCount") is not None
            count = f"retryCount {policy.retry_count}" + ("" if written else " (Scheduler's default)")
            duration = f", maxRetryDuration {_fmt(policy.max_retry_duration_seconds)}"
            hint = min_backoff_to_recover(RetryPolicy(max(policy.retry_count, 1), policy.max_retry_duration_seconds,
                                                      policy.min_backoff_seconds, policy.max_backoff_seconds,
                                                      policy.max_doublings), lease, deadline)
            fixes = [f"set retryConfig.minBackoffDuration to at least \"{hint}s\""
                     + (" and retryCount to at least 1" if policy.retry_count == 0 else "")
                     if hint is not None else "raise retryCount and maxBackoffDuration"]
            longer = max_retry_duration_to_recover(policy, lease, deadline)
            if longer is not None:
                fixes.append(f"set retryConfig.maxRetryDuration to at least \"{longer}s\"")
            findings.append((pairing.job, f"job {pairing.job.name} has {count}{duration}: "
                                          f"{retries_described(policy, deadline)}, but a crashed attempt holds the "
                                          f"run for up to {limits.ENV_LEASE}={lease_shown} of service {service.name}; "
                                          f"{crash_unrecovered(policy, deadline)}. "
                                          f"To fix it, {'; or '.join(fixes)}; or lower {limits.ENV_LEASE}"
                                          + pairing.note))
    return findings


# ---------------------------------------------------------------- dedup-cpu-always-allocated

def _cpu_throttled(service: Resource) -> bool | None:
    """True when no container of the service has CPU always allocated (``resources.cpuIdle`` true or unset: Cloud
    Run's default is request-based billing), None when that is not known yet (preview)."""
    containers = get(service.props, "template.containers")
    if is_unknown(containers):
        return None
    values = [get(c, "resources.cpuIdle") for c in containers] if isinstance(containers, list) else []
    if any(is_unknown(v) for v in values):
        return None
    return not any(v is False for v in values)


@rule(name="dedup-cpu-always-allocated", enforcement="advisory",
      description="A Cloud Run service running the dedup handler has CPU always allocated (cpuIdle: false), so lease "
                  "renewals keep running after Scheduler hangs up.")
def dedup_cpu_always_allocated(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A Cloud Run (v2) service running the dedup handler has CPU always allocated (``cpuIdle: false``).

    The handler renews the lease from a background thread while the job runs, also after Scheduler hung up at
    its attempt deadline. With request-based billing Cloud Run throttles CPU outside request processing
    (https://cloud.google.com/run/docs/configuring/billing-settings,
    https://cloud.google.com/run/docs/tips/general#avoid_background_activities): the renewals can stall, the
    lease expire under a live job, and a retry run the job a second time. Advisory: request-based billing is
    cheaper for sparse jobs, and safe while every job finishes well within its attempt deadline. A Cloud Functions
    gen2 function running a Python job (``DEDUP_JOB``) is flagged with the component's own advisory
    (:func:`~scheduler_dedup.infra.job.cpu_allocation.function_cpu_advisory`): its CPU is always per request. Cloud
    Run v1 services are not checked. Unknown values (preview) pass.
    """
    findings: list[tuple[Resource | None, str]] = []
    for service in Topology.of(resources).dedup_services():
        if service.type == CLOUD_FUNCTION_V2:  # CPU per request, always: the component's own advisory
            job = env_value(service_env(service), "DEDUP_JOB", None)
            advisory = function_cpu_advisory(job is not None and not is_unknown(job))
            if advisory:
                findings.append((service, f"function {service.name}: {advisory}"))
            continue
        if service.type != CLOUD_RUN_SERVICE or not _cpu_throttled(service):
            continue
        findings.append((service, f"service {service.name} runs the dedup handler with CPU allocated only during "
                                  "requests (template.containers[].resources.cpuIdle is true or unset): lease renewals "
                                  "can stall once Scheduler hangs up, and a job outliving its attempt deadline can run "
                                  "twice. Set cpuIdle: false (DedupScheduledJob cpu_always_allocated=True, stack config "
                                  "scheduler-dedup:cpuAlwaysAllocated: true, the default), or accept the risk for jobs "
                                  "that always finish well within their attempt deadline"))
    return findings


# ---------------------------------------------------------------- dedup-handler-settings

@rule(name="dedup-handler-settings", enforcement="mandatory",
      description="A service running the dedup handler sets a DEDUP_* / GOOGLE_CLOUD_PROJECT environment that passes "
                  "the handler's own start-up checks (the ones the DedupScheduledJob component runs), so it does not "
                  "refuse to start.")
def dedup_handler_settings(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """The environment of a service running the dedup handler passes the handler's own start-up checks.

    The handler refuses to start (every request then fails) on a ``DEDUP_*`` / ``GOOGLE_CLOUD_PROJECT``
    environment it cannot work with: a missing project, a lease or retention out of range, a malformed
    ``DEDUP_JOB`` or ``DEDUP_TARGET``, ``DEDUP_ALLOWED_CALLERS`` without ``DEDUP_OIDC_AUDIENCE`` or the reverse.
    The checks are the handler's (:func:`scheduler_dedup.handler.service.startup.startup_problems`, which the
    ``DedupScheduledJob`` component runs too), on the variables the service sets: Cloud Run sets none of them.
    Services with a ``DEDUP_*`` variable are checked; unknown values (preview, Secret Manager) pass, except
    ``DEDUP_ALLOW_TEST_ENDPOINTS``, which counts as set when it cannot be read. An App Engine
    version is checked as App Engine runs it (``GAE_APPLICATION`` set), and must write ``DEDUP_APP_ENGINE_CALLER``
    (``true``, or ``false`` with ``DEDUP_APP_ENGINE_OPEN_REASON``): App Engine has no IAM gate, and an image older
    than the fail-closed default serves anyone. ``DEDUP_ALLOW_TEST_ENDPOINTS`` (tests and local tools only) is
    refused in a stack, and the endpoints it would admit are still judged.
    """
    findings: list[tuple[Resource | None, str]] = []
    for service in Topology.of(resources).services:
        if not is_dedup_service(service):
            continue
        env = service_env(service)
        if "*" in env:
            continue  # the whole list is not known yet
        unknown = [name for name, value in env.items() if is_unknown(value)]
        plain = {name: str(value) for name, value in env.items() if value is not None and not is_unknown(value)}
        if service.type == APP_ENGINE_VERSION:
            plain.setdefault("GAE_APPLICATION", "app")  # what App Engine's runtime sets on every instance
            if not plain.get(APP_ENGINE_CALLER_ENV, "").strip() and APP_ENGINE_CALLER_ENV not in unknown:
                findings.append((service, f"App Engine version {service.name} serves the dedup handler without "
                                          f"{APP_ENGINE_CALLER_ENV}: App Engine has no IAM gate, so without the caller "
                                          "check anyone can run the job or claim a coming run; set "
                                          f"{APP_ENGINE_CALLER_ENV}=true (DedupScheduledJob does with app_engine)"))
        if plain.get(ALLOW_TEST_ENDPOINTS_ENV, "").strip():
            findings.append((service, f"service {service.name} sets {ALLOW_TEST_ENDPOINTS_ENV}, which admits test "
                                      "certificate and API endpoints: remove it (tests and local tools only)"))
            plain.pop(ALLOW_TEST_ENDPOINTS_ENV)
        elif ALLOW_TEST_ENDPOINTS_ENV in unknown:  # what the pack cannot read counts as set
            findings.append((service, f"service {service.name} sets {ALLOW_TEST_ENDPOINTS_ENV} from a value the pack "
                                      "cannot read (a Secret Manager secret, or another resource's output), so it "
                                      "counts as set, which admits test certificate and API endpoints: remove it "
                                      "(tests and local tools only)"))
            unknown.remove(ALLOW_TEST_ENDPOINTS_ENV)
        for name in [n for n in plain if redirecting_variable(n)]:  # dedup-handler-environment names them
            plain.pop(name)
        for problem in startup_problems(plain, unknown):
            findings.append((service, f"the dedup handler on service {service.name} would refuse to start: {problem}"))
    return findings


# ---------------------------------------------------------------- dedup-handler-environment

@rule(name="dedup-handler-environment", enforcement="mandatory",
      description="A service running the dedup handler sets no variable that redirects the handler's store, "
                  "credentials, metadata server, TLS trust or proxy (FIRESTORE_EMULATOR_HOST, "
                  "GOOGLE_APPLICATION_CREDENTIALS, GCE_METADATA_HOST, REQUESTS_CA_BUNDLE, HTTPS_PROXY, HOME...), plain "
                  "or from a secret, and mounts no volume in a home folder.")
def dedup_handler_environment(resources: Sequence[Resource],
                              config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A service running the dedup handler (Cloud Run v2 or v1, a gen2 function, an App Engine version) sets no
    variable that redirects where the handler's store, credentials, metadata, TLS trust or proxy go.

    The list is :data:`scheduler_dedup.handler.core.env_names.REDIRECTING_ENV` (each with its source): the component
    refuses them as a job's ``env`` / ``secret_env`` and a deployed handler refuses to start beside them. Judged by
    name, so a value from Secret Manager or another resource's output is named too; a variable list that is not
    known at all (preview) is not seen. A volume mounted in a home folder is named too
    (:func:`~scheduler_dedup.handler.core.env_names.home_mount_problem`, the component's check of ``secret_files``).
    """
    findings: list[tuple[Resource | None, str]] = []
    for service in Topology.of(resources).dedup_services():
        for name in sorted(service_env(service)):
            problem = redirecting_variable(name)
            if problem:
                findings.append((service, f"service {service.name} runs the dedup handler with {problem}"))
        for path in service_mount_paths(service):
            problem = home_mount_problem(path)
            if problem:
                findings.append((service, f"service {service.name} runs the dedup handler with a volume mount: "
                                          f"{problem}"))
    return findings


# ---------------------------------------------------------------- dedup-shared-collection-job-bound

@rule(name="dedup-shared-collection-job-bound", enforcement="mandatory",
      description="Handlers sharing one run-record collection each name the one Scheduler job they serve "
                  "(DEDUP_SCHEDULER_JOB), so a delivery to one cannot claim a run of another's job.")
def dedup_shared_collection_job_bound(resources: Sequence[Resource],
                                      config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Two or more handler services on one run-record collection (same store, database and collection) each name
    the one Scheduler job they serve (``DEDUP_SCHEDULER_JOB``).

    Without it a handler keys a run on the ``X-Dedup-*`` / job-name headers of the delivery, so a delivery to one
    handler can claim (and so skip) a run of the other's job in the shared collection. Unknown values pass.
    """
    by_collection: dict[tuple[str, str, str], list[Resource]] = {}
    for service in Topology.of(resources).dedup_services():
        env = service_env(service)
        values = [env_value(env, name, default) for name, default in (
            ("DEDUP_STORE", "firestore"), (limits.ENV_DATABASE, limits.DEFAULT_DATABASE),
            (limits.ENV_COLLECTION, limits.DEFAULT_COLLECTION))]
        if any(is_unknown(v) for v in values):
            continue
        by_collection.setdefault((str(values[0]), str(values[1]), str(values[2])), []).append(service)
    findings: list[tuple[Resource | None, str]] = []
    for (store, database, collection), services in by_collection.items():
        if len(services) < 2:
            continue
        unbound = [s for s in services if env_value(service_env(s), "DEDUP_SCHEDULER_JOB", None) in (None, "")]
        for service in unbound:
            others = ", ".join(s.name for s in services if s is not service)
            findings.append((service, f"service {service.name} shares run-record collection {collection} ({store}, "
                                      f"database {database}) with {others}, and names no DEDUP_SCHEDULER_JOB: a "
                                      "delivery to one handler can then claim a run of another's job; set "
                                      "DEDUP_SCHEDULER_JOB=projects/P/locations/L/jobs/J on each (DedupScheduledJob "
                                      "does), or give each job its own collection"))
    return findings


# ---------------------------------------------------------------- dedup-scale-in

def _min_instances(service: Resource) -> Any:
    """The service's minimum instances (0 when unset, Cloud Run's default), UNKNOWN when not known yet: v2's
    ``template.scaling.minInstanceCount`` or service-level ``scaling.minInstanceCount``, v1's
    ``autoscaling.knative.dev/minScale`` annotation, a gen2 function's ``serviceConfig.minInstanceCount``."""
    if service.type == CLOUD_RUN_SERVICE_V1:
        annotations = get(service.props, "template.metadata.annotations")
        values = [annotations.get("autoscaling.knative.dev/minScale") if isinstance(annotations, Mapping) else None]
    elif service.type == CLOUD_FUNCTION_V2:
        values = [get(service.props, "serviceConfig.minInstanceCount")]
    else:
        values = [get(service.props, "template.scaling.minInstanceCount"), get(service.props, "scaling.minInstanceCount")]
    if any(is_unknown(v) for v in values):
        return UNKNOWN
    numbers = [number(v) for v in values]
    return max([int(v) for v in numbers if isinstance(v, float)], default=0)


@rule(name="dedup-scale-in", enforcement="advisory",
      description="A service whose handler runs a Python job keeps an instance (minimum instances 1), so a job "
                  "outliving its attempt deadline is not scaled in mid-run; or run long jobs as a Cloud Run job.")
def dedup_scale_in(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A service whose handler runs the job itself (a Python ``DEDUP_JOB``) keeps an instance, so a job that outlives
    its attempt deadline is not scaled in mid-run.

    After Scheduler hangs up, such a job runs with no request in flight, and Cloud Run removes idle instances
    (min-instances and autoscaling pages): the finding and its remedies (minimum instances 1, or the Cloud Run job
    target) are :func:`scheduler_dedup.infra.job.scale_in.scale_in_advisory`'s, which the component warns with too.
    Proxy targets run elsewhere and pass; unknown values pass.
    """
    findings: list[tuple[Resource | None, str]] = []
    topology = Topology.of(resources)
    for service in topology.dedup_services():
        kind = env_value(service_env(service), "DEDUP_TARGET_TYPE", "python")
        minimum = _min_instances(service)
        if is_unknown(kind) or is_unknown(minimum):
            continue
        for pairing in topology.jobs_of(service):
            if _calls_run_check(pairing.job) is not False:
                continue  # the watchdog (or a job whose URI is not known yet)
            deadline, _ = _deadline_and_timeout(pairing)
            if deadline.value is None:
                continue
            advisory = scale_in_advisory(kind == "python", minimum, deadline.value)
            if advisory:
                findings.append((service, f"service {service.name}: {advisory}" + pairing.note))
            break
    return findings


# ---------------------------------------------------------------- dedup-catch-up-budget

@rule(name="dedup-catch-up-budget", enforcement="advisory",
      description="A handler with a catch-up window catches a full window's gap up within the share of the job's "
                  "attempt deadline one delivery spends on it, and knows that deadline (DEDUP_ATTEMPT_DEADLINE_SECONDS).")
def dedup_catch_up_budget(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A handler with ``DEDUP_CATCH_UP_WINDOW_SECONDS`` against each calling job's schedule and attempt deadline.

    The finding and its numbers are :func:`scheduler_dedup.handler.schedule.catch_up_budget.catch_up_advisory`'s,
    which the component warns (or fails) with too; the pack sees no run length, so it assumes one. A handler whose
    ``DEDUP_ATTEMPT_DEADLINE_SECONDS`` is unset or differs from the job's ``attemptDeadline`` budgets its catch-up on
    the wrong deadline. Unknown values pass.
    """
    findings: list[tuple[Resource | None, str]] = []
    topology = Topology.of(resources)
    for service in topology.dedup_services():
        window, _ = _env_seconds(service, "DEDUP_CATCH_UP_WINDOW_SECONDS", 0)
        if not isinstance(window, float) or window <= 0:
            continue
        assumed, _ = _env_seconds(service, "DEDUP_ATTEMPT_DEADLINE_SECONDS", float(DEFAULT_ATTEMPT_DEADLINE_SECONDS))
        for pairing in topology.jobs_of(service):
            deadline = _deadline_and_timeout(pairing)[0].value
            schedule, zone = get(pairing.job.props, "schedule"), get(pairing.job.props, "timeZone") or "Etc/UTC"
            if deadline is None or not isinstance(schedule, str) or not isinstance(zone, str) \
                    or is_unknown(schedule) or is_unknown(zone):
                continue
            if isinstance(assumed, float) and assumed != deadline:
                findings.append((service, f"service {service.name}: env DEDUP_ATTEMPT_DEADLINE_SECONDS="
                                          f"{_env_shown(service, 'DEDUP_ATTEMPT_DEADLINE_SECONDS', assumed)} is not job "
                                          f"{pairing.job.name}'s attemptDeadline {deadline:g} s: its catch-up budgets "
                                          f"on the wrong deadline; set it to {deadline:g}" + pairing.note))
            finding = catch_up_advisory(window, schedule, zone, deadline, None, "DEDUP_CATCH_UP_WINDOW_SECONDS",
                                        "attemptDeadline")
            if finding:
                findings.append((service, f"service {service.name}: {finding[0]}" + pairing.note))
    return findings


# ---------------------------------------------------------------- cloud-run-service-location

@rule(name="cloud-run-service-location", enforcement="mandatory",
      description="A Cloud Run service's (or Cloud Run function's) location is one Cloud Run is offered in.")
def cloud_run_service_location(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A Cloud Run (v2) service's, or a Cloud Functions gen2 function's (a Cloud Run service too), ``location`` is one
    Cloud Run is offered in
    (:func:`scheduler_dedup.infra.project.locations.region_problem`, the component's check of ``region`` too). Unknown
    values pass."""
    location = get(resource.props, "location")
    if resource.type not in (CLOUD_RUN_SERVICE, CLOUD_FUNCTION_V2) or not isinstance(location, str) \
            or is_unknown(location):
        return []
    problem = region_problem(location, ("Cloud Run",))
    return [f"location {problem}"] if problem else []


# ---------------------------------------------------------------- cloud-run-env-names

CLOUD_RUN_JOB = "gcp:cloudrunv2/job:Job"
#: Where each Cloud Run resource type keeps its containers.
_CONTAINERS = {CLOUD_RUN_SERVICE: "template.containers", CLOUD_RUN_SERVICE_V1: "template.spec.containers",
               CLOUD_RUN_JOB: "template.template.containers"}


@rule(name="cloud-run-env-names", enforcement="mandatory",
      description="Every environment variable of a Cloud Run service, job or function has a name Cloud Run takes: a letter or "
                  "'_' first, then letters, digits and '_'; no X_GOOGLE_ prefix; not a name Cloud Run sets itself "
                  "(PORT, K_SERVICE...).")
def cloud_run_env_names(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """Every environment variable of a Cloud Run service (v2 or v1), Cloud Run job or Cloud Functions gen2 function
    (``serviceConfig.environmentVariables`` and ``secretEnvironmentVariables[].key``) has a name Cloud Run takes
    (:func:`scheduler_dedup.handler.core.env_names.env_name_problem`, the component's check of a job's ``env`` too,
    without the handler's own names, which the component sets itself). Unknown names pass."""
    if resource.type == CLOUD_FUNCTION_V2:
        return _function_env_name_problems(resource)
    path = _CONTAINERS.get(resource.type)
    containers = get(resource.props, path) if path else None
    found = []
    for index, container in enumerate(containers if isinstance(containers, list) else []):
        envs = get(container, "envs")
        for item in envs if isinstance(envs, list) else []:
            name = get(item, "name")
            problem = None if is_unknown(name) else env_name_problem(name, jobs_own=False)
            if problem:
                found.append(f"{path}[{index}].envs: {problem}")
    return found


# ---------------------------------------------------------------- dedup-idempotency-enabled

@rule(name="dedup-idempotency-enabled", enforcement="mandatory",
      description="No Cloud Run service or job, function or App Engine version of the stack sets "
                  "DEDUP_IDEMPOTENCY_DISABLED: it makes idempotent functions run on every call (unit tests only).")
def dedup_idempotency_enabled(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """No deployed code runs with ``idempotent`` switched off (``DEDUP_IDEMPOTENCY_DISABLED``, read by
    :func:`scheduler_dedup.handler.config.environment.idempotency_disabled`, whose rule this applies). Every container
    of a Cloud Run service or job counts (``idempotent`` runs in any service, not only the handler's). Unknown
    values pass."""
    path = _CONTAINERS.get(resource.type)
    if path is None:
        envs = [service_env(resource)] if resource.type in SERVICE_TYPES else []  # a function, an App Engine version
    else:
        containers = get(resource.props, path)
        envs = [{get(item, "name"): get(item, "value") for item in get(container, "envs") or []}
                for container in (containers if isinstance(containers, list) else [])
                if isinstance(get(container, "envs"), list)]
    for env in envs:
        value = env.get(IDEMPOTENCY_DISABLED_ENV)
        if not isinstance(value, str):
            continue
        try:
            disabled = idempotency_disabled({IDEMPOTENCY_DISABLED_ENV: value})
        except ConfigError as error:
            return [f"{resource.name}: {error} (every idempotent call of it would fail)"]
        if disabled:
            return [f"{resource.name} sets {IDEMPOTENCY_DISABLED_ENV}={value}, so its idempotent functions run on "
                    "every call and duplicates run again: remove it (unit tests only)"]
    return []


def _function_env_name_problems(resource: Resource) -> list[str]:
    """:func:`cloud_run_env_names` of a function: its plain and its secret variables' names."""
    plain = get(resource.props, "serviceConfig.environmentVariables")
    secret = get(resource.props, "serviceConfig.secretEnvironmentVariables")
    named = [("serviceConfig.environmentVariables", name) for name in (plain if isinstance(plain, Mapping) else {})]
    named += [("serviceConfig.secretEnvironmentVariables", get(item, "key"))
              for item in (secret if isinstance(secret, list) else [])]
    found = []
    for where, name in named:
        problem = None if is_unknown(name) or not isinstance(name, str) else env_name_problem(name, jobs_own=False)
        if problem:
            found.append(f"{where}: {problem}")
    return found
