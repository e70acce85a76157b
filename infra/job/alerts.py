"""The alerts :class:`~scheduler_dedup.infra.job.component.DedupScheduledJob` provisions with ``alerts``: log-based
metrics over the handler's structured lines (filters from :mod:`scheduler_dedup.infra.job.log_query`), the alert
policies on them, and a watchdog Scheduler job that calls the handler's run check hourly.

Why a watchdog: the failure that matters most is silent (the job paused or deleted, the handler down, a grant
missing), and a metric-absence window is capped below a day (:data:`MAX_ABSENCE_SECONDS`), so a daily or weekly job
cannot rely on one. The run check logs one ``missed_run`` line per expected run without a record, and its heartbeat
stops when it cannot run at all. The metrics and policies, one by one: docs/monitoring.md#alerts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumiverse_time

from scheduler_dedup.handler.schedule.cron.gaps import GAP_HORIZON_DAYS, fire_gaps
from scheduler_dedup.handler.core.logs import LogEvent, LogField
from scheduler_dedup.handler.core.paths import CHECK_LOCATION_GUARD, CHECK_PATH

from scheduler_dedup.infra.args import AlertsArgs, input_keys
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.log_query import LogQuery, event, extract, field_is, handler_lines
from scheduler_dedup.handler.schedule.retry_windows import RetryPolicy, retry_window_seconds
from scheduler_dedup.infra.job.settings import DedupSettings

#: Longest metric-absence window we create, seconds (23.5 h): under the documented caps of 24 h
#: (console) and 24.5 h (API), https://cloud.google.com/monitoring/alerts/types-of-conditions#metric-absence
MAX_ABSENCE_SECONDS = 84_600
#: Shortest metric-absence duration the API accepts, seconds (MetricAbsence.duration: "minimum 120 seconds").
MIN_ABSENCE_SECONDS = 120
#: Log-match policies need a notification rate limit (AlertStrategy.notificationRateLimit); 5 min is the least.
LOG_MATCH_RATE_LIMIT_SECONDS = 300
#: How long the policies on log-based metrics wait after the metrics are created: Cloud Monitoring's own bound, "it
#: could take up to 10 minutes to become available" (its 404 on an alert policy over a new metric).
METRICS_READY_SECONDS = 600
#: Incidents of log-match policies close after this long without a new match (30 min is the least).
AUTO_CLOSE_SECONDS = 1800
#: The watchdog's period, seconds; each check covers one period of expected fire times.
WATCHDOG_INTERVAL_SECONDS = 3600
DEFAULT_RELEASED_THRESHOLD = 2
MIN_GRACE_SECONDS = 60
MAX_GRACE_SECONDS = 7 * 86400
DEFAULT_MIN_GRACE_SECONDS = 300
#: The released policy sums releases over the job's retry window, but at least an hour and at most a day (seconds).
MIN_RELEASED_WINDOW_SECONDS = 3600
MAX_RELEASED_WINDOW_SECONDS = 86400

# Values of the handler's ``outcome`` field the alerts select (members of
# scheduler_dedup.handler.protocol.idempotency.Outcome). That module is not imported here: it loads the Firestore
# client, whose protobufs clash with pulumi.provider's in the component provider process. A unit test
# checks these against Outcome, and tests/handler/test_log_filters.py against lines the handler printed.
OUTCOME_FAILED = "failed"
OUTCOME_FENCED = "fenced"
OUTCOME_RELEASED = "released"

_ALLOWED_KEYS = frozenset(input_keys(AlertsArgs))
DEFAULT_FAILURE_THRESHOLD = 1
MAX_FAILURE_THRESHOLD = 1000
MIN_MAX_RUNTIME_SECONDS = 60
#: NotificationChannelStrategy.renotifyInterval: "The value must be between 30 minutes and 24 hours"
#: (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies#notificationchannelstrategy).
MIN_RENOTIFY_SECONDS, MAX_RENOTIFY_SECONDS = 1800, 86400
_CHANNEL_RE = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")


@dataclass(frozen=True)
class AlertSettings:
    """The ``alerts`` input resolved; durations in whole seconds.

    Attributes:
        notification_channels: ``projects/P/notificationChannels/N`` names every policy notifies.
        grace_seconds: how long after its fire time an expected run may still have no record before
            the watchdog reports it missed. Default: the job's retry window (Scheduler may still be
            retrying, and a released attempt leaves no record), at least 300, at most 604800.
        released_threshold: the released policy fires when more than this many deliveries of the job
            were released within :attr:`released_window_seconds`. Default 2.
        released_window_seconds: the job's retry window, but at least 1 h and at most 1 day, whole minutes.
        max_gap_seconds: the largest gap between consecutive fire times over the next 400 days.
        deliveries_absence_seconds: absence window of the deliveries policy (largest gap + grace, whole
            minutes), or None when that exceeds :data:`MAX_ABSENCE_SECONDS` (then only the watchdog watches).
        heartbeat_absence_seconds: absence window of the watchdog heartbeat: two periods plus 5 min,
            so one lost check is tolerated.
        watchdog_schedule: unix-cron schedule of the watchdog (hourly, UTC, at a minute derived from the name).
        watchdog_retry: the watchdog job's retry policy: one retry after 60 s when the handler's
            retention outlasts it (the dedup retention rule checks every job calling the service), else none.
        failure_threshold: consecutive failed runs before the run-failed alert (1: each failure at once).
        max_runtime_seconds: a run still in progress this long after its claim alerts; None: not checked.
        renotify_seconds: reminder interval of open incidents of the metric-based policies; None: no reminders.
    """

    notification_channels: tuple[pulumi.Input[str], ...]
    grace_seconds: int
    released_threshold: int
    released_window_seconds: int
    max_gap_seconds: int
    deliveries_absence_seconds: int | None
    heartbeat_absence_seconds: int
    watchdog_schedule: str
    watchdog_retry: RetryPolicy
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    max_runtime_seconds: int | None = None
    renotify_seconds: int | None = None


def _whole_minutes(seconds: float) -> int:
    return int(math.ceil(seconds / 60.0)) * 60


def _int(raw: Mapping[str, Any], key: str, default: int, low: int, high: int, hint: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise DedupConfigError(f"alerts.{key}", f"must be a whole number, got {value!r}")
    if not low <= int(value) <= high:
        raise DedupConfigError(f"alerts.{key}", f"{value} is out of range: use {low} to {high} ({hint})")
    return int(value)


def resolve_alerts(raw: Any, s: DedupSettings) -> AlertSettings | None:
    """Validate the ``alerts`` input against the resolved component settings ``s``.

    Args:
        raw: the ``alerts`` mapping (:class:`~scheduler_dedup.infra.args.AlertsArgs`) or None (no alerts).
        s: the component's resolved settings (schedule, time zone, retry window, retention).

    Returns:
        The resolved settings, or None when ``raw`` is None.

    Raises:
        DedupConfigError: names ``alerts.<key>`` and the fix; raised before any resource is created.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise DedupConfigError("alerts", f"must be a mapping such as {{'notification_channels': "
                                         f"['projects/P/notificationChannels/N']}}, got {raw!r}")
    unknown = sorted(set(raw) - _ALLOWED_KEYS)
    if unknown:
        raise DedupConfigError(f"alerts.{unknown[0]}", f"unknown key; valid keys are {', '.join(sorted(_ALLOWED_KEYS))}")
    channels = raw.get("notification_channels")
    if isinstance(channels, str) or not isinstance(channels, Sequence) or not channels:
        raise DedupConfigError(
            "alerts.notification_channels",
            "is required: a non-empty list of notification channel names 'projects/P/notificationChannels/N' "
            "(`gcloud beta monitoring channels list` shows them)")
    for channel in channels:
        if isinstance(channel, str) and not _CHANNEL_RE.match(channel):
            raise DedupConfigError("alerts.notification_channels",
                                   f"{channel!r} is not a channel name: use 'projects/P/notificationChannels/N'")
    window = s.retry_window_seconds
    default_grace = min(MAX_GRACE_SECONDS, _whole_minutes(max(DEFAULT_MIN_GRACE_SECONDS, window)))
    grace = _int(raw, "grace_seconds", default_grace,
                 MIN_GRACE_SECONDS, MAX_GRACE_SECONDS, "seconds after a fire time before a run without a record is missed")
    threshold = _int(raw, "released_threshold", DEFAULT_RELEASED_THRESHOLD, 0, 1000,
                     "releases of the job within its retry window before the alert fires")
    failures = _int(raw, "failure_threshold", DEFAULT_FAILURE_THRESHOLD, 1, MAX_FAILURE_THRESHOLD,
                    "consecutive failed runs before the run-failed alert")
    runtime = None if raw.get("max_runtime_seconds") is None else _int(
        raw, "max_runtime_seconds", 0, MIN_MAX_RUNTIME_SECONDS, MAX_GRACE_SECONDS,
        "seconds a run may stay in progress after its claim before the long-run alert")
    renotify = None if raw.get("renotify_seconds") is None else _int(
        raw, "renotify_seconds", 0, MIN_RENOTIFY_SECONDS, MAX_RENOTIFY_SECONDS,
        "seconds between reminders of an open incident; Cloud Monitoring's renotifyInterval range")
    try:
        gap = _whole_minutes(max_fire_gap_seconds(s.schedule, s.time_zone))
    except ValueError as exc:
        raise DedupConfigError("schedule", f"{exc}: a missed-run alert needs a schedule that fires") from None
    absence = max(MIN_ABSENCE_SECONDS, _whole_minutes(gap + grace))
    deliveries_absence = absence if absence <= MAX_ABSENCE_SECONDS else None
    retry = RetryPolicy(retry_count=1, max_retry_duration_seconds=0, min_backoff_seconds=60,
                        max_backoff_seconds=60, max_doublings=0)
    if retry_window_seconds(retry, s.attempt_deadline_seconds) > s.retention_seconds:
        retry = RetryPolicy(0, 0, 60, 60, 0)
    minute = int(hashlib.sha256(s.resource_prefix.encode()).hexdigest(), 16) % 60
    return AlertSettings(
        notification_channels=tuple(channels),
        grace_seconds=grace,
        released_threshold=threshold,
        released_window_seconds=min(MAX_RELEASED_WINDOW_SECONDS, _whole_minutes(max(MIN_RELEASED_WINDOW_SECONDS, window))),
        max_gap_seconds=gap,
        deliveries_absence_seconds=deliveries_absence,
        heartbeat_absence_seconds=2 * WATCHDOG_INTERVAL_SECONDS + 300,
        watchdog_schedule=f"{minute} * * * *",
        watchdog_retry=retry,
        failure_threshold=failures,
        max_runtime_seconds=runtime,
        renotify_seconds=renotify,
    )


def max_fire_gap_seconds(schedule: str, time_zone: str, start: datetime | None = None,
                         horizon_days: int = GAP_HORIZON_DAYS) -> float:
    """The largest gap, in seconds, between consecutive fire times of ``schedule`` in ``time_zone``
    (:func:`scheduler_dedup.handler.schedule.cron.gaps.fire_gaps`, the fire times every reading of the schedule has).

    Raises:
        ValueError: ``schedule`` never fires within the horizon (e.g. ``0 0 30 2 *``).
    """
    return fire_gaps(schedule, time_zone, start, horizon_days).largest_seconds


@dataclass(frozen=True)
class ProvisionedAlerts:
    """What :func:`provision_alerts` created.

    Attributes:
        metrics: log-based metrics by role (``deliveries``, ``duration``, ``run_checks``).
        policies: alert policies by role (``failed``, ``recovered``, ``fenced``, ``released``, ``takeover``,
            ``missed``, ``stuck``, ``watchdog_silent``, with ``max_runtime_seconds`` ``long_run`` and, when the
            schedule allows, ``deliveries_stopped``, disabled while the job is ``paused``).
        watchdog: the watchdog Scheduler job.
    """

    metrics: dict[str, gcp.logging.Metric]
    policies: dict[str, gcp.monitoring.AlertPolicy]
    watchdog: gcp.cloudscheduler.Job


def metric_name(s: DedupSettings, part: str) -> str:
    """The log-based metric id ``scheduler-dedup/<prefix>/<part>`` (in Monitoring: ``logging.googleapis.com/user/<id>``)."""
    return f"scheduler-dedup/{s.resource_prefix}/{part}"


def log_filters(s: DedupSettings) -> dict[str, LogQuery]:
    """Every Logging filter the alerts use, by role: the metrics' and the log-match policies'.

    Keys: ``deliveries``, ``duration``, ``run_checks`` (metrics); ``failed``, ``fenced``, ``takeover``,
    ``missed``, ``stuck``, ``failure_streak``, ``recovered``, ``long_run`` (log-match policies).
    """
    lines = handler_lines(s.project, s.service_name, s.region)
    delivery = lines.where(event(LogEvent.DELIVERY))
    return {
        "deliveries": delivery,
        "duration": delivery.where(field_is(LogField.EXECUTED, True)),
        "run_checks": lines.where(event(LogEvent.RUN_CHECK)),
        # A replay of a failed run (outcome failed, executed false) is not a new failure.
        "failed": delivery.where(field_is(LogField.OUTCOME, OUTCOME_FAILED), field_is(LogField.EXECUTED, True)),
        "fenced": delivery.where(field_is(LogField.OUTCOME, OUTCOME_FENCED)),
        "takeover": delivery.where(field_is(LogField.TOOK_OVER, True)),
        "missed": lines.where(event(LogEvent.MISSED_RUN)),
        "stuck": lines.where(event(LogEvent.STUCK_RUN)),
        "failure_streak": lines.where(event(LogEvent.FAILURE_STREAK)),
        "recovered": lines.where(event(LogEvent.RUN_RECOVERED)),
        "long_run": lines.where(event(LogEvent.LONG_RUN)),
    }


def _metric_filter(metric: gcp.logging.Metric, *extra: str) -> pulumi.Output[str]:
    return metric.name.apply(lambda n: " AND ".join(
        (f'metric.type="logging.googleapis.com/user/{n}"', 'resource.type="cloud_run_revision"', *extra)))


def provision_alerts(name: str, s: DedupSettings, a: AlertSettings, *, parent: pulumi.Resource,
                     service_uri: pulumi.Input[str], scheduler_sa_email: pulumi.Input[str],
                     depends_on: Sequence[pulumi.Resource]) -> ProvisionedAlerts:
    """Create the metrics, the watchdog job and the alert policies as children of ``parent``.

    Args:
        name: the component's name (children are ``<name>-<part>``).
        s: the component's resolved settings.
        a: the resolved alert settings (:func:`resolve_alerts`).
        parent: the component.
        service_uri: the Cloud Run service URL the watchdog calls (plus :data:`CHECK_PATH`).
        scheduler_sa_email: the identity of the OIDC token the watchdog sends (an allowed caller).
        depends_on: resources to create first (enabled APIs, the invoker grant).
    """
    opts = pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on))
    filters = log_filters(s)
    job_label = gcp.logging.MetricMetricDescriptorLabelArgs(
        key=LogField.JOB_NAME.value, value_type="STRING", description="Scheduler job id (X-CloudScheduler-JobName)")
    outcome_label = gcp.logging.MetricMetricDescriptorLabelArgs(
        key=LogField.OUTCOME.value, value_type="STRING", description="the delivery's outcome (processed, failed, ...)")
    by_job_and_outcome = {LogField.JOB_NAME.value: extract(LogField.JOB_NAME),
                          LogField.OUTCOME.value: extract(LogField.OUTCOME)}
    metrics = {
        "deliveries": gcp.logging.Metric(
            f"{name}-deliveries-metric",
            gcp.logging.MetricArgs(
                project=s.project, name=metric_name(s, "deliveries"), filter=filters["deliveries"].render(),
                description=f"scheduler-dedup {name}: Scheduler deliveries handled, by job and outcome",
                metric_descriptor=gcp.logging.MetricMetricDescriptorArgs(
                    metric_kind="DELTA", value_type="INT64", unit="1", labels=[job_label, outcome_label],
                    display_name=f"scheduler-dedup {name} deliveries"),
                label_extractors=by_job_and_outcome,
            ),
            opts=opts,
        ),
        "duration": gcp.logging.Metric(
            f"{name}-duration-metric",
            gcp.logging.MetricArgs(
                project=s.project, name=metric_name(s, "duration"), filter=filters["duration"].render(),
                description=f"scheduler-dedup {name}: handling time of deliveries that ran the job, milliseconds",
                metric_descriptor=gcp.logging.MetricMetricDescriptorArgs(
                    metric_kind="DELTA", value_type="DISTRIBUTION", unit="ms", labels=[job_label, outcome_label],
                    display_name=f"scheduler-dedup {name} execution duration"),
                value_extractor=extract(LogField.DURATION_MS),
                label_extractors=by_job_and_outcome,
                # 1 ms .. 2^24 ms (4.7 h): covers the longest Cloud Run request (60 min).
                bucket_options=gcp.logging.MetricBucketOptionsArgs(
                    exponential_buckets=gcp.logging.MetricBucketOptionsExponentialBucketsArgs(
                        num_finite_buckets=24, growth_factor=2, scale=1)),
            ),
            opts=opts,
        ),
        "run_checks": gcp.logging.Metric(
            f"{name}-run-checks-metric",
            gcp.logging.MetricArgs(
                project=s.project, name=metric_name(s, "run-checks"), filter=filters["run_checks"].render(),
                description=f"scheduler-dedup {name}: completed watchdog checks of expected against recorded runs",
                metric_descriptor=gcp.logging.MetricMetricDescriptorArgs(
                    metric_kind="DELTA", value_type="INT64", unit="1", labels=[job_label],
                    display_name=f"scheduler-dedup {name} run checks"),
                label_extractors={LogField.JOB_NAME.value: extract(LogField.JOB_NAME)},
            ),
            opts=opts,
        ),
    }

    body: dict[str, Any] = {"job_name": s.scheduler_job_name, "grace_seconds": a.grace_seconds,
                            "window_seconds": WATCHDOG_INTERVAL_SECONDS}
    if a.failure_threshold != DEFAULT_FAILURE_THRESHOLD:
        body["failure_threshold"] = a.failure_threshold
    if a.max_runtime_seconds is not None:
        body["max_runtime_seconds"] = a.max_runtime_seconds
    retry = a.watchdog_retry
    watchdog = gcp.cloudscheduler.Job(
        f"{name}-watchdog",
        gcp.cloudscheduler.JobArgs(
            name=s.names.watchdog_job, project=s.project, region=s.region,
            description=f"scheduler-dedup {name}: hourly check that every expected run of {s.scheduler_job_name} "
                        "has a record; logs missed_run",
            schedule=a.watchdog_schedule, time_zone="Etc/UTC",
            attempt_deadline=f"{s.attempt_deadline_seconds}s",
            retry_config=gcp.cloudscheduler.JobRetryConfigArgs(
                retry_count=retry.retry_count, max_retry_duration="0s",
                min_backoff_duration=f"{retry.min_backoff_seconds:g}s",
                max_backoff_duration=f"{retry.max_backoff_seconds:g}s", max_doublings=retry.max_doublings),
            http_target=gcp.cloudscheduler.JobHttpTargetArgs(
                uri=pulumi.Output.concat(service_uri, CHECK_PATH), http_method="POST",
                headers={"Content-Type": "application/json", "X-Dedup-Location": CHECK_LOCATION_GUARD},
                body=base64.b64encode(json.dumps(body, sort_keys=True).encode()).decode(),
                oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                    service_account_email=scheduler_sa_email, audience=s.oidc_audience),
            ),
        ),
        opts=opts,
    )

    # Cloud Monitoring answers an alert policy on a log-based metric created moments ago with 404 "Cannot find
    # metric(s) ... If a metric was created recently, it could take up to 10 minutes to become available"
    # (hashicorp/terraform-provider-google#11102, GoogleCloudPlatform/cloud-foundation-fabric#3739): the policies
    # on metrics wait that long after their metrics are created (again only when a metric is replaced).
    metrics_ready = pulumiverse_time.Sleep(
        f"{name}-metrics-ready",
        pulumiverse_time.SleepArgs(create_duration=f"{METRICS_READY_SECONDS}s",
                                   triggers={role: metric.name for role, metric in metrics.items()}),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(metrics.values())),
    )
    metric_opts = pulumi.ResourceOptions(parent=parent, depends_on=[*depends_on, metrics_ready])
    channels = list(a.notification_channels)
    user_labels = dict(s.job_config.labels)  # the user's labels (checked by .labels), as every labelled child has

    # Metric-based policies notify when an incident opens and when it closes (the recovery notice), and remind of an
    # open one every renotify_seconds. Log-match policies cannot: "For log-based alert policies, the notification
    # prompts is always [OPENED]" (AlertPolicy.AlertStrategy, Cloud Monitoring API v3); they notify on each new
    # matching line after the rate limit instead, and the run check logs run_recovered for failures.
    metric_strategy = gcp.monitoring.AlertPolicyAlertStrategyArgs(
        notification_prompts=["OPENED", "CLOSED"],
        notification_channel_strategies=[gcp.monitoring.AlertPolicyAlertStrategyNotificationChannelStrategyArgs(
            notification_channel_names=channels, renotify_interval=f"{a.renotify_seconds}s")]
        if a.renotify_seconds is not None else None)

    def log_match(part: str, title: str, severity: str | None, labels: Sequence[LogField], doc: str,
                  filter_part: str | None = None) -> gcp.monitoring.AlertPolicy:
        return gcp.monitoring.AlertPolicy(
            f"{name}-alert-{part}",
            gcp.monitoring.AlertPolicyArgs(
                project=s.project, user_labels=user_labels, display_name=f"{s.names.alert_prefix}{title}",
                combiner="OR",
                severity=severity, notification_channels=channels,
                conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                    display_name=title,
                    condition_matched_log=gcp.monitoring.AlertPolicyConditionConditionMatchedLogArgs(
                        filter=filters[filter_part or part].render(),
                        label_extractors={f.value: extract(f) for f in labels}),
                )],
                alert_strategy=gcp.monitoring.AlertPolicyAlertStrategyArgs(
                    notification_rate_limit=gcp.monitoring.AlertPolicyAlertStrategyNotificationRateLimitArgs(
                        period=f"{LOG_MATCH_RATE_LIMIT_SECONDS}s"),
                    auto_close=f"{AUTO_CLOSE_SECONDS}s"),
                documentation=gcp.monitoring.AlertPolicyDocumentationArgs(content=doc, mime_type="text/markdown"),
            ),
            opts=opts,
        )

    def absence(part: str, title: str, metric: gcp.logging.Metric, seconds: int, doc: str,
                enabled: bool = True) -> gcp.monitoring.AlertPolicy:
        return gcp.monitoring.AlertPolicy(
            f"{name}-alert-{part}",
            gcp.monitoring.AlertPolicyArgs(
                project=s.project, user_labels=user_labels, display_name=f"{s.names.alert_prefix}{title}",
                combiner="OR",
                severity="CRITICAL", notification_channels=channels, enabled=enabled, alert_strategy=metric_strategy,
                conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                    display_name=title,
                    condition_absent=gcp.monitoring.AlertPolicyConditionConditionAbsentArgs(
                        filter=_metric_filter(metric), duration=f"{seconds}s",
                        aggregations=[gcp.monitoring.AlertPolicyConditionConditionAbsentAggregationArgs(
                            alignment_period=f"{min(300, seconds)}s", per_series_aligner="ALIGN_SUM",
                            cross_series_reducer="REDUCE_SUM", group_by_fields=[f"metric.label.{LogField.JOB_NAME.value}"])],
                        trigger=gcp.monitoring.AlertPolicyConditionConditionAbsentTriggerArgs(count=1)),
                )],
                documentation=gcp.monitoring.AlertPolicyDocumentationArgs(content=doc, mime_type="text/markdown"),
            ),
            opts=metric_opts,
        )

    job = s.scheduler_job_name
    streak = a.failure_threshold > 1
    policies = {
        "failed": log_match(
            "failed", f"{a.failure_threshold} runs failed in a row" if streak else "run failed", "ERROR",
            (LogField.RUN_ID, LogField.SCHEDULE_TIME),
            (f"{a.failure_threshold} consecutive runs of Scheduler job `{job}` failed (the hourly run check counts "
             "them in the records; failure_threshold)" if streak else
             f"A run of Scheduler job `{job}` failed with a non-retryable error and is recorded as failed")
            + "; Scheduler will not retry it. The log line's `error` says why; fix the cause and force a new run if it "
              "must happen. A `recovered` notice follows the next completed run.",
            filter_part="failure_streak" if streak else None),
        "recovered": log_match(
            "recovered", "recovered", None, (LogField.RUN_ID, LogField.SCHEDULE_TIME),
            f"A run of `{job}` completed after a streak of failed runs that raised the run-failed alert: the job "
            "works again (found by the hourly run check)."),
        "fenced": log_match(
            "fenced", "attempt fenced", "ERROR", (LogField.RUN_ID, LogField.SCHEDULE_TIME),
            f"An attempt of a run of `{job}` lost its lease to a newer attempt while its job was still running (a "
            "pause longer than the lease, or lease renewals failing), so the job may have run twice for this run. "
            "Raise the lease (lease_seconds) or find what stalls the instance."),
        "takeover": log_match(
            "takeover", "takeover after a crash", "WARNING", (LogField.RUN_ID, LogField.SCHEDULE_TIME),
            f"An attempt of `{job}` took a run over from an attempt whose lease expired (its instance crashed or "
            "was stopped mid-job). The run was executed again; check that the job is safe to repeat."),
        "missed": log_match(
            "missed", "missed run", "CRITICAL", (LogField.SCHEDULE_TIME,),
            f"An expected run of `{job}` has no record {a.grace_seconds} s after its fire time: Scheduler did not "
            "deliver it, or every delivery failed before the run was claimed. Check that the job is enabled "
            f"(`gcloud scheduler jobs describe {job} --location {s.region}`), the handler's logs and its invoker grant."),
        "stuck": log_match(
            "stuck", "run stuck", "ERROR", (LogField.RUN_ID, LogField.SCHEDULE_TIME),
            f"A run of `{job}` is still in progress past its lease: the attempt that claimed it died (instance "
            "crashed or was stopped) and no Scheduler retry took it over, so the job did not finish. Raise the "
            "job's retry count, or force a new run once the cause is fixed."),
        "released": gcp.monitoring.AlertPolicy(
            f"{name}-alert-released",
            gcp.monitoring.AlertPolicyArgs(
                project=s.project, user_labels=user_labels, combiner="OR",
                display_name=f"{s.names.alert_prefix}runs released repeatedly",
                severity="WARNING", notification_channels=channels, alert_strategy=metric_strategy,
                conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                    display_name=f"more than {a.released_threshold} releases in {a.released_window_seconds} s",
                    condition_threshold=gcp.monitoring.AlertPolicyConditionConditionThresholdArgs(
                        filter=_metric_filter(metrics["deliveries"],
                                              f'metric.label.{LogField.OUTCOME.value}="{OUTCOME_RELEASED}"'),
                        comparison="COMPARISON_GT", threshold_value=a.released_threshold, duration="0s",
                        aggregations=[gcp.monitoring.AlertPolicyConditionConditionThresholdAggregationArgs(
                            alignment_period=f"{a.released_window_seconds}s", per_series_aligner="ALIGN_SUM",
                            cross_series_reducer="REDUCE_SUM",
                            group_by_fields=[f"metric.label.{LogField.JOB_NAME.value}"])],
                        trigger=gcp.monitoring.AlertPolicyConditionConditionThresholdTriggerArgs(count=1)),
                )],
                documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                    content=f"Deliveries of `{job}` failed with retryable errors (claim released, answered 500) more "
                            f"than {a.released_threshold} times within {a.released_window_seconds} s. Scheduler "
                            "retries within its retry config; if retries run out the run is missed.",
                    mime_type="text/markdown"),
            ),
            opts=metric_opts,
        ),
        "watchdog_silent": absence(
            "watchdog-silent", "watchdog silent", metrics["run_checks"], a.heartbeat_absence_seconds,
            f"The hourly run check of `{job}` has not completed for {a.heartbeat_absence_seconds} s, so missed runs "
            f"cannot be reported. Check the Scheduler job `{job}-watchdog`, the Cloud Run service `{s.service_name}` "
            "(crash loop, invoker grant) and Firestore."),
    }
    if a.max_runtime_seconds is not None:
        policies["long_run"] = log_match(
            "long_run", "run too long", "ERROR", (LogField.RUN_ID, LogField.SCHEDULE_TIME),
            f"A run of `{job}` is still in progress {a.max_runtime_seconds} s after its claim (max_runtime_seconds), "
            "though its lease may still be renewed: the job may hang. Its instance keeps the run; look at its logs, "
            "and stop the instance if it is stuck (a retry then takes the run over).")
    if a.deliveries_absence_seconds is not None:
        # A paused job (the component's `paused`) delivers nothing on purpose: the policy is kept, disabled.
        policies["deliveries_stopped"] = absence(
            "deliveries-stopped", "deliveries stopped", metrics["deliveries"], a.deliveries_absence_seconds,
            f"No delivery of `{job}` reached the handler for {a.deliveries_absence_seconds} s (the schedule's "
            f"largest gap {a.max_gap_seconds} s plus {a.grace_seconds} s grace). Is the job paused outside the stack "
            "(`gcloud scheduler jobs pause`) or deleted?", enabled=not s.paused)
    return ProvisionedAlerts(metrics=metrics, policies=policies, watchdog=watchdog)
