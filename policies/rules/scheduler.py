"""Rules on the Cloud Scheduler job itself: its schedule and time zone, its OIDC token (audience and caller
account, as the target and the handler judge them), its attempt deadline, its retry config, and targets that call
a Google API directly."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.handler.callers.audience import (
    HOST_KINDS,
    handler_accepts,
    host_kind,
    platform_accepts,
    split_audiences,
    target_audience,
)
from scheduler_dedup.handler.callers.allowed import parse_allowed_callers
from scheduler_dedup.handler.schedule.cron.accepted import unix_cron_problem
from scheduler_dedup.handler.schedule.cron.oversized_steps import oversized_step_forms
from scheduler_dedup.handler.schedule.cron.readings import unsettled_cron_forms
from scheduler_dedup.handler.schedule.time_zones import DEFAULT_TIME_ZONE, is_iana_time_zone
from scheduler_dedup.handler.schedule.overlap import overlap_advisory
from scheduler_dedup.handler.schedule.time_zones import fixed_offset_abbreviation_problem, time_zone_alias_advisory
from scheduler_dedup.infra.project.locations import region_problem
from scheduler_dedup.infra.job.oidc_account import oidc_account_problem
from scheduler_dedup.handler.core.errors import ConfigError

from scheduler_dedup.policies import limits
from scheduler_dedup.handler.schedule.run_key import job_id_problem
from scheduler_dedup.handler.schedule.retry_windows import ATTEMPT_DEADLINES, HTTP_TARGET, REQUEST_TIMEOUT_MARGIN_SECONDS
from scheduler_dedup.policies.reading.readings import read_retry, read_seconds, target_kind
from scheduler_dedup.policies.reading.model import (
    InvalidDuration,
    Resource,
    duration_seconds,
    get,
    host,
    is_unknown,
    number,
)
from scheduler_dedup.policies.rules.base import _deadline_and_timeout, _fmt, _seconds_cfg, rule
from scheduler_dedup.policies.reading.topology import (
    SCHEDULER_JOB,
    Pairing,
    Topology,
    env_value,
    service_env,
    service_urls,
)


# ---------------------------------------------------------------- scheduler-job-unix-cron

@rule(name="scheduler-job-unix-cron", enforcement="mandatory",
      description="A Cloud Scheduler job's schedule is a 5-field unix-cron expression (not groc) and its timeZone an "
                  "IANA name.")
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
    """True when ``uri`` is on a ``*.googleapis.com`` host: Scheduler's own line between Google APIs (an OAuth token)
    and other targets (an OIDC token): "OAuth token ... should generally only be used when calling Google APIs hosted
    on *.googleapis.com" (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#OAuthToken).
    It decides which token a job's target takes, never which endpoint the handler trusts: that is an exact list
    (:mod:`scheduler_dedup.handler.core.google_endpoints`)."""
    h = host(uri) if isinstance(uri, str) else None
    return bool(h) and (h == "googleapis.com" or str(h).endswith(".googleapis.com"))


def _custom_audiences(service: Resource) -> list[str]:
    values = get(service.props, "customAudiences")
    return [v for v in values if isinstance(v, str) and not is_unknown(v)] if isinstance(values, list) else []


@rule(name="scheduler-job-oidc-auth", enforcement="mandatory",
      description="An HTTP target that is not a *.googleapis.com API carries an OIDC token with a service account "
                  "email, and its audience (or the URI it defaults to) passes Google's gate in front of the target "
                  "and the handler's exact DEDUP_OIDC_AUDIENCE / DEDUP_ALLOWED_CALLERS check.",
      config_schema={"allowedAudiences": {"type": "array", "items": {"type": "string"}, "default": [],
                                          "description": "extra audiences to accept (e.g. for a non-Cloud-Run receiver)"}})
def scheduler_job_oidc_auth(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """An HTTP target that is not a ``*.googleapis.com`` API carries an OIDC token whose audience passes every gate.

    Scheduler sends a Google-signed ID token only with ``httpTarget.oidcToken`` (``oauthToken`` is for
    ``*.googleapis.com`` only); its audience is ``oidcToken.audience``, or the target URI when unset
    (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#OidcToken). The audience
    must pass Google's gate in front of the target and, when the handler verifies callers, the handler's own
    exact comparison; both decisions are :mod:`scheduler_dedup.handler.callers.audience`'s (``platform_accepts``,
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
    :func:`~scheduler_dedup.handler.callers.audience.handler_accepts`; callers normalised or refused by
    :func:`~scheduler_dedup.handler.callers.allowed.normalise_caller`). Unknown values pass.
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


# ---------------------------------------------------------------- scheduler-attempt-deadline

@rule(name="scheduler-attempt-deadline", enforcement="mandatory",
      description="A job with an HTTP target has an attemptDeadline within 15 s to 30 min, one with an App Engine "
                  "target within 15 s to 24 h (Cloud Scheduler's limits).",
      config_schema={"minSeconds": {"type": "number", "default": limits.SCHEDULER_HTTP_DEADLINE_MIN_S, "minimum": 0,
                                    "maximum": limits.SCHEDULER_HTTP_DEADLINE_MAX_S,
                                    "description": "lowest accepted attempt deadline in seconds (not below 15)"},
                     "maxSeconds": {"type": "number", "default": limits.SCHEDULER_HTTP_DEADLINE_MAX_S,
                                    "minimum": limits.SCHEDULER_HTTP_DEADLINE_MIN_S,
                                    "description": "highest accepted attempt deadline in seconds (not above 1800)"},
                     "appEngineMaxSeconds": {"type": "number", "default": limits.SCHEDULER_APP_ENGINE_DEADLINE_MAX_S,
                                             "minimum": limits.SCHEDULER_HTTP_DEADLINE_MIN_S,
                                             "maximum": limits.SCHEDULER_APP_ENGINE_DEADLINE_MAX_S,
                                             "description": "highest accepted attempt deadline of an App Engine target in seconds "
                                                            "(not above 86400)"}},
      ordered_settings=(("minSeconds", "maxSeconds"), ("minSeconds", "appEngineMaxSeconds")))
def scheduler_attempt_deadline(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """``attemptDeadline`` of a job with an HTTP target is a duration within 15 s to 30 min (1800 s); of a job with an
    App Engine target within 15 s to 24 h (86400 s), where ``0s`` means the service's default.

    Source: Cloud Scheduler REST reference, ``Job.attemptDeadline`` ("For HTTP targets ... [15 seconds, 30
    minutes]"; "For App Engine HTTP targets, between 15 seconds and 24 hours"), one table with the component's
    (:data:`~scheduler_dedup.handler.schedule.retry_windows.ATTEMPT_DEADLINES`). Config ``minSeconds``/``maxSeconds`` narrow the
    range (``maxSeconds`` for HTTP targets, ``appEngineMaxSeconds`` for App Engine targets). Pub/Sub targets ignore
    the deadline and are not checked.
    """
    kind = target_kind(resource.props) if resource.type == SCHEDULER_JOB else None
    if kind is None:
        return []
    raw = get(resource.props, "attemptDeadline")
    if isinstance(raw, str) and not is_unknown(raw) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", raw):
        # The API takes a protobuf Duration: seconds "terminated by 's'" (Job.attemptDeadline).
        return [f"attemptDeadline {raw!r} has no unit: write it as seconds ending in 's', e.g. \"{raw.strip()}s\""]
    try:
        deadline = duration_seconds(raw)
    except InvalidDuration as error:
        return [f"attemptDeadline {error}"]
    deadlines = ATTEMPT_DEADLINES[kind]
    if not isinstance(deadline, float) or (deadlines.zero_is_default and deadline == 0):
        return []
    low = max(deadlines.min_seconds, _seconds_cfg(config, "minSeconds"))
    configured = _seconds_cfg(config, "maxSeconds" if kind == HTTP_TARGET else "appEngineMaxSeconds")
    high = min(deadlines.max_seconds, configured or deadlines.max_seconds)
    if low <= deadline <= high:
        return []
    what = "an HTTP target" if kind == HTTP_TARGET else "an App Engine target"
    platform = "Cloud Run request timeout" if kind == HTTP_TARGET else "App Engine service's request deadline"
    return [f"attemptDeadline {_fmt(deadline)} is outside {_fmt(low)} to {_fmt(high)} for {what}: set "
            f"attemptDeadline to a value in that range, e.g. \"{_fmt(min(max(deadline, low), high))}\" "
            f"(and the {platform} and DEDUP_LEASE_SECONDS at least as long)"]


@rule(name="scheduler-attempt-deadline-margin", enforcement="advisory",
      description="Advisory part of scheduler-attempt-deadline: the attempt deadline is not within a margin of the "
                  "Cloud Run request timeout of the service the job calls.",
      config_schema={"minMarginSeconds": {"type": "number", "default": REQUEST_TIMEOUT_MARGIN_SECONDS, "minimum": 0,
                                          "description": "least seconds between attempt deadline and request timeout"}})
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


# ---------------------------------------------------------------- scheduler-retry-config

_RETRY_DURATIONS = ("minBackoffDuration", "maxBackoffDuration", "maxRetryDuration")


@rule(name="scheduler-retry-config", enforcement="advisory",
      description="A job's retryConfig has retryCount within 0 to 5 and consistent backoff values.",
      config_schema={"maxRetryCount": {"type": "integer", "default": limits.SCHEDULER_RETRY_COUNT_MAX, "minimum": 0,
                                       "description": "highest accepted retryCount (not above 5)"}})
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

@rule(name="scheduler-target-not-google-api", enforcement="advisory",
      description="A job that calls a *.googleapis.com endpoint directly is not deduplicated; route it through the "
                  "handler's proxy.",
      config_schema={"allowedHosts": {"type": "array", "items": {"type": "string"}, "default": [],
                                      "description": "googleapis.com hosts a job may call directly"}})
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


# ---------------------------------------------------------------- scheduler-runs-overlap

@rule(name="scheduler-runs-overlap", enforcement="advisory",
      description="A job's retry window (and one slow attempt) ends before its next fire time: Scheduler never runs "
                  "two executions of a job at once, so it delays or skips the fire times a run still occupies.")
def scheduler_runs_overlap(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A job whose retry window (or one slow attempt) reaches its next fire time: Scheduler delays or skips it.

    Cloud Scheduler never runs two executions of a job at once (REST ``Job.schedule``; Retry jobs: "the next
    scheduled execution time might be skipped if the retries continue through that time"). The finding and its
    numbers (the schedule's smallest gap between fire times, the attempt deadline, the retry window) are
    :func:`scheduler_dedup.handler.schedule.overlap.overlap_advisory`'s, which the component warns with too. Unknown or
    unreadable values pass (the schedule and retry rules report those).
    """
    if resource.type != SCHEDULER_JOB:
        return []
    schedule, time_zone = get(resource.props, "schedule"), get(resource.props, "timeZone") or DEFAULT_TIME_ZONE
    reading = read_retry(resource.props)
    window = reading.window_at_least()
    if not (isinstance(schedule, str) and isinstance(time_zone, str)) or is_unknown(schedule) or is_unknown(time_zone) \
            or reading.problems or window is None or reading.deadline.value is None:
        return []
    if unix_cron_problem(schedule) or not is_iana_time_zone(time_zone):
        return []
    advisory = overlap_advisory(schedule, time_zone, reading.deadline.value, window)
    return [f"job {resource.name}: {advisory}"] if advisory else []


# ---------------------------------------------------------------- scheduler-schedule-unsettled

@rule(name="scheduler-schedule-unsettled", enforcement="advisory",
      description="A job's schedule uses no form Cloud Scheduler's cron page leaves open (a backwards range, a "
                  "day-of-week a/n, a '*'-step in one day field while the other is restricted).")
def scheduler_schedule_unsettled(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A schedule form Cloud Scheduler's cron page does not settle, with the rewrite that settles it.

    :func:`scheduler_dedup.handler.schedule.cron.readings.unsettled_cron_forms` (the component's advisory too): a backwards range
    (``0 22-2 * * *``, read wrapped), a day-of-week ``a/n`` whose end changes its days, a ``*``-step in one day field
    while the other is restricted (``0 0 */2 * 1``). Run history accepts either reading of such a schedule.
    """
    if resource.type != SCHEDULER_JOB:
        return []
    schedule = get(resource.props, "schedule")
    if not isinstance(schedule, str) or is_unknown(schedule) or unix_cron_problem(schedule):
        return []
    return [f"schedule {message}" for message in unsettled_cron_forms(schedule)]


# ---------------------------------------------------------------- scheduler-schedule-step

@rule(name="scheduler-schedule-step", enforcement="advisory",
      description="A job's schedule has no step at least as large as the range it skips through (*/61 minutes runs "
                  "hourly, */25 hours daily, */45 days monthly): the message says what the schedule really does.")
def scheduler_schedule_step(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A step at least as large as the range it skips through, with what the schedule really does.

    :func:`scheduler_dedup.handler.schedule.cron.oversized_steps.oversized_step_forms` (the component's advisory too):
    ``*/61 * * * *`` and ``0/120 * * * *`` run hourly, ``0 */25 * * *`` daily, ``0 0 */45 * *`` monthly.
    """
    if resource.type != SCHEDULER_JOB:
        return []
    schedule = get(resource.props, "schedule")
    if not isinstance(schedule, str) or is_unknown(schedule) or unix_cron_problem(schedule):
        return []
    return [f"schedule {message}" for message in oversized_step_forms(schedule)]


# ---------------------------------------------------------------- scheduler-time-zone-canonical / -fixed-offset

def _time_zone(resource: Resource) -> str | None:
    time_zone = get(resource.props, "timeZone")
    if resource.type != SCHEDULER_JOB or not isinstance(time_zone, str) or is_unknown(time_zone):
        return None
    return time_zone if is_iana_time_zone(time_zone) else None


@rule(name="scheduler-time-zone-canonical", enforcement="advisory",
      description="A job's timeZone is the canonical tz database name, not an alias of it (UTC -> Etc/UTC, "
                  "US/Eastern -> America/New_York).")
def scheduler_time_zone_canonical(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A job's ``timeZone`` is the canonical tz database name, not an alias of it (``UTC`` -> ``Etc/UTC``).

    :func:`scheduler_dedup.handler.schedule.time_zones.time_zone_alias_advisory`, the component's advisory too; fixed-offset
    abbreviations are ``scheduler-time-zone-fixed-offset``'s.
    """
    time_zone = _time_zone(resource)
    advisory = time_zone_alias_advisory(time_zone) if time_zone else None
    return [f"timeZone {advisory}"] if advisory else []


@rule(name="scheduler-time-zone-fixed-offset", enforcement="mandatory",
      description="A job's timeZone is not a fixed-offset abbreviation such as EST (UTC-5 all year, no daylight "
                  "saving time); name the place's zone (America/New_York) or the offset (Etc/GMT+5).")
def scheduler_time_zone_fixed_offset(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A job's ``timeZone`` is not a fixed-offset abbreviation (``EST``, ``MST``, ``HST``: no daylight saving time).

    :func:`scheduler_dedup.handler.schedule.time_zones.fixed_offset_abbreviation_problem`, which the component refuses too.
    """
    time_zone = _time_zone(resource)
    problem = fixed_offset_abbreviation_problem(time_zone) if time_zone else None
    return [f"timeZone {problem}"] if problem else []


# ---------------------------------------------------------------- scheduler-oidc-account-project

@rule(name="scheduler-oidc-account-project", enforcement="mandatory",
      description="The service account of a job's OIDC token is in the job's project (OidcToken).")
def scheduler_oidc_account_project(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """The service account of a job's OIDC token is in the job's project (``OidcToken``: "The service account must
    be within the same project as the job"; :func:`scheduler_dedup.infra.job.oidc_account.oidc_account_problem`, which
    the component refuses too). A job without ``project`` (the provider's) or with unknown values is not judged."""
    if resource.type != SCHEDULER_JOB:
        return []
    project, email = get(resource.props, "project"), get(resource.props, "httpTarget.oidcToken.serviceAccountEmail")
    if not isinstance(project, str) or not isinstance(email, str) or is_unknown(project) or is_unknown(email):
        return []
    problem = oidc_account_problem(email, project)
    return [f"httpTarget.oidcToken.serviceAccountEmail {problem}"] if problem else []


# ---------------------------------------------------------------- scheduler-job-name

@rule(name="scheduler-job-name", enforcement="mandatory",
      description="A job's name is a Scheduler job id: letters, digits, '-' or '_', at most 500 characters.")
def scheduler_job_name(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A job's ``name`` is a Scheduler job id: letters, digits, '-' or '_', at most 500 characters
    (:func:`scheduler_dedup.handler.schedule.run_key.job_id_problem`; Job.name on the REST reference). Scheduler refuses any
    other at ``pulumi up``. A job without ``name`` (auto-named) or an unknown one passes."""
    name = get(resource.props, "name")
    if resource.type != SCHEDULER_JOB or not isinstance(name, str) or is_unknown(name):
        return []
    problem = job_id_problem(name)
    return [f"name {problem}"] if problem else []


# ---------------------------------------------------------------- scheduler-job-location

@rule(name="scheduler-job-location", enforcement="mandatory",
      description="A job's region is one Cloud Scheduler is offered in.")
def scheduler_job_location(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """A job's ``region`` is one Cloud Scheduler is offered in (:func:`scheduler_dedup.infra.project.locations.region_problem`,
    the component's check of ``region`` too). A job without ``region`` (the provider's) or an unknown one passes."""
    region = get(resource.props, "region")
    if resource.type != SCHEDULER_JOB or not isinstance(region, str) or is_unknown(region):
        return []
    problem = region_problem(region, ("Cloud Scheduler",))
    return [f"region {problem}"] if problem else []
