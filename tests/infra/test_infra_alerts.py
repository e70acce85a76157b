"""The alerts the component provisions, under Pulumi mocks: resource graph, filters, and durations against the schedule."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler_dedup.handler.core.logs import LogField
from scheduler_dedup.handler.core.paths import CHECK_LOCATION_GUARD, CHECK_PATH
from scheduler_dedup.infra import DedupConfigError, DedupScheduledJob
from scheduler_dedup.infra.job.alerts import (
    MAX_ABSENCE_SECONDS,
    log_filters,
    max_fire_gap_seconds,
    resolve_alerts,
)
from scheduler_dedup.infra.job.component import TYPE_TOKEN
from scheduler_dedup.infra.stack.mock_run import RegisteredResource, run_program, run_stack_config
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.policies.offline.check import check_program
from scheduler_dedup.policies.rules import RULES_BY_NAME
from tests.paths import ROOT

CHANNEL = "projects/p1/notificationChannels/42"
IMAGE = {"region": "us-east1", "image": "us-docker.pkg.dev/p1/r/handler:1", "job": "jobs:run"}
METRIC = "gcp:logging/metric:Metric"
POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
JOB = "gcp:cloudscheduler/job:Job"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _graph(name: str = "nightly", **args: Any) -> list[RegisteredResource]:
    merged = {"schedule": "*/15 * * * *", **IMAGE, "alerts": {"notification_channels": [CHANNEL]}, **args}
    return run_program(lambda: DedupScheduledJob(name, merged), {"gcp:project": "p1"})  # type: ignore[arg-type]


def _by_name(resources: list[RegisteredResource]) -> dict[str, RegisteredResource]:
    return {r.name: r for r in resources}


def _settings(**args: Any) -> Any:
    return resolve_settings("nightly", {"schedule": "*/15 * * * *", **IMAGE, **args}, default_project="p1")


@pytest.fixture(scope="module")
def graph() -> list[RegisteredResource]:
    return _graph()


def test_alerts_add_metrics_policies_and_a_watchdog_all_children_of_the_component(graph: list[RegisteredResource]) -> None:
    component = next(r for r in graph if r.type == TYPE_TOKEN)
    names = _by_name(graph)
    assert {r.name for r in graph if r.type == METRIC} == {
        "nightly-deliveries-metric", "nightly-duration-metric", "nightly-run-checks-metric"}
    assert {r.name for r in graph if r.type == POLICY} == {
        "nightly-alert-failed", "nightly-alert-recovered", "nightly-alert-fenced", "nightly-alert-released",
        "nightly-alert-takeover", "nightly-alert-missed", "nightly-alert-stuck", "nightly-alert-watchdog-silent",
        "nightly-alert-deliveries-stopped"}
    assert {r.name for r in graph if r.type == JOB} == {"nightly-job", "nightly-watchdog"}
    for r in graph:
        if r.type in (METRIC, POLICY, JOB):
            assert r.parent == component.urn, r.name
    for policy in (r for r in graph if r.type == POLICY):
        assert policy.inputs["notificationChannels"] == [CHANNEL], policy.name
        assert policy.inputs["documentation"]["content"], policy.name
    apis = {r.inputs["service"] for r in graph if r.type == "gcp:projects/service:Service"}
    assert {"logging.googleapis.com", "monitoring.googleapis.com"} <= apis
    assert names["nightly-deliveries-metric"].inputs["name"] == "scheduler-dedup/nightly/deliveries"


def test_the_outcomes_alerts_select_are_the_handlers() -> None:
    from scheduler_dedup.handler.protocol.idempotency import Outcome
    from scheduler_dedup.infra.job import alerts
    assert (alerts.OUTCOME_FAILED, alerts.OUTCOME_FENCED, alerts.OUTCOME_RELEASED) == (
        Outcome.FAILED.value, Outcome.FENCED.value, Outcome.RELEASED.value)


def test_the_component_does_not_load_the_firestore_client() -> None:
    """The component provider process imports pulumi.provider, whose protobufs clash with Firestore's."""
    import subprocess
    import sys

    code = ("import sys, scheduler_dedup.infra; "
            "print(sorted(m for m in sys.modules if m.startswith(('google.cloud.firestore', 'google.rpc'))))")
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr[-2000:]


def test_without_alerts_nothing_is_monitored() -> None:
    resources = run_program(lambda: DedupScheduledJob("plain", {"schedule": "0 3 * * *", **IMAGE}),  # type: ignore[arg-type]
                            {"gcp:project": "p1"})
    types = {r.type for r in resources}
    assert METRIC not in types and POLICY not in types
    assert [r.name for r in resources if r.type == JOB] == ["plain-job"]
    assert "monitoring.googleapis.com" not in {r.inputs["service"] for r in resources if r.type == "gcp:projects/service:Service"}


def test_watchdog_calls_the_run_check_with_the_jobs_identity_and_its_contract(graph: list[RegisteredResource]) -> None:
    names = _by_name(graph)
    job, watchdog = names["nightly-job"].inputs, names["nightly-watchdog"].inputs
    service = names["nightly-service"].state
    assert watchdog["httpTarget"]["uri"] == service["uri"] + CHECK_PATH
    assert watchdog["httpTarget"]["oidcToken"] == job["httpTarget"]["oidcToken"], "an allowed caller, same audience"
    assert watchdog["httpTarget"]["headers"]["X-Dedup-Location"] == CHECK_LOCATION_GUARD, "a delivery path refuses it"
    body = json.loads(base64.b64decode(watchdog["httpTarget"]["body"]))
    # the default grace covers the retry window (the default retries span 1.5 x the lease), in whole minutes
    grace = max(300, -(-_settings().retry_window_seconds // 60) * 60)
    assert body == {"job_name": job["name"], "grace_seconds": grace, "window_seconds": 3600}
    minute, *rest = watchdog["schedule"].split()
    assert rest == ["*", "*", "*", "*"] and 0 <= int(minute) < 60 and watchdog["timeZone"] == "Etc/UTC"
    assert watchdog["attemptDeadline"] == job["attemptDeadline"]


def test_metrics_extract_job_outcome_and_duration_from_the_handlers_field_names(graph: list[RegisteredResource]) -> None:
    names = _by_name(graph)
    deliveries, duration = names["nightly-deliveries-metric"].inputs, names["nightly-duration-metric"].inputs
    assert deliveries["labelExtractors"] == {"job_name": f"EXTRACT(jsonPayload.{LogField.JOB_NAME.value})",
                                             "outcome": f"EXTRACT(jsonPayload.{LogField.OUTCOME.value})"}
    assert {label["key"] for label in deliveries["metricDescriptor"]["labels"]} == set(deliveries["labelExtractors"])
    assert deliveries["metricDescriptor"]["metricKind"] == "DELTA" and deliveries["metricDescriptor"]["valueType"] == "INT64"
    assert duration["metricDescriptor"]["valueType"] == "DISTRIBUTION" and duration["metricDescriptor"]["unit"] == "ms"
    assert duration["valueExtractor"] == "EXTRACT(jsonPayload.duration_ms)"
    buckets = duration["bucketOptions"]["exponentialBuckets"]
    assert buckets["scale"] * buckets["growthFactor"] ** buckets["numFiniteBuckets"] >= 3600 * 1000, "covers a 60 min request"
    settings = _settings()
    filters = log_filters(settings)
    assert deliveries["filter"] == filters["deliveries"].render()
    assert 'resource.labels.service_name="nightly"' in deliveries["filter"]
    assert 'jsonPayload.executed=true' in duration["filter"]


def test_log_match_policies_rate_limit_and_extract_the_run(graph: list[RegisteredResource]) -> None:
    names = _by_name(graph)
    filters = log_filters(_settings())
    for part in ("failed", "fenced", "takeover", "missed", "stuck"):
        policy = names[f"nightly-alert-{part}"].inputs
        (condition,) = policy["conditions"]
        assert condition["conditionMatchedLog"]["filter"] == filters[part].render()
        assert "schedule_time" in condition["conditionMatchedLog"]["labelExtractors"]
        assert policy["alertStrategy"]["notificationRateLimit"]["period"] == "300s"


def test_released_policy_counts_releases_per_job_over_the_retry_window() -> None:
    retry = {"retry_count": 5, "max_retry_duration_seconds": 7200, "min_backoff_seconds": 60, "max_backoff_seconds": 600}
    names = _by_name(_graph(retry=retry, alerts={"notification_channels": [CHANNEL], "released_threshold": 4}))
    (condition,) = names["nightly-alert-released"].inputs["conditions"]
    threshold = condition["conditionThreshold"]
    assert threshold["comparison"] == "COMPARISON_GT" and threshold["thresholdValue"] == 4
    assert 'metric.label.outcome="released"' in threshold["filter"]
    assert "logging.googleapis.com/user/scheduler-dedup/nightly/deliveries" in threshold["filter"]
    window = _settings(retry=retry).retry_window_seconds  # 7200 s + one 180 s attempt deadline
    assert threshold["aggregations"][0]["alignmentPeriod"] == f"{-(-window // 60) * 60}s" == "7380s"
    assert threshold["aggregations"][0]["groupByFields"] == ["metric.label.job_name"]


@pytest.mark.parametrize(("schedule", "time_zone", "gap"), [
    ("*/15 * * * *", "Etc/UTC", 900),
    ("0 */2 * * *", "Etc/UTC", 7200),
    ("0 */2 * * *", "Europe/Berlin", 3 * 3600),  # 02:00 CEST, (02:00 CET counted once), 04:00 CET
    ("*/10 0-3 * * *", "Etc/UTC", 20 * 3600 + 600),  # 03:50 -> 00:00 next day
    ("0 9-17 * * 1-5", "Etc/UTC", 64 * 3600),  # Friday 17:00 -> Monday 09:00
    ("0 3 * * *", "Europe/Berlin", 25 * 3600),  # the autumn day of 25 hours
    # 02:30 does not exist on 29 March, and Scheduler may not run it at all: 28 March 02:30 CET -> 30 March 02:30 CEST
    ("30 2 * * *", "Europe/Berlin", 47 * 3600),
    # the same day: 28 March 14:30 CET -> 29 March 14:30 CEST, not 13 h (a deliveries-stopped page on that day)
    ("30 2,14 * * *", "Europe/Berlin", 23 * 3600),
    # Lord Howe Island's clocks skip 02:00-02:29 on 4 October 2026: 3 October 14:15 -> 4 October 14:15, 23.5 h
    ("15 2,14 * * *", "Australia/Lord_Howe", 23.5 * 3600),
    ("0 12 29 2 *", "Etc/UTC", (datetime(2032, 2, 29) - datetime(2028, 2, 29)).total_seconds()),  # leap days
    ("* * * 1-6 *", "Etc/UTC", (datetime(2027, 1, 1) - datetime(2026, 6, 30, 23, 59)).total_seconds()),
])
def test_largest_gap_between_fire_times(schedule: str, time_zone: str, gap: float) -> None:
    assert max_fire_gap_seconds(schedule, time_zone, START) == gap


def test_a_leap_day_job_gets_the_watchdog_and_only_a_schedule_that_never_fires_is_refused() -> None:
    """``0 12 29 2 *`` is a schedule Scheduler accepts; its next leap day is more than 400 days away, which refused
    its alerts at preview ("a missed-run alert needs a schedule that fires")."""
    resolved = resolve_alerts({"notification_channels": [CHANNEL]}, _settings(schedule="0 12 29 2 *"))
    assert resolved is not None and resolved.deliveries_absence_seconds is None  # only the watchdog can tell
    with pytest.raises(ValueError, match="never fires"):
        max_fire_gap_seconds("0 12 30 2 *", "Etc/UTC", START)


def test_an_hour_that_occurs_twice_counts_once_so_the_gap_is_never_underestimated() -> None:
    # 2026-10-25 02:00 occurs twice in Berlin. Cloud Scheduler's docs do not say whether an hourly job fires at
    # both instants; counting it once gives 02:00 CEST -> 03:00 CET, two hours, the longer and safer gap.
    assert max_fire_gap_seconds("0 * * * *", "Etc/UTC", START) == 3600
    assert max_fire_gap_seconds("0 * * * *", "Europe/Berlin", START) == 7200
    assert max_fire_gap_seconds("30 * * * *", "America/New_York", START) == 7200
    assert max_fire_gap_seconds("* * * * *", "Europe/Berlin", START) == 61 * 60  # 02:59 CEST -> 03:00 CET
    # the spring change skips 02:00 CET: 01:00 CET -> 03:00 CEST is one real hour
    assert max_fire_gap_seconds("0 * * * *", "Europe/Berlin", START, horizon_days=150) == 3600


@pytest.mark.parametrize(("schedule", "grace", "absence"), [
    # default grace: the retry window of the default retries (1545 s) in whole minutes
    ("*/15 * * * *", None, 900 + 1560),
    ("*/10 0-3 * * *", 600, 20 * 3600 + 600 + 600),
    ("0 3 * * *", None, None),  # a daily job: only the watchdog can tell
    ("0 9-17 * * 1-5", None, None),
])
def test_deliveries_absence_window_follows_the_schedule_and_stays_under_the_cap(
        schedule: str, grace: int | None, absence: int | None) -> None:
    alerts: dict[str, Any] = {"notification_channels": [CHANNEL]}
    if grace is not None:
        alerts["grace_seconds"] = grace
    resolved = resolve_alerts(alerts, _settings(schedule=schedule))
    assert resolved is not None
    assert resolved.deliveries_absence_seconds == absence
    if absence is not None:
        assert absence <= MAX_ABSENCE_SECONDS
        names = _by_name(_graph(schedule=schedule, alerts=alerts))
        (condition,) = names["nightly-alert-deliveries-stopped"].inputs["conditions"]
        assert condition["conditionAbsent"]["duration"] == f"{absence}s"
    else:
        assert "nightly-alert-deliveries-stopped" not in _by_name(_graph(schedule=schedule, alerts=alerts))


def test_heartbeat_absence_tolerates_one_lost_check_and_covers_a_weekly_job() -> None:
    names = _by_name(_graph(schedule="0 6 * * 1"))
    (condition,) = names["nightly-alert-watchdog-silent"].inputs["conditions"]
    absent = condition["conditionAbsent"]
    assert absent["duration"] == "7500s"  # two hourly checks + 5 min
    assert "scheduler-dedup/nightly/run-checks" in absent["filter"]
    assert absent["aggregations"][0]["crossSeriesReducer"] == "REDUCE_SUM"


def test_a_retry_window_longer_than_a_week_gives_the_longest_grace_not_an_error() -> None:
    retry = {"retry_count": 5, "max_retry_duration_seconds": 30 * 86400}
    resolved = resolve_alerts({"notification_channels": [CHANNEL]}, _settings(retry=retry, retention_seconds=40 * 86400))
    assert resolved is not None and resolved.grace_seconds == 7 * 86400


def test_grace_defaults_to_the_retry_window() -> None:
    retry = {"retry_count": 3, "min_backoff_seconds": 60, "max_backoff_seconds": 600}
    settings = _settings(retry=retry)
    resolved = resolve_alerts({"notification_channels": [CHANNEL]}, settings)
    assert resolved is not None and resolved.grace_seconds == -(-settings.retry_window_seconds // 60) * 60
    assert resolved.grace_seconds > 300


@pytest.mark.parametrize(("alerts", "field", "needle"), [
    ({}, "alerts.notification_channels", "is required"),
    ({"notification_channels": []}, "alerts.notification_channels", "is required"),
    ({"notification_channels": "projects/p1/notificationChannels/1"}, "alerts.notification_channels", "list"),
    ({"notification_channels": ["my-email"]}, "alerts.notification_channels", "projects/P/notificationChannels/N"),
    ({"notification_channels": [CHANNEL], "grace_seconds": 10}, "alerts.grace_seconds", "60 to 604800"),
    ({"notification_channels": [CHANNEL], "released_threshold": -1}, "alerts.released_threshold", "0 to 1000"),
    ({"notification_channels": [CHANNEL], "grace": 600}, "alerts.grace", "valid keys"),
    ({"notification_channels": [CHANNEL], "failure_threshold": 0}, "alerts.failure_threshold", "1 to 1000"),
    ({"notification_channels": [CHANNEL], "max_runtime_seconds": 30}, "alerts.max_runtime_seconds", "60 to 604800"),
    ({"notification_channels": [CHANNEL], "renotify_seconds": 600}, "alerts.renotify_seconds", "1800 to 86400"),
    ("yes", "alerts", "mapping"),
])
def test_bad_alerts_fail_before_any_resource(alerts: Any, field: str, needle: str) -> None:
    registered: list[RegisteredResource] = []
    with pytest.raises(DedupConfigError, match=needle) as info:
        registered = _graph(alerts=alerts)
    assert info.value.field == field
    assert registered == []


def test_stack_config_turns_alerts_on_and_names_the_key_on_error(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "Pulumi.example.yaml").read_text())
    config["config"]["scheduler-dedup:alertNotificationChannels"] = ["projects/my-project-id/notificationChannels/7"]
    config["config"]["scheduler-dedup:alertReleasedThreshold"] = 3
    stack = tmp_path / "Pulumi.alerts.yaml"
    stack.write_text(yaml.safe_dump(config))
    resources = run_stack_config(stack, project_file=ROOT / "Pulumi.yaml")
    policies = [r for r in resources if r.type == POLICY]
    assert policies and all(p.inputs["notificationChannels"] == ["projects/my-project-id/notificationChannels/7"]
                            for p in policies)
    released = next(p for p in policies if p.name.endswith("-alert-released"))
    assert released.inputs["conditions"][0]["conditionThreshold"]["thresholdValue"] == 3

    config["config"]["scheduler-dedup:alertGraceSeconds"] = 5
    stack.write_text(yaml.safe_dump(config))
    with pytest.raises(DedupConfigError, match=r"\(stack config scheduler-dedup:alertGraceSeconds\)"):
        run_stack_config(stack, project_file=ROOT / "Pulumi.yaml")


def test_policy_pack_flags_a_dedup_job_without_alerting_and_not_one_with() -> None:
    rule = RULES_BY_NAME["dedup-job-alerting"]
    assert rule.enforcement_level == "advisory"

    def findings(args: dict[str, Any]) -> list[str]:
        program = lambda: DedupScheduledJob("nightly", {"schedule": "0 3 * * *", **IMAGE, **args})  # noqa: E731
        return [f.message for f in check_program(program, {"gcp:project": "p1"}) if f.rule == rule.name]

    (message,) = findings({})
    assert "nightly-job" in message and "alertNotificationChannels" in message and CHECK_PATH in message
    assert findings({"alerts": {"notification_channels": [CHANNEL]}}) == []
    every = [f for f in check_program(lambda: DedupScheduledJob(  # type: ignore[arg-type]
        "nightly", {"schedule": "0 3 * * *", **IMAGE, "alerts": {"notification_channels": [CHANNEL]}}),
        {"gcp:project": "p1"}) if f.level == "mandatory"]
    assert every == [], "the watchdog job passes every mandatory rule (deadline, OIDC, retention)"


def test_jobs_sharing_a_store_each_get_their_own_watchdog_and_policies() -> None:
    from scheduler_dedup.infra.stores.store import DedupStore

    def program() -> None:
        store = DedupStore("shared", {"location": "eur3"})
        for job in ("job-a", "job-b"):
            DedupScheduledJob(job, {"schedule": "0 3 * * *", **IMAGE, "store": store,  # type: ignore[typeddict-item]
                                    "alerts": {"notification_channels": [CHANNEL]}})

    resources = run_program(program, {"gcp:project": "p1"})
    watchdogs = {r.name: r.inputs for r in resources if r.type == JOB and r.name.endswith("-watchdog")}
    assert set(watchdogs) == {"job-a-watchdog", "job-b-watchdog"}
    for job, watchdog in watchdogs.items():
        assert json.loads(base64.b64decode(watchdog["httpTarget"]["body"]))["job_name"] == job.removesuffix("-watchdog")
    metrics = [r.inputs["name"] for r in resources if r.type == METRIC]
    assert len(metrics) == len(set(metrics)) == 6, "metric ids are per job, never clash"
    missed = [r for r in resources if r.type == POLICY and r.name.endswith("-alert-missed")]
    assert sorted('service_name="job-a"' in p.inputs["conditions"][0]["conditionMatchedLog"]["filter"] for p in missed) == [False, True]


# ------------------------------------------------------------------ alerts people keep switched on, and a pause

def _policy(resources: list[RegisteredResource], part: str) -> dict[str, Any]:
    return _by_name(resources)[f"nightly-alert-{part}"].inputs


def test_a_failure_threshold_alerts_on_the_run_checks_streak_line_and_a_recovery_notice_follows() -> None:
    """Every failed run paged (one log match per failure). With failure_threshold 3 the failed policy matches the run
    check's failure_streak line instead, the watchdog asks the check to count 3, and a recovered policy notifies."""
    every = _graph()
    assert "outcome" in _policy(every, "failed")["conditions"][0]["conditionMatchedLog"]["filter"]
    three = _graph(alerts={"notification_channels": [CHANNEL], "failure_threshold": 3})
    failed = _policy(three, "failed")
    text = failed["conditions"][0]["conditionMatchedLog"]["filter"]
    assert '"failure_streak"' in text and "outcome" not in text and "3 runs failed in a row" in failed["displayName"]
    body = json.loads(base64.b64decode(_by_name(three)["nightly-watchdog"].inputs["httpTarget"]["body"]))
    assert body["failure_threshold"] == 3 and "max_runtime_seconds" not in body
    recovered = _policy(three, "recovered")
    assert '"run_recovered"' in recovered["conditions"][0]["conditionMatchedLog"]["filter"]
    assert "severity" not in recovered and recovered["notificationChannels"] == [CHANNEL]


def test_a_job_forwarded_to_a_cloud_run_job_pages_each_failed_execution_from_the_run_check() -> None:
    """Its executions fail after the delivery has answered: only the run check sees it, so the failed policy matches
    the run check's failure_streak line, even at failure_threshold 1."""
    graph = run_program(lambda: DedupScheduledJob("nightly", {  # type: ignore[arg-type]
        "schedule": "*/15 * * * *", "region": "us-central1", "alerts": {"notification_channels": [CHANNEL]},
        "cloud_run_job_target": {"job": "projects/p1/locations/us-central1/jobs/export"}}), {"gcp:project": "p1"})
    failed = _policy(graph, "failed")
    text = failed["conditions"][0]["conditionMatchedLog"]["filter"]
    assert '"failure_streak"' in text and "outcome" not in text and failed["displayName"].endswith("run failed")


def test_max_runtime_adds_a_long_run_policy_and_the_watchdog_asks_for_it() -> None:
    assert "nightly-alert-long_run" not in _by_name(_graph())
    graph = _graph(alerts={"notification_channels": [CHANNEL], "max_runtime_seconds": 1800})
    long_run = _policy(graph, "long_run")
    assert '"long_run"' in long_run["conditions"][0]["conditionMatchedLog"]["filter"] and long_run["severity"] == "ERROR"
    body = json.loads(base64.b64decode(_by_name(graph)["nightly-watchdog"].inputs["httpTarget"]["body"]))
    assert body["max_runtime_seconds"] == 1800


def test_renotify_reminds_of_open_metric_incidents_and_they_notify_on_close() -> None:
    """Cloud Monitoring re-notifies only through NotificationChannelStrategy.renotifyInterval, and log-based policies
    notify on open only: the reminder goes on the metric-based policies."""
    graph = _graph(alerts={"notification_channels": [CHANNEL], "renotify_seconds": 3600})
    for part in ("watchdog-silent", "deliveries-stopped", "released"):
        strategy = _policy(graph, part)["alertStrategy"]
        assert strategy["notificationPrompts"] == ["OPENED", "CLOSED"], part
        assert strategy["notificationChannelStrategies"] == [
            {"notificationChannelNames": [CHANNEL], "renotifyInterval": "3600s"}], part
    assert "notificationChannelStrategies" not in _policy(_graph(), "watchdog-silent")["alertStrategy"]
    assert "notificationChannelStrategies" not in _policy(graph, "missed").get("alertStrategy", {})


def _env_of(resources: dict[str, RegisteredResource]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in resources["nightly-service"].inputs["template"]["containers"][0]["envs"]}


def test_paused_pauses_the_scheduler_job_tells_the_handler_and_disables_deliveries_stopped() -> None:
    running = _by_name(_graph())
    assert not running["nightly-job"].inputs.get("paused")
    paused = _by_name(_graph(paused=True))
    assert paused["nightly-job"].inputs["paused"] is True
    env = _env_of(paused)
    assert env["DEDUP_PAUSED_SINCE"] == paused["nightly-paused-since"].state["rfc3339"]
    assert "DEDUP_RESUMED_AT" not in env  # the pause goes on
    assert paused["nightly-alert-deliveries-stopped"].inputs["enabled"] is False
    assert paused["nightly-alert-missed"].inputs.get("enabled", True) is not False  # the run check reports paused
    assert paused["nightly-watchdog"].inputs.get("paused") is not True  # the heartbeat goes on
    with pytest.raises(DedupConfigError, match="paused"):
        _graph(paused="yes")


def test_a_pause_is_recorded_beside_the_schedules_start_and_never_moves_it() -> None:
    """Pausing replaced DEDUP_SCHEDULE_SINCE's timestamp, so no fire time before the pause was expected any more and a
    run missed just before it went unreported. Now a Static's triggers decide when it is replaced: the schedule's
    start has the same triggers paused or not; the pause's state is replaced at each change; and the pause's start
    follows it while paused and keeps its time while the job runs, so after a resume the handler knows the window."""
    running, paused = _by_name(_graph()), _by_name(_graph(paused=True))
    assert running["nightly-schedule-since"].inputs["triggers"] == paused["nightly-schedule-since"].inputs["triggers"]
    assert running["nightly-pause-state"].inputs["triggers"] != paused["nightly-pause-state"].inputs["triggers"]
    for graph in (running, paused):
        assert graph["nightly-paused-since"].inputs["rfc3339"] == graph["nightly-pause-state"].state["rfc3339"]
    assert paused["nightly-paused-since"].ignore_changes == ()  # a new pause: a new start
    assert running["nightly-paused-since"].ignore_changes == ("rfc3339",)  # resumed: the last pause's start stays
    env = _env_of(running)
    assert env["DEDUP_RESUMED_AT"] == running["nightly-pause-state"].state["rfc3339"]
    assert env["DEDUP_PAUSED_SINCE"] == running["nightly-paused-since"].state["rfc3339"]
    assert env["DEDUP_SCHEDULE_SINCE"] == running["nightly-schedule-since"].state["rfc3339"]
