"""The policy pack's rules: one function per rule, registered in :data:`RULES`.

Each rule reads resource properties in the Pulumi engine's names (camelCase inputs of pulumi-gcp, e.g.
``httpTarget.oidcToken.serviceAccountEmail``), treats missing values as the provider/API default and
unknown values (:data:`~scheduler_dedup.policies.model.UNKNOWN`, during preview) as "cannot tell yet,
no violation", and returns messages that say what to change.

Resource rules have the signature ``(resource: Resource, config: Mapping[str, Any]) -> list[str]``;
stack rules ``(resources: Sequence[Resource], config) -> list[tuple[Resource | None, str]]``. ``config``
is the rule's configuration with its schema defaults filled in (see :meth:`Rule.resolve_config`).

This module imports neither pulumi nor pulumi_policy: the offline check and the tests call the rule
functions directly, and :mod:`scheduler_dedup.policies.pack` adapts them to CrossGuard policies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from scheduler_dedup.handler.audience import (
    HOST_KINDS,
    handler_accepts,
    host_kind,
    misspelt_target_audience,
    platform_accepts,
    split_audiences,
    target_audience,
)
from scheduler_dedup.handler.callers import parse_allowed_callers
from scheduler_dedup.handler.cron import is_iana_time_zone, unix_cron_problem
from scheduler_dedup.handler.errors import ConfigError
from scheduler_dedup.handler.paths import CHECK_PATH
from scheduler_dedup.handler.startup import startup_problems
from scheduler_dedup.infra.log_query import missed_run_clause
from scheduler_dedup.infra.schedule import (
    REQUEST_TIMEOUT_MARGIN_SECONDS,
    RetryPolicy,
    crash_recovery_seconds,
    min_backoff_to_recover,
    recovers_crash,
)

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.readings import Seconds, read_retry, read_seconds
from scheduler_dedup.policies.model import (
    InvalidDuration,
    Resource,
    duration_seconds,
    get,
    host,
    is_unknown,
    number,
    policy_bindings,
)
from scheduler_dedup.policies.topology import (
    CLOUD_RUN_SERVICE,
    FIRESTORE_FIELD,
    SCHEDULER_JOB,
    Pairing,
    Topology,
    env_value,
    is_dedup_service,
    service_env,
    service_timeout,
    service_timeout_field,
    service_urls,
)

Level = Literal["mandatory", "advisory", "disabled"]
ResourceCheck = Callable[[Resource, Mapping[str, Any]], list[str]]
StackCheck = Callable[[Sequence[Resource], Mapping[str, Any]], list[tuple[Resource | None, str]]]
Check = Callable[[Any, Mapping[str, Any]], list[Any]]


@dataclass(frozen=True)
class Rule:
    """One rule of the pack.

    Attributes:
        name: the policy name (stable; used in config files and reports).
        description: one sentence on what the rule checks and why.
        enforcement_level: default level, ``"mandatory"`` or ``"advisory"``.
        check: the rule function, a ``ResourceCheck`` or a ``StackCheck`` according to ``scope``.
        scope: ``"resource"`` (called per resource) or ``"stack"`` (called once with every resource).
        config_schema: JSON-schema ``properties`` of the rule's configuration, each with a ``default`` (and, for
            numbers, the ``minimum``/``maximum`` that make sense; Pulumi and the offline check refuse others).
        ordered_settings: pairs ``(low, high)`` of settings where ``low`` must not exceed ``high``.
    """

    name: str
    description: str
    enforcement_level: Level
    check: Check
    scope: Literal["resource", "stack"]
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    ordered_settings: tuple[tuple[str, str], ...] = ()

    def resolve_config(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """The schema defaults overlaid with ``given`` (keys outside the schema and ``enforcementLevel`` dropped)."""
        config = {key: spec.get("default") for key, spec in self.config_schema.items()}
        for key, value in (given or {}).items():
            if key in self.config_schema:
                config[key] = value
        return config


def _seconds_cfg(config: Mapping[str, Any], key: str) -> float:
    value = number(config.get(key))
    return float(value) if isinstance(value, float) else 0.0


def _fmt(seconds: float) -> str:
    return f"{seconds:g}s"


# ---------------------------------------------------------------- scheduler-job-unix-cron

def scheduler_job_unix_cron(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A Scheduler job's ``schedule`` is a five-field unix-cron expression and its ``timeZone`` an IANA name.

    Cloud Scheduler only accepts unix-cron (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules)
    and sends the ``X-CloudScheduler-ScheduleTime`` header the handler keys runs on only for unix-cron
    schedules; groc forms (``every 5 minutes``) are App Engine cron. Validated with croniter, restricted to
    5 fields without croniter's extensions (seconds field, ``L``, ``W``, ``#``, ``?``, ``H``). A missing or
    unknown schedule is not checked; a missing time zone is Scheduler's default (``Etc/UTC``).
    """
    if resource.type != SCHEDULER_JOB:
        return []
    messages: list[str] = []
    schedule = get(resource.props, "schedule")
    if isinstance(schedule, str) and not is_unknown(schedule):
        problem = unix_cron_problem(schedule)
        if problem:
            messages.append(f"schedule {problem}")
    time_zone = get(resource.props, "timeZone")
    if isinstance(time_zone, str) and not is_unknown(time_zone) and not is_iana_time_zone(time_zone):
        messages.append(f"timeZone {time_zone!r} is not an IANA time zone name: use e.g. 'Etc/UTC' or 'Europe/Paris'")
    return messages


# ---------------------------------------------------------------- scheduler-job-oidc-auth

def _is_google_api(uri: Any) -> bool:
    h = host(uri) if isinstance(uri, str) else None
    return bool(h) and (h == "googleapis.com" or str(h).endswith(".googleapis.com"))


def _custom_audiences(service: Resource) -> list[str]:
    values = get(service.props, "customAudiences")
    return [v for v in values if isinstance(v, str) and not is_unknown(v)] if isinstance(values, list) else []


def scheduler_job_oidc_auth(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """An HTTP target that is not a ``*.googleapis.com`` API carries an OIDC token whose audience passes every gate.

    Scheduler sends a Google-signed ID token only with ``httpTarget.oidcToken`` (``oauthToken`` is for
    ``*.googleapis.com`` only); its audience is ``oidcToken.audience``, or the target URI when unset
    (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#OidcToken). The audience
    must pass Google's gate in front of the target and, when the handler verifies callers, the handler's own
    exact comparison; both decisions are :mod:`scheduler_dedup.handler.audience`'s (``platform_accepts``,
    ``handler_accepts``), which cite their sources. The gate is judged against the paired service's URL and
    ``customAudiences`` or, without a paired service, the target URI; config ``allowedAudiences`` exempts
    values. Unknown values pass.
    """
    topology = Topology.of(resources)
    allowed = [a for a in config.get("allowedAudiences") or [] if isinstance(a, str)]
    findings: list[tuple[Resource | None, str]] = []
    for job in topology.jobs:
        target = get(job.props, "httpTarget")
        if target is None or is_unknown(target):
            continue
        uri = get(target, "uri")
        if _is_google_api(uri):
            continue
        shown = uri if isinstance(uri, str) else "the target"
        oidc = get(target, "oidcToken")
        if is_unknown(oidc):
            continue
        if oidc is None:
            extra = " and remove oauthToken (OAuth tokens are only for *.googleapis.com)" if get(target, "oauthToken") else ""
            findings.append((job, f"httpTarget to {shown} has no oidcToken: add httpTarget.oidcToken with "
                                  "serviceAccountEmail (an account holding roles/run.invoker on the service) and "
                                  f"audience = the service URL or one of its customAudiences{extra}"))
            continue
        email = get(oidc, "serviceAccountEmail")
        if not is_unknown(email) and not (isinstance(email, str) and "@" in email):
            findings.append((job, "httpTarget.oidcToken has no serviceAccountEmail: set it to the email of a service "
                                  "account that holds roles/run.invoker on the target service"))
        audience = get(oidc, "audience")
        if audience == "":
            audience = None  # an empty audience is unset: Scheduler uses the target URI
        effective = uri if audience is None else audience
        named = "httpTarget.oidcToken.audience" if audience is not None else "the default audience (httpTarget.uri)"
        pairing = topology.service_of(job)
        note = pairing.note if pairing else ""
        if pairing is not None:
            findings += [(job, m + note) for m in _caller_check_mismatch(pairing.service, effective, named, email)]
        if not isinstance(effective, str) or is_unknown(effective) or effective in allowed:
            continue
        gate = _platform_gate(pairing, uri)
        if gate is None:
            continue  # the URL the token goes to is not known yet: cannot tell during preview
        url, custom = gate
        where = f" of service {pairing.service.name}" if pairing else ""
        if url is None:  # a paired service whose URL is not known yet: only its custom audiences are
            if effective in custom or host_kind(effective) == "cloud_run":
                continue
            findings.append((job, f"{named} {effective!r} is neither a *.run.app URL nor one of the customAudiences"
                                  f"{where}: Cloud Run would refuse the token (401). Set httpTarget.oidcToken.audience "
                                  f"to the service URL or add {effective!r} to customAudiences{where}" + note))
            continue
        if platform_accepts(effective, url, custom):
            continue
        accepted = ", ".join(repr(a) for a in _accepted_spellings(url, custom))
        findings.append((job, f"{named} {effective!r} is not an audience {url} accepts ({HOST_KINDS[host_kind(url)]}): "
                              f"every delivery would be refused (401). Set httpTarget.oidcToken.audience to {accepted}, "
                              f"or add {effective!r} to customAudiences{where}" + note))
    return findings


def _platform_gate(pairing: Pairing | None, uri: Any) -> tuple[str | None, list[str]] | None:
    """(URL of the gate or None if not known yet, its custom audiences) the job's token must pass; None when
    nothing can be judged."""
    known_uri = uri if isinstance(uri, str) and not is_unknown(uri) else None
    if pairing is not None:
        if is_unknown(get(pairing.service.props, "customAudiences")):
            return None
        urls = service_urls(pairing.service)
        return (urls[0] if urls else known_uri), _custom_audiences(pairing.service)
    return (known_uri, []) if known_uri else None


def _accepted_spellings(url: str, custom: Sequence[str]) -> list[str]:
    """The values to suggest for ``url``'s gate: the one spelling the handler's default uses, then custom audiences."""
    try:
        first = [target_audience(url)]
    except ValueError:
        first = []
    return [*first, *custom] or [url]


def _caller_check_mismatch(service: Resource, audience: Any, named: str, email: Any) -> list[str]:
    """Messages where the job's token would fail the handler's own caller verification (401/403 on every run).

    The handler verifies the token only when both ``DEDUP_OIDC_AUDIENCE`` and ``DEDUP_ALLOWED_CALLERS``
    are set (comma-separated lists); the comparison is the handler's (exact audience,
    :func:`~scheduler_dedup.handler.audience.handler_accepts`; callers normalised or refused by
    :func:`~scheduler_dedup.handler.callers.normalise_caller`). Unknown values pass.
    """
    env = service_env(service)
    audiences, callers = env_value(env, "DEDUP_OIDC_AUDIENCE", None), env_value(env, "DEDUP_ALLOWED_CALLERS", None)
    if not (isinstance(audiences, str) and audiences and isinstance(callers, str) and callers):
        return []
    messages = []
    if isinstance(audience, str) and not is_unknown(audience) and not handler_accepts(audience, split_audiences(audiences)):
        messages.append(f"{named} {audience!r} is not one of the handler's DEDUP_OIDC_AUDIENCE values ({audiences!r}) "
                        f"on service {service.name}, which the handler compares exactly: it would answer 401 to every "
                        "delivery; write the same string in both")
    try:
        allowed = parse_allowed_callers(callers)
    except ConfigError as refused:
        messages.append(f"service {service.name}: {refused}")
        return messages
    if isinstance(email, str) and not is_unknown(email) and email.strip().lower() not in allowed:
        messages.append(f"httpTarget.oidcToken.serviceAccountEmail {email!r} is not in the handler's "
                        f"DEDUP_ALLOWED_CALLERS ({callers!r}) on service {service.name}: the handler would answer 403 "
                        "to every delivery; add it there or use an allowed account")
    return messages


# ---------------------------------------------------------------- dedup-target-audience

def dedup_target_audience(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """The ID-token audience the handler sends to its HTTP proxy target is one the target's host accepts.

    ``DEDUP_TARGET_AUDIENCE`` (or, unset, the handler's default for ``DEDUP_TARGET``) is judged by
    :func:`~scheduler_dedup.handler.audience.misspelt_target_audience` and
    :func:`~scheduler_dedup.handler.audience.target_audience`, the functions the handler runs at start-up:
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


# ---------------------------------------------------------------- scheduler-attempt-deadline

def _http_kind(resource: Resource) -> str | None:
    if get(resource.props, "httpTarget") is not None:
        return "http"
    if get(resource.props, "appEngineHttpTarget") is not None:
        return "appengine"
    return None


def scheduler_attempt_deadline(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """``attemptDeadline`` of a job with an HTTP target is a duration within 15 s to 30 min (1800 s).

    Source: Cloud Scheduler REST reference, ``Job.attemptDeadline``: "For HTTP targets ... The deadline must
    be in the interval [15 seconds, 30 minutes]"; unset means 180 s. Config ``minSeconds``/``maxSeconds``
    narrow the range. Pub/Sub targets ignore the deadline; App Engine targets (15 s to 24 h) are not checked.
    """
    if resource.type != SCHEDULER_JOB or _http_kind(resource) != "http":
        return []
    raw = get(resource.props, "attemptDeadline")
    if isinstance(raw, str) and not is_unknown(raw) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", raw):
        # The API takes a protobuf Duration: seconds "terminated by 's'" (Job.attemptDeadline).
        return [f"attemptDeadline {raw!r} has no unit: write it as seconds ending in 's', e.g. \"{raw.strip()}s\""]
    try:
        deadline = duration_seconds(raw)
    except InvalidDuration as error:
        return [f"attemptDeadline {error}"]
    if not isinstance(deadline, float):
        return []
    low = max(limits.SCHEDULER_HTTP_DEADLINE_MIN_S, _seconds_cfg(config, "minSeconds"))
    high = min(limits.SCHEDULER_HTTP_DEADLINE_MAX_S, _seconds_cfg(config, "maxSeconds") or limits.SCHEDULER_HTTP_DEADLINE_MAX_S)
    if low <= deadline <= high:
        return []
    return [f"attemptDeadline {_fmt(deadline)} is outside {_fmt(low)} to {_fmt(high)} for an HTTP target: set "
            f"attemptDeadline to a value in that range, e.g. \"{_fmt(min(max(deadline, low), high))}\" "
            "(and the Cloud Run request timeout and DEDUP_LEASE_SECONDS at least as long)"]


def scheduler_attempt_deadline_margin(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Advisory half of ``scheduler-attempt-deadline``: the attempt deadline is not close to the service's request timeout.

    When ``template.timeout - attemptDeadline`` is below config ``minMarginSeconds`` (default 15 s, the margin
    the component leaves by default), Scheduler's cut-off and Cloud Run's race: an attempt that runs to the
    limit is reported as a timeout by either side. A deadline above the timeout is
    ``dedup-lease-covers-deadline``'s (mandatory) concern and not repeated here; unreadable values are the
    mandatory rules' findings.
    """
    margin = _seconds_cfg(config, "minMarginSeconds")
    findings: list[tuple[Resource | None, str]] = []
    for pairing in Topology.of(resources).pairings:
        deadline, timeout = _deadline_and_timeout(pairing)
        if deadline.value is None or timeout.value is None or timeout.value < deadline.value:
            continue
        if timeout.value - deadline.value < margin:
            findings.append((pairing.job, f"attemptDeadline {deadline.shown} is within {_fmt(margin)} of service "
                                          f"{pairing.service.name}'s request timeout {timeout.shown}: raise template.timeout "
                                          f"to at least {_fmt(deadline.value + margin)} (and DEDUP_LEASE_SECONDS with it) or "
                                          f"lower attemptDeadline to "
                                          f"{_fmt(max(timeout.value - margin, limits.SCHEDULER_HTTP_DEADLINE_MIN_S))}"
                                          + pairing.note))
    return findings


def _deadline_and_timeout(pairing: Pairing) -> tuple[Seconds, Seconds]:
    return (read_seconds(pairing.job.props, "attemptDeadline", limits.SCHEDULER_HTTP_DEADLINE_DEFAULT_S, "Scheduler's"),
            _timeout(pairing.service))


def _timeout(service: Resource) -> Seconds:
    """The service's request timeout (``template.timeout`` and its equivalents, see :func:`service_timeout`)."""
    path, default = service_timeout_field(service)
    raw = get(service.props, path)
    reading = read_seconds({"t": service_timeout(service)}, "t", default, "Cloud Run's")
    if reading.unknown or reading.problem:
        return Seconds(None, path, reading.problem and f"{path} {reading.problem[2:]}", reading.unknown)
    shown = f"{_fmt(default)} (the platform's default)" if raw is None else reading.shown
    return Seconds(reading.value, shown)


# ---------------------------------------------------------------- scheduler-retry-config

_RETRY_DURATIONS = ("minBackoffDuration", "maxBackoffDuration", "maxRetryDuration")


def scheduler_retry_config(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """``retryConfig``: retry count within 0 to 5, durations parse and are non-negative, min backoff <= max backoff, max doublings >= 0.

    Source: Cloud Scheduler REST reference, ``RetryConfig``: retryCount "Values greater than 5 and negative
    values are not allowed"; defaults minBackoff 5 s, maxBackoff 1 h, maxDoublings 5. Config
    ``maxRetryCount`` lowers the allowed count.
    """
    if resource.type != SCHEDULER_JOB:
        return []
    retry = get(resource.props, "retryConfig")
    if retry is None or is_unknown(retry):
        return []
    messages: list[str] = []
    configured = number(config.get("maxRetryCount"))
    max_count = min(limits.SCHEDULER_RETRY_COUNT_MAX, int(configured)) if isinstance(configured, float) else limits.SCHEDULER_RETRY_COUNT_MAX
    count = number(get(retry, "retryCount"))
    if isinstance(count, float) and not (0 <= count <= max_count and count == int(count)):
        messages.append(f"retryConfig.retryCount {count:g} is outside 0 to {max_count}: set retryCount to an integer in "
                        "that range (Scheduler refuses more than 5; use maxRetryDuration for longer retry windows)")
    seconds: dict[str, Any] = {}
    for key in _RETRY_DURATIONS:
        try:
            seconds[key] = duration_seconds(get(retry, key))
        except InvalidDuration as error:
            messages.append(f"retryConfig.{key} {error}")
            continue
        if isinstance(seconds[key], float) and seconds[key] < 0:
            messages.append(f"retryConfig.{key} {_fmt(seconds[key])} is negative: use 0s or more")
    low = read_seconds(retry, "minBackoffDuration", limits.SCHEDULER_MIN_BACKOFF_DEFAULT_S, "Scheduler's")
    high = read_seconds(retry, "maxBackoffDuration", limits.SCHEDULER_MAX_BACKOFF_DEFAULT_S, "Scheduler's")
    if low.value is not None and high.value is not None and low.value > high.value:
        messages.append(f"retryConfig.minBackoffDuration {low.shown} is above maxBackoffDuration {high.shown}: make "
                        "minBackoffDuration <= maxBackoffDuration")
    doublings = number(get(retry, "maxDoublings"))
    if isinstance(doublings, float) and (doublings < 0 or doublings != int(doublings)):
        messages.append(f"retryConfig.maxDoublings {doublings:g} is not a non-negative integer: use e.g. 5 (the default)")
    return messages


# ---------------------------------------------------------------- scheduler-target-not-google-api

def scheduler_target_not_google_api(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A job whose HTTP target is a ``*.googleapis.com`` endpoint calls Google directly, so it is not deduplicated.

    Scheduler delivers each run at least once; a direct API call may run twice. Route it through the dedup
    handler's proxy target (the Cloud Run service), which makes the call once per run. Hosts listed in
    config ``allowedHosts`` are exempt.
    """
    if resource.type != SCHEDULER_JOB:
        return []
    uri = get(resource.props, "httpTarget.uri")
    if not _is_google_api(uri):
        return []
    if host(uri) in {str(h).lower() for h in config.get("allowedHosts") or []}:
        return []
    return [f"httpTarget.uri {uri!r} calls a Google API directly, which Scheduler may deliver more than once: point "
            "the job at the dedup handler's Cloud Run service and let its proxy target make the call once per run "
            "(or list the host in this rule's allowedHosts if duplicates are harmless)"]


# ---------------------------------------------------------------- cloud-run-no-public-invoker

_RUN_IAM_TYPES = frozenset({
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
    "gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding",
    "gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy",
    "gcp:cloudrun/iamMember:IamMember",
    "gcp:cloudrun/iamBinding:IamBinding",
    "gcp:cloudrun/iamPolicy:IamPolicy",
    "gcp:cloudfunctionsv2/functionIamMember:FunctionIamMember",
    "gcp:cloudfunctionsv2/functionIamBinding:FunctionIamBinding",
    "gcp:cloudfunctionsv2/functionIamPolicy:FunctionIamPolicy",
})


#: Roles that let a member call a Cloud Run service or a gen2 function
#: (https://cloud.google.com/run/docs/reference/iam/roles).
_INVOKER_ROLES = frozenset({"roles/run.invoker", "roles/cloudfunctions.invoker", "roles/run.servicesInvoker"})


def _is_container_level_iam(resource_type: str) -> bool:
    """Project, folder or organization IAM member/binding/policy resources."""
    module = resource_type.split(":")[1].split("/")[0] if resource_type.count(":") == 2 else ""
    kind = resource_type.rsplit(":", 1)[-1].lower()
    return module in ("projects", "folder", "organizations") and kind.startswith("iam")


def _members(props: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """(role, member) pairs of an IAM member, binding or policy resource; unknown entries skipped."""
    pairs: list[tuple[str | None, str]] = []
    role = get(props, "role")
    role_s = role if isinstance(role, str) and not is_unknown(role) else None
    member = get(props, "member")
    if isinstance(member, str) and not is_unknown(member):
        pairs.append((role_s, member))
    members = get(props, "members")
    if isinstance(members, list):
        pairs.extend((role_s, m) for m in members if isinstance(m, str) and not is_unknown(m))
    bindings = policy_bindings(get(props, "policyData"))
    for binding in bindings if isinstance(bindings, list) else []:
        b_role = binding.get("role") if isinstance(binding.get("role"), str) else None
        pairs.extend((b_role, m) for m in binding.get("members") or [] if isinstance(m, str))
    return pairs


def cloud_run_no_public_invoker(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """No ``allUsers``/``allAuthenticatedUsers`` on a Cloud Run service (v1, v2, functions gen2) or its IAM resources, and no disabled invoker check.

    The dedup handler must only be called by the Scheduler identity (roles/run.invoker on this service):
    a public invoker lets anyone trigger runs. ``invokerIamDisabled: true`` (v2) and the v1 annotation
    ``run.googleapis.com/invoker-iam-disabled`` switch the invoker check off entirely
    (https://cloud.google.com/run/docs/securing/managing-access#invoker_check).
    """
    messages: list[str] = []
    if resource.type in _RUN_IAM_TYPES:
        for role, member in _members(resource.props):
            if member in limits.PUBLIC_MEMBERS:
                messages.append(f"{member} is granted {role or 'a role'} on a Cloud Run service: remove it and grant "
                                "roles/run.invoker to the Scheduler job's service account only "
                                "(serviceAccount:<email>)")
    elif _is_container_level_iam(resource.type):
        # A project/folder/organization grant of an invoker role reaches every service below it.
        for role, member in _members(resource.props):
            if member in limits.PUBLIC_MEMBERS and role in _INVOKER_ROLES:
                scope = {"projects": "project", "folder": "folder"}.get(resource.type.split(":")[1].split("/")[0],
                                                                           "organization")
                messages.append(f"{member} is granted {role} on the whole {scope}, which makes every Cloud Run "
                                "service in it public: remove it and grant "
                                "roles/run.invoker on the dedup service to the Scheduler job's service account only")
    elif resource.type == "gcp:cloudrunv2/service:Service":
        if get(resource.props, "invokerIamDisabled") is True:
            messages.append("invokerIamDisabled is true, so anyone can invoke the service: remove it (or set false) and "
                            "grant roles/run.invoker to the Scheduler job's service account")
    elif resource.type == "gcp:cloudrun/service:Service":
        flag = get(resource.props, "metadata.annotations")
        value = flag.get("run.googleapis.com/invoker-iam-disabled") if isinstance(flag, Mapping) else None
        if isinstance(value, str) and value.lower() == "true":
            messages.append("annotation run.googleapis.com/invoker-iam-disabled=true lets anyone invoke the service: "
                            "remove it and grant roles/run.invoker to the Scheduler job's service account")
    return messages


# ---------------------------------------------------------------- no-primitive-roles

def no_primitive_roles(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """No basic role (``roles/owner``, ``roles/editor``, ``roles/viewer``) is granted by any IAM member, binding or policy resource.

    Basic roles carry thousands of permissions across the project
    (https://cloud.google.com/iam/docs/roles-overview#basic); the component needs only roles/run.invoker
    and roles/datastore.user. Config ``forbiddenRoles`` replaces the list.
    """
    token = resource.type.split(":")[-1].lower()
    if "iam" not in token:
        return []
    forbidden = [r for r in config.get("forbiddenRoles") or limits.PRIMITIVE_ROLES if isinstance(r, str)]
    messages = []
    seen: set[tuple[str, str]] = set()
    for role, member in _members(resource.props):
        if role in forbidden and (role, member) not in seen:
            seen.add((role, member))
            messages.append(f"{member} is granted the basic role {role}: grant a predefined role with only what it "
                            "needs instead (roles/run.invoker to call the service, roles/datastore.user for Firestore)")
    role = get(resource.props, "role")
    if role in forbidden and not any(r == role for r, _ in seen):
        messages.append(f"this resource grants the basic role {role}: grant a narrower predefined role instead")
    return messages


# ---------------------------------------------------------------- dedup-firestore-ttl

def _database_id(value: Any) -> Any:
    if isinstance(value, str) and not is_unknown(value) and "databases/" in value:
        return value.rsplit("databases/", 1)[1].split("/")[0]
    return value


def dedup_firestore_ttl(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Every dedup collection has a Firestore TTL policy on its expiry field.

    The collection and database come from each dedup service's env ``DEDUP_COLLECTION`` (default
    ``scheduler_runs``) and ``DEDUP_DATABASE`` (default ``(default)``); the expiry field is config
    ``expiryField`` (default ``expire_at``, the field the handler writes). Required: a
    ``gcp:firestore/field:Field`` with that ``collection``, ``field`` and ``database`` and ``ttlConfig`` set
    (https://cloud.google.com/firestore/docs/ttl). Without it, run records are never deleted. Unknown
    values in a Field count as a match. A service that has no such Field in this stack but declares where its
    TTL policy lives (env ``DEDUP_TTL_OWNER``, set by the component given a shared store) is
    ``dedup-ttl-owner-declared``'s concern instead.
    """
    expiry = str(config.get("expiryField") or limits.EXPIRY_FIELD)
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        collection, database, candidates = _ttl_fields_of(service, topology, expiry)
        if any(get(f.props, "ttlConfig") is not None for f in candidates):
            continue
        owner = env_value(service_env(service), limits.ENV_TTL_OWNER, None)
        if not candidates and isinstance(owner, str) and not is_unknown(owner) and owner.strip():
            continue  # declared, known and non-empty: the TTL policy lives in another stack
        where = f"collection {collection!r}" if not is_unknown(collection) else "its collection"
        db = f"database {database!r}" if not is_unknown(database) else "its database"
        if candidates:
            findings.append((candidates[0], f"Field {expiry} of {where} in {db} has no ttlConfig: set ttlConfig={{}} so "
                                             f"Firestore deletes run records after {expiry} (service {service.name})"))
        else:
            findings.append((service, f"service {service.name} keeps run records in {where} of {db}, but no "
                                      f"gcp:firestore/field:Field gives {expiry} a TTL policy: add a Field with "
                                      f"collection={collection if not is_unknown(collection) else '<DEDUP_COLLECTION>'!r}, "
                                      f"field={expiry!r}, database={database if not is_unknown(database) else '<DEDUP_DATABASE>'!r}, "
                                      "ttlConfig={} (and indexConfig={} to skip its single-field indexes); or, "
                                      f"if a shared store in another stack owns it, say so with env "
                                      f"{limits.ENV_TTL_OWNER} (the component sets it when given store=)"))
    return findings


def _ttl_fields_of(service: Resource, topology: Topology, expiry: str) -> tuple[Any, Any, list[Resource]]:
    """``(collection, database id, Fields of this stack that may be its expiry field)`` of a dedup service."""
    env = service_env(service)
    collection = env_value(env, limits.ENV_COLLECTION, limits.DEFAULT_COLLECTION)
    database = _database_id(env_value(env, limits.ENV_DATABASE, limits.DEFAULT_DATABASE))
    project = env_value(env, "GOOGLE_CLOUD_PROJECT", None)
    candidates = [f for f in topology.fields if _matches(f, collection, expiry, database) and _same_project(f, project)]
    return collection, database, candidates


# ---------------------------------------------------------------- firestore-ttl-single-owner

def firestore_ttl_single_owner(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """At most one ``gcp:firestore/field:Field`` with ``ttlConfig`` per project, database, collection group and field.

    A TTL policy is one setting of one collection group's field (https://cloud.google.com/firestore/docs/ttl).
    Two Field resources for it are two owners of one setting: ``pulumi destroy`` (or a replacement) of either
    removes the policy, and the field's index exemption, for both, and nothing reports it: run records then
    live forever. Projects compare as written (a Field without ``project`` only with others without one, since
    the provider's project is not in the stack's resources); unknown values are not compared.
    """
    owners: dict[tuple[Any, ...], Resource] = {}
    findings: list[tuple[Resource | None, str]] = []
    for resource in resources:
        if resource.type != FIRESTORE_FIELD or get(resource.props, "ttlConfig") is None:
            continue
        key = (get(resource.props, "project"), _database_id(get(resource.props, "database")) or limits.DEFAULT_DATABASE,
               get(resource.props, "collection"), get(resource.props, "field"))
        if any(is_unknown(part) for part in key):
            continue
        first = owners.setdefault(key, resource)
        if first is not resource:
            _, database, collection, field_name = key
            findings.append((resource, f"Field {resource.name} and Field {first.name} both manage the TTL policy of "
                                       f"{field_name!r} in collection group {collection!r} of database {database!r}: "
                                       "destroying either removes it for both. Keep one owner: a DedupStore (one per "
                                       "database) and store= on every job that uses it"))
    return findings


# ---------------------------------------------------------------- dedup-ttl-owner-declared

def dedup_ttl_owner_declared(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A dedup service whose TTL policy is not in this stack says where it lives, and it is not also here.

    The pack sees one stack; a shared store's TTL policy is in another. A service without a TTL Field in the stack
    declares the owner in env ``DEDUP_TTL_OWNER`` (the component sets ``DedupStore <name>`` or the store stack's
    name); without it, ``dedup-firestore-ttl`` fails. This rule checks the declaration: it is not empty; when config
    ``knownOwners`` lists the store stacks of the organisation, it is one of them; and the stack does not own the
    same TTL policy as well (two owners: destroying this stack would remove the store's policy).
    """
    expiry = str(config.get("expiryField") or limits.EXPIRY_FIELD)
    known = [o for o in config.get("knownOwners") or [] if isinstance(o, str)]
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        owner = env_value(service_env(service), limits.ENV_TTL_OWNER, None)
        if owner is None or is_unknown(owner):
            continue
        collection, database, candidates = _ttl_fields_of(service, topology, expiry)
        here = [f for f in candidates if get(f.props, "ttlConfig") is not None]
        if not str(owner).strip():
            findings.append((service, f"service {service.name}: env {limits.ENV_TTL_OWNER} is empty: name where the TTL "
                                      f"policy of its run records lives, e.g. 'stack acme/scheduler-dedup/store'"))
        elif known and owner not in known:
            findings.append((service, f"service {service.name} says its TTL policy lives in {owner!r}, which is not one "
                                      f"of the known owners ({', '.join(known)}): point the job at one of those stores, "
                                      "or add it to this rule's knownOwners"))
        if here:
            findings.append((here[0], f"service {service.name} says its TTL policy lives in {owner!r}, but this stack "
                                      f"also manages it (Field {here[0].name}): two owners of one TTL policy. Remove the "
                                      f"Field from this stack, or {limits.ENV_TTL_OWNER} from the service"))
    return findings


def _same_project(field_resource: Resource, project: Any) -> bool:
    """False only when both the Field's ``project`` and the handler's ``GOOGLE_CLOUD_PROJECT`` are known and differ
    (a Field without ``project`` uses the provider's project, which the handler's usually is)."""
    f_project = get(field_resource.props, "project")
    if not isinstance(f_project, str) or is_unknown(f_project) or not isinstance(project, str) or is_unknown(project):
        return True
    return f_project == project


def _matches(field_resource: Resource, collection: Any, expiry: str, database: Any) -> bool:
    f_collection = get(field_resource.props, "collection")
    f_field = get(field_resource.props, "field")
    f_database = _database_id(get(field_resource.props, "database"))
    if f_database is None:
        f_database = limits.DEFAULT_DATABASE
    return (_same(f_collection, collection) and _same(f_field, expiry) and _same(f_database, database))


def _same(a: Any, b: Any) -> bool:
    return is_unknown(a) or is_unknown(b) or a == b


# ---------------------------------------------------------------- dedup-lease-covers-deadline

def _env_seconds(service: Resource, name: str, default: float) -> tuple[Any, str | None]:
    raw = env_value(service_env(service), name, None)
    if raw is None:
        return default, None
    if is_unknown(raw):
        return raw, None
    value = number(raw)
    if not isinstance(value, float) or value != value or value in (float("inf"), float("-inf")):
        return None, (f"service {service.name}: env {name}={raw!r} is not a number of seconds: set it to e.g. "
                      f"{default:g}")
    return value, None


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
                                      "template.timeout"))
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
                                              f"template.timeout to at least \"{_fmt(deadline)}\" (and {limits.ENV_LEASE} "
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


# ---------------------------------------------------------------- dedup-retention-covers-retries

def job_retry_window_seconds(job_props: Mapping[str, Any]) -> float | None:
    """The longest time, in seconds, from a run's first attempt until Scheduler stops retrying it; None if a value
    is unknown or unreadable (see :func:`~scheduler_dedup.policies.readings.read_retry`).

    The arithmetic is :func:`scheduler_dedup.infra.schedule.retry_window_seconds`, the one the component uses.
    """
    reading = read_retry(job_props)
    return None if reading.problems else reading.window_at_least()


def dedup_retention_covers_retries(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """``DEDUP_RETENTION_SECONDS`` (default 604800 = 7 days) outlasts the retry window of each job calling the service.

    A run record deleted by the TTL policy before Scheduler's last retry lets that retry run the job a
    second time. The window is :func:`~scheduler_dedup.infra.schedule.retry_window_seconds` of the job's
    retry settings (:func:`~scheduler_dedup.policies.readings.read_retry`); a setting that cannot be read is
    a finding of its own, and the window is still checked with it counted at its lowest (0 s), so what can
    be read is checked. Config ``marginSeconds`` (default 0) adds slack.
    """
    margin = _seconds_cfg(config, "marginSeconds")
    topology = Topology.of(resources)
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        retention, error = _env_seconds(service, limits.ENV_RETENTION, limits.DEFAULT_RETENTION_S)
        if error:
            findings.append((service, error))
        for pairing in topology.jobs_of(service):
            reading = read_retry(pairing.job.props)
            findings += [(pairing.job, f"job {pairing.job.name}: {problem}; the retry window cannot be known, so "
                                       "record retention cannot be checked against it" + pairing.note)
                         for problem in reading.problems]
            window = reading.window_at_least()
            if window is None or not isinstance(retention, float) or retention >= window + margin:
                continue
            span = f"at least {_fmt(window)} (counting unreadable settings as 0s)" if reading.problems else _fmt(window)
            shown = _env_shown(service, limits.ENV_RETENTION, retention)
            findings.append((pairing.job, f"env {limits.ENV_RETENTION}={shown} of service {service.name} is "
                                          f"shorter than job {pairing.job.name}'s retry window {span}"
                                          + (f" plus {_fmt(margin)}" if margin else "") + ": a late retry would find "
                                          f"no record and run again. Set {limits.ENV_RETENTION} to at least "
                                          f"{window + margin:g} (604800 = 7 days is usual) or shorten retryConfig"
                                          + pairing.note))
    return findings


def _env_shown(service: Resource, name: str, value: float) -> str:
    """``value`` of env ``name`` as a message quotes it: as written, or marked as the handler's default."""
    written = env_value(service_env(service), name, None) is not None
    return f"{value:g}" if written else f"{value:g} (the handler's default)"


# ---------------------------------------------------------------- dedup-retries-outlast-lease

def dedup_retries_outlast_lease(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A crashed attempt's run is retried after its lease expires: the job's retries span ``DEDUP_LEASE_SECONDS``.

    An attempt that dies holding the claim (instance killed, Firestore down at completion) blocks the run
    with 409 until its lease expires, up to ``DEDUP_LEASE_SECONDS`` (default 300) after the crash. Only a
    retry that comes later takes the run over: the waits before retries 1..``retryCount`` must add up to
    at least the lease (:func:`~scheduler_dedup.infra.schedule.crash_recovery_seconds`, the condition the
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
            if policy is None or recovers_crash(policy, lease):
                continue
            written = get(pairing.job.props, "retryConfig.retryCount") is not None
            count = f"retryCount {policy.retry_count}" + ("" if written else " (Scheduler's default)")
            waits = ", ".join(f"{policy.backoff_seconds(i):g}" for i in range(policy.retry_count))
            span = f"retries {waits} s apart ({_fmt(crash_recovery_seconds(policy))} in all)" if waits else "no retry"
            hint = min_backoff_to_recover(RetryPolicy(max(policy.retry_count, 1), policy.max_retry_duration_seconds,
                                                      policy.min_backoff_seconds, policy.max_backoff_seconds,
                                                      policy.max_doublings), lease)
            fix = (f"Set retryConfig.minBackoffDuration to at least \"{hint}s\""
                   + (" and retryCount to at least 1" if policy.retry_count == 0 else "")
                   if hint is not None else "Raise retryCount and maxBackoffDuration")
            findings.append((pairing.job, f"job {pairing.job.name} has {count}: {span}, but a crashed attempt holds the "
                                          f"run for up to {limits.ENV_LEASE}={lease_shown} of service {service.name}; "
                                          "every retry would get 409 and the run would never complete. "
                                          f"{fix}, or lower {limits.ENV_LEASE}" + pairing.note))
    return findings


# ---------------------------------------------------------------- dedup-job-alerting

ALERT_POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"


def _calls_run_check(job_resource: Resource) -> bool | None:
    """True when the job calls the handler's run check (a watchdog), None when its URI is not known yet."""
    uri = get(job_resource.props, "httpTarget.uri")
    if is_unknown(uri):
        return None
    return isinstance(uri, str) and urlsplit(uri.strip()).path.rstrip("/") == CHECK_PATH


def _alerts_on_missed_runs(policy: Resource, service_name: Any) -> bool:
    """True when a condition of ``policy`` matches the handler's ``missed_run`` lines of ``service_name``
    (or cannot be told yet)."""
    conditions = get(policy.props, "conditions")
    if is_unknown(conditions):
        return True
    missed = missed_run_clause()
    for condition in conditions if isinstance(conditions, list) else []:
        text = get(condition, "conditionMatchedLog.filter")
        if is_unknown(text):
            return True
        if not isinstance(text, str) or missed not in text:
            continue
        if not isinstance(service_name, str) or is_unknown(service_name) or f'service_name="{service_name}"' in text:
            return True
    return False


def dedup_job_alerting(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A job calling the dedup handler has a missed-run watchdog and an alert on it.

    A paused or deleted job, a crash-looping handler or a missing invoker grant leaves no record and
    no log line, so only an outside check notices. The stack needs (1) a Scheduler job that calls
    the handler's run check (``POST <service>/dedup/run-check``) and (2) an alert policy with a log-match
    condition on the handler's ``jsonPayload.event="missed_run"`` lines of that service. The component
    creates both (and more) with ``alerts={"notification_channels": [...]}``. Unknown URIs and filters
    (preview) pass.
    """
    topology = Topology.of(resources)
    policies = [r for r in resources if r.type == ALERT_POLICY]
    findings: list[tuple[Resource | None, str]] = []
    for service in topology.dedup_services():
        pairings = topology.jobs_of(service)
        kinds = [_calls_run_check(p.job) for p in pairings]
        if not pairings or None in kinds:
            continue
        jobs = [p for p, is_check in zip(pairings, kinds) if not is_check]
        watchdog = any(kinds)
        alerted = any(_alerts_on_missed_runs(policy, get(service.props, "name")) for policy in policies)
        if not jobs or (watchdog and alerted):
            continue
        missing = [what for what, present in (
            (f"no Scheduler job calls {CHECK_PATH} on service {service.name} (the watchdog)", watchdog),
            (f"no alert policy matches its {missed_run_clause()} log lines", alerted)) if not present]
        for pairing in jobs:
            findings.append((pairing.job, f"job {pairing.job.name} runs through the dedup handler without alerting: "
                                          f"{'; '.join(missing)}. A paused job or a broken handler would go unnoticed. "
                                          "Pass alerts={'notification_channels': ['projects/P/notificationChannels/N']} "
                                          "to DedupScheduledJob (stack config scheduler-dedup:alertNotificationChannels)"
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


def dedup_cpu_always_allocated(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A Cloud Run (v2) service running the dedup handler has CPU always allocated (``cpuIdle: false``).

    The handler renews the lease from a background thread while the job runs, also after Scheduler hung up at
    its attempt deadline. With request-based billing Cloud Run throttles CPU outside request processing
    (https://cloud.google.com/run/docs/configuring/billing-settings,
    https://cloud.google.com/run/docs/tips/general#avoid_background_activities): the renewals can stall, the
    lease expire under a live job, and a retry run the job a second time. Advisory: request-based billing is
    cheaper for sparse jobs, and safe while every job finishes well within its attempt deadline. Cloud Run v1
    services and Cloud Functions are not checked. Unknown values (preview) pass.
    """
    findings: list[tuple[Resource | None, str]] = []
    for service in Topology.of(resources).dedup_services():
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

def dedup_handler_settings(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """The environment of a service running the dedup handler passes the handler's own start-up checks.

    The handler refuses to start (every request then fails) on a ``DEDUP_*`` / ``GOOGLE_CLOUD_PROJECT``
    environment it cannot work with: a missing project, a lease or retention out of range, a malformed
    ``DEDUP_JOB`` or ``DEDUP_TARGET``, ``DEDUP_ALLOWED_CALLERS`` without ``DEDUP_OIDC_AUDIENCE`` or the reverse.
    The checks are the handler's (:func:`scheduler_dedup.handler.startup.startup_problems`, which the
    ``DedupScheduledJob`` component runs too), on the variables the service sets: Cloud Run sets none of them.
    Services with a ``DEDUP_*`` variable are checked; unknown values (preview, Secret Manager) pass.
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
        for problem in startup_problems(plain, unknown):
            findings.append((service, f"the dedup handler on service {service.name} would refuse to start: {problem}"))
    return findings


# ---------------------------------------------------------------- the list

RULES: list[Rule] = [
    Rule("scheduler-job-unix-cron",
         "A Cloud Scheduler job's schedule is a 5-field unix-cron expression (not groc) and its timeZone an IANA name.",
         "mandatory", scheduler_job_unix_cron, "resource"),
    Rule("scheduler-job-oidc-auth",
         "An HTTP target that is not a *.googleapis.com API carries an OIDC token with a service account email, and "
         "its audience (or the URI it defaults to) passes Google's gate in front of the target and the handler's exact "
         "DEDUP_OIDC_AUDIENCE / DEDUP_ALLOWED_CALLERS check.",
         "mandatory", scheduler_job_oidc_auth, "stack",
         {"allowedAudiences": {"type": "array", "items": {"type": "string"}, "default": [],
                               "description": "extra audiences to accept (e.g. for a non-Cloud-Run receiver)"}}),
    Rule("dedup-target-audience",
         "The ID-token audience the handler sends to its HTTP proxy target (DEDUP_TARGET_AUDIENCE or its default) is "
         "one the target's host accepts (the full function URL on *.cloudfunctions.net).",
         "mandatory", dedup_target_audience, "stack"),
    Rule("scheduler-attempt-deadline",
         "A job with an HTTP target has an attemptDeadline within 15 s to 30 min (Cloud Scheduler's limits).",
         "mandatory", scheduler_attempt_deadline, "resource",
         {"minSeconds": {"type": "number", "default": limits.SCHEDULER_HTTP_DEADLINE_MIN_S, "minimum": 0,
                         "maximum": limits.SCHEDULER_HTTP_DEADLINE_MAX_S,
                         "description": "lowest accepted attempt deadline in seconds (not below 15)"},
          "maxSeconds": {"type": "number", "default": limits.SCHEDULER_HTTP_DEADLINE_MAX_S,
                         "minimum": limits.SCHEDULER_HTTP_DEADLINE_MIN_S,
                         "description": "highest accepted attempt deadline in seconds (not above 1800)"}},
         ordered_settings=(("minSeconds", "maxSeconds"),)),
    Rule("scheduler-attempt-deadline-margin",
         "Advisory part of scheduler-attempt-deadline: the attempt deadline is not within a margin of the Cloud Run "
         "request timeout of the service the job calls.",
         "advisory", scheduler_attempt_deadline_margin, "stack",
         {"minMarginSeconds": {"type": "number", "default": REQUEST_TIMEOUT_MARGIN_SECONDS, "minimum": 0,
                               "description": "least seconds between attempt deadline and request timeout"}}),
    Rule("scheduler-retry-config",
         "A job's retryConfig has retryCount within 0 to 5 and consistent backoff values.",
         "advisory", scheduler_retry_config, "resource",
         {"maxRetryCount": {"type": "integer", "default": limits.SCHEDULER_RETRY_COUNT_MAX, "minimum": 0,
                            "description": "highest accepted retryCount (not above 5)"}}),
    Rule("scheduler-target-not-google-api",
         "A job that calls a *.googleapis.com endpoint directly is not deduplicated; route it through the handler's proxy.",
         "advisory", scheduler_target_not_google_api, "resource",
         {"allowedHosts": {"type": "array", "items": {"type": "string"}, "default": [],
                           "description": "googleapis.com hosts a job may call directly"}}),
    Rule("cloud-run-no-public-invoker",
         "No allUsers or allAuthenticatedUsers on a Cloud Run service or its IAM resources, and no disabled invoker check.",
         "mandatory", cloud_run_no_public_invoker, "resource"),
    Rule("no-primitive-roles",
         "No roles/owner, roles/editor or roles/viewer granted to any member by the stack.",
         "mandatory", no_primitive_roles, "resource",
         {"forbiddenRoles": {"type": "array", "items": {"type": "string"}, "default": list(limits.PRIMITIVE_ROLES),
                             "description": "roles no IAM resource of the stack may grant"}}),
    Rule("dedup-firestore-ttl",
         "Every dedup collection (DEDUP_COLLECTION/DEDUP_DATABASE of a dedup Cloud Run service) has a Firestore TTL "
         "policy on its expiry field.",
         "mandatory", dedup_firestore_ttl, "stack",
         {"expiryField": {"type": "string", "default": limits.EXPIRY_FIELD,
                          "description": "the run records' expiry timestamp field"}}),
    Rule("firestore-ttl-single-owner",
         "At most one Firestore TTL Field per project, database, collection group and field in a stack: two owners of "
         "one TTL policy remove it for each other on destroy.",
         "mandatory", firestore_ttl_single_owner, "stack"),
    Rule("dedup-ttl-owner-declared",
         "A dedup service whose TTL policy lives in another stack (env DEDUP_TTL_OWNER) names a known owner and is not "
         "also given a TTL Field in this stack.",
         "advisory", dedup_ttl_owner_declared, "stack",
         {"expiryField": {"type": "string", "default": limits.EXPIRY_FIELD,
                          "description": "the run records' expiry timestamp field"},
          "knownOwners": {"type": "array", "items": {"type": "string"}, "default": [],
                          "description": "accepted DEDUP_TTL_OWNER values, e.g. the store stacks' names (empty: any)"}}),
    Rule("dedup-handler-settings",
         "A service running the dedup handler sets a DEDUP_* / GOOGLE_CLOUD_PROJECT environment that passes the "
         "handler's own start-up checks (the ones the DedupScheduledJob component runs), so it does not refuse to start.",
         "mandatory", dedup_handler_settings, "stack"),
    Rule("dedup-lease-covers-deadline",
         "The handler's lease (DEDUP_LEASE_SECONDS) is at least the service request timeout, which is at least the "
         "job's attempt deadline.",
         "mandatory", dedup_lease_covers_deadline, "stack",
         {"leaseMarginSeconds": {"type": "number", "default": 0, "minimum": 0,
                                 "description": "extra seconds the lease must exceed the request timeout by"}}),
    Rule("dedup-retries-outlast-lease",
         "A crashed attempt's run is retried after its lease expires: the waits before the job's retries add up to at "
         "least DEDUP_LEASE_SECONDS.",
         "mandatory", dedup_retries_outlast_lease, "stack"),
    Rule("dedup-retention-covers-retries",
         "Run record retention (DEDUP_RETENTION_SECONDS) outlasts the job's retry window.",
         "mandatory", dedup_retention_covers_retries, "stack",
         {"marginSeconds": {"type": "number", "default": 0, "minimum": 0,
                            "description": "extra seconds retention must exceed the retry window by"}}),
    Rule("dedup-job-alerting",
         "A job calling the dedup handler has a watchdog job calling the handler's run check and an alert policy on "
         "its missed_run log lines, so a paused job or a broken handler does not go unnoticed.",
         "advisory", dedup_job_alerting, "stack"),
    Rule("dedup-cpu-always-allocated",
         "A Cloud Run service running the dedup handler has CPU always allocated (cpuIdle: false), so lease renewals "
         "keep running after Scheduler hangs up.",
         "advisory", dedup_cpu_always_allocated, "stack"),
]
"""Every rule of the pack, in report order."""

RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}


# ---------------------------------------------------------------- evaluation without the engine

@dataclass(frozen=True)
class Finding:
    """One violation: which rule, at which level, on which resource (None: the stack), and what to change."""

    rule: str
    level: Level
    resource: Resource | None
    message: str

    @property
    def resource_label(self) -> str:
        """``name (type)`` of the resource, or ``(stack)``."""
        return f"{self.resource.name} ({self.resource.type})" if self.resource else "(stack)"


def enforcement_levels(policy_config: Mapping[str, Any] | None) -> dict[str, Level]:
    """Each rule's level after a Pulumi policy config (``{"all": "advisory", "rule": {"enforcementLevel": ...}}``)."""
    config = policy_config or {}
    levels: dict[str, Level] = {}
    for rule in RULES:
        level: Any = rule.enforcement_level
        for key in ("all", rule.name):
            value = config.get(key)
            candidate = value.get("enforcementLevel") if isinstance(value, Mapping) else value
            if candidate in ("mandatory", "advisory", "disabled", "remediate"):
                level = "mandatory" if candidate == "remediate" else candidate
        levels[rule.name] = level
    return levels


def evaluate(resources: Sequence[Resource], policy_config: Mapping[str, Any] | None = None,
             rules: Iterable[Rule] = RULES) -> list[Finding]:
    """Run ``rules`` over ``resources`` the way the policy engine would and return every violation.

    ``policy_config`` has the format of ``pulumi preview --policy-pack-config`` files: rule name (or
    ``all``) -> enforcement level string, or -> object with ``enforcementLevel`` and config properties.
    """
    levels = enforcement_levels(policy_config)
    findings: list[Finding] = []
    for rule in rules:
        level = levels.get(rule.name, rule.enforcement_level)
        if level == "disabled":
            continue
        given = (policy_config or {}).get(rule.name)
        config = rule.resolve_config(given if isinstance(given, Mapping) else None)
        if rule.scope == "resource":
            for resource in resources:
                for message in rule.check(resource, config):
                    findings.append(Finding(rule.name, level, resource, str(message)))
        else:
            for subject, message in rule.check(resources, config):
                findings.append(Finding(rule.name, level, subject, message))
    return findings
