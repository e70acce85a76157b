"""Each rule on engine-shaped (camelCase) properties: compliant, violating, missing/unknown, and config override."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_dedup.policies.model import UNKNOWN, Resource
from scheduler_dedup.policies.rules import (
    RULES_BY_NAME,
    Finding,
    evaluate,
    job_retry_window_seconds,
)
from scheduler_dedup.handler.cron import groc_to_unix_cron

JOB = "gcp:cloudscheduler/job:Job"
SERVICE = "gcp:cloudrunv2/service:Service"
FIELD = "gcp:firestore/field:Field"
RUN_URL = "https://svc-abc-ew.a.run.app"
CUSTOM_AUD = "https://scheduler-dedup.invalid/projects/p/locations/r/services/svc"


def res(typ: str, name: str, props: dict[str, Any], deps: dict[str, list[str]] | None = None) -> Resource:
    return Resource(type=typ, name=name, urn=f"urn:pulumi:s::p::{typ}::{name}", props=props, dependencies=deps or {})


def job(**props: Any) -> Resource:
    base: dict[str, Any] = {"schedule": "*/15 * * * *", "timeZone": "Etc/UTC", "attemptDeadline": "180s",
                            "httpTarget": {"uri": RUN_URL, "httpMethod": "POST",
                                           "oidcToken": {"serviceAccountEmail": "sched@p.iam.gserviceaccount.com",
                                                         "audience": RUN_URL}}}
    base.update(props)
    return res(JOB, "job", base)


def service(env: dict[str, str] | None = None, timeout: Any = "300s", **props: Any) -> Resource:
    envs = [{"name": k, "value": v} for k, v in (env if env is not None else {"DEDUP_COLLECTION": "scheduler_runs"}).items()]
    base: dict[str, Any] = {"uri": RUN_URL, "template": {"timeout": timeout, "containers": [{"image": "i", "envs": envs}]}}
    base.update(props)
    return res(SERVICE, "svc", base)


def ttl_field(**props: Any) -> Resource:
    base: dict[str, Any] = {"collection": "scheduler_runs", "field": "expire_at", "database": "(default)", "ttlConfig": {},
                            "indexConfig": {}}
    base.update(props)
    return res(FIELD, "ttl", base)


def run(rule: str, resources: list[Resource], config: dict[str, Any] | None = None) -> list[Finding]:
    policy_config = {rule: config} if config is not None else None
    return evaluate(resources, policy_config, rules=[RULES_BY_NAME[rule]])


def good_stack() -> list[Resource]:
    return [job(), service(), ttl_field()]


# ------------------------------------------------------------------ scheduler-job-unix-cron

def test_unix_cron_compliant() -> None:
    assert run("scheduler-job-unix-cron", [job(), job(schedule="0 9 * * MON-FRI", timeZone="Europe/Berlin")]) == []


@pytest.mark.parametrize(("schedule", "expected"), [
    ("every 5 minutes", "'*/5 * * * *'"),
    ("every 2 hours", "'0 */2 * * *'"),
    ("every monday 09:00", "'0 9 * * 1'"),
    ("@hourly", "'0 * * * *'"),
    ("0 0 * * * *", "five plain unix-cron fields"),
    ("61 * * * *", "five unix-cron fields"),
])
def test_unix_cron_violations_say_what_to_write(schedule: str, expected: str) -> None:
    findings = run("scheduler-job-unix-cron", [job(schedule=schedule)])
    assert len(findings) == 1 and expected in findings[0].message
    assert findings[0].level == "mandatory"


def test_unix_cron_refuses_invalid_time_zone() -> None:
    findings = run("scheduler-job-unix-cron", [job(timeZone="Mars/Olympus")])
    assert len(findings) == 1 and "IANA" in findings[0].message


def test_unix_cron_missing_or_unknown() -> None:
    bare = res(JOB, "job", {})
    assert run("scheduler-job-unix-cron", [bare, job(schedule=UNKNOWN, timeZone=UNKNOWN)]) == []


def test_unix_cron_level_override() -> None:
    assert run("scheduler-job-unix-cron", [job(schedule="every 5 minutes")], {"enforcementLevel": "advisory"})[0].level == "advisory"
    assert evaluate([job(schedule="every 5 minutes")], {"scheduler-job-unix-cron": "disabled"},
                    rules=[RULES_BY_NAME["scheduler-job-unix-cron"]]) == []


def test_groc_without_obvious_equivalent_gets_generic_hint() -> None:
    assert groc_to_unix_cron("every 3 weeks of month") is None
    findings = run("scheduler-job-unix-cron", [job(schedule="every 3 weeks of month")])
    assert "groc" in findings[0].message and "'*/15 * * * *'" in findings[0].message


# ------------------------------------------------------------------ scheduler-job-oidc-auth

def test_oidc_compliant_audiences() -> None:
    origin_job = job(httpTarget={"uri": RUN_URL + "/run", "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com",
                                                                        "audience": RUN_URL}})
    no_aud = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com"}})
    custom = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com",
                                                           "audience": CUSTOM_AUD}})
    google = job(httpTarget={"uri": "https://workflowexecutions.googleapis.com/v1/x", "oauthToken": {"serviceAccountEmail": "s@p"}})
    for j in (job(), origin_job, no_aud, google):
        assert run("scheduler-job-oidc-auth", [j, service()]) == [], j
    assert run("scheduler-job-oidc-auth", [custom, service(customAudiences=[CUSTOM_AUD])]) == []


def test_oidc_violations() -> None:
    missing = job(httpTarget={"uri": RUN_URL, "oauthToken": {"serviceAccountEmail": "s@p"}})
    findings = run("scheduler-job-oidc-auth", [missing, service()])
    assert len(findings) == 1 and "add httpTarget.oidcToken" in findings[0].message and "remove oauthToken" in findings[0].message
    no_email = job(httpTarget={"uri": RUN_URL, "oidcToken": {"audience": RUN_URL}})
    assert "serviceAccountEmail" in run("scheduler-job-oidc-auth", [no_email])[0].message
    custom_not_configured = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "s@p", "audience": CUSTOM_AUD}})
    findings = run("scheduler-job-oidc-auth", [custom_not_configured, service()])
    assert len(findings) == 1 and "add" in findings[0].message and "customAudiences of service svc" in findings[0].message
    other = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "s@p", "audience": "https://other.run.app"}})
    assert "Set httpTarget.oidcToken.audience to 'https://svc-abc-ew.a.run.app'" in run("scheduler-job-oidc-auth", [other, service()])[0].message


def test_oidc_unknown_values_pass() -> None:
    unknown = job(httpTarget={"uri": UNKNOWN, "oidcToken": {"serviceAccountEmail": UNKNOWN, "audience": UNKNOWN}})
    unknown_uri = job(httpTarget={"uri": UNKNOWN, "oidcToken": {"serviceAccountEmail": "s@p", "audience": "https://x"}})
    assert run("scheduler-job-oidc-auth", [unknown, res(SERVICE, "svc", {"customAudiences": UNKNOWN})]) == []
    assert run("scheduler-job-oidc-auth", [unknown_uri]) == []
    assert run("scheduler-job-oidc-auth", [res(JOB, "bare", {}), job(httpTarget=UNKNOWN)]) == []


def test_oidc_uses_custom_audience_of_the_paired_service_when_uri_unknown() -> None:
    pending = job(httpTarget={"uri": UNKNOWN, "oidcToken": {"serviceAccountEmail": "s@p", "audience": CUSTOM_AUD}})
    assert run("scheduler-job-oidc-auth", [pending, service(customAudiences=[CUSTOM_AUD], uri=UNKNOWN)]) == []
    findings = run("scheduler-job-oidc-auth", [pending, service(customAudiences=["https://else"], uri=UNKNOWN)])
    assert len(findings) == 1 and "only Cloud Run service" in findings[0].message


def test_oidc_config_allowed_audiences() -> None:
    odd = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "s@p", "audience": "my-audience"}})
    assert run("scheduler-job-oidc-auth", [odd, service()])
    assert run("scheduler-job-oidc-auth", [odd, service()], {"allowedAudiences": ["my-audience"]}) == []


# ------------------------------------------------------------------ scheduler-attempt-deadline (+ margin)

def test_attempt_deadline_range() -> None:
    assert run("scheduler-attempt-deadline", [job(attemptDeadline="15s"), job(attemptDeadline="1800s")]) == []
    low = run("scheduler-attempt-deadline", [job(attemptDeadline="10s")])
    assert len(low) == 1 and "\"15s\"" in low[0].message
    assert "\"1800s\"" in run("scheduler-attempt-deadline", [job(attemptDeadline="3600s")])[0].message
    assert "write it like \"180s\"" in run("scheduler-attempt-deadline", [job(attemptDeadline="3m")])[0].message


def test_attempt_deadline_missing_unknown_or_not_http() -> None:
    no_deadline = res(JOB, "j", {"httpTarget": {"uri": RUN_URL}})
    pubsub = res(JOB, "p", {"attemptDeadline": "5s", "pubsubTarget": {"topicName": "t"}})
    assert run("scheduler-attempt-deadline", [no_deadline, pubsub, job(attemptDeadline=UNKNOWN)]) == []


def test_attempt_deadline_config_narrows_range() -> None:
    assert run("scheduler-attempt-deadline", [job(attemptDeadline="900s")], {"maxSeconds": 600})
    assert run("scheduler-attempt-deadline", [job(attemptDeadline="10s")], {"minSeconds": 5}), "cannot go below 15 s"


def test_attempt_deadline_margin() -> None:
    assert run("scheduler-attempt-deadline-margin", [job(attemptDeadline="180s"), service(timeout="300s")]) == []
    close = run("scheduler-attempt-deadline-margin", [job(attemptDeadline="295s"), service(timeout="300s")])
    assert len(close) == 1 and close[0].level == "advisory" and "at least 310s" in close[0].message
    assert run("scheduler-attempt-deadline-margin", [job(attemptDeadline=UNKNOWN), service(timeout="300s")]) == []
    assert run("scheduler-attempt-deadline-margin", [job(attemptDeadline="295s"), service(timeout="300s")],
               {"minMarginSeconds": 1}) == []


# ------------------------------------------------------------------ scheduler-retry-config

def test_retry_config() -> None:
    good = job(retryConfig={"retryCount": 3.0, "minBackoffDuration": "10s", "maxBackoffDuration": "300s", "maxDoublings": 3.0})
    assert run("scheduler-retry-config", [good, job()]) == []
    bad = job(retryConfig={"retryCount": 9.0, "minBackoffDuration": "600s", "maxBackoffDuration": "60s", "maxDoublings": -1.0})
    messages = " | ".join(f.message for f in run("scheduler-retry-config", [bad]))
    assert "retryCount 9 is outside 0 to 5" in messages and "minBackoffDuration 600s is above" in messages
    assert "maxDoublings -1" in messages
    assert all(f.level == "advisory" for f in run("scheduler-retry-config", [bad]))


def test_retry_config_unknown_and_override() -> None:
    assert run("scheduler-retry-config", [job(retryConfig=UNKNOWN), job(retryConfig={"retryCount": UNKNOWN})]) == []
    three = job(retryConfig={"retryCount": 3.0})
    assert run("scheduler-retry-config", [three], {"maxRetryCount": 2})
    assert run("scheduler-retry-config", [three], {"enforcementLevel": "mandatory", "maxRetryCount": 2})[0].level == "mandatory"


# ------------------------------------------------------------------ scheduler-target-not-google-api

def test_target_not_google_api() -> None:
    direct = job(httpTarget={"uri": "https://run.googleapis.com/v2/projects/p/locations/r/jobs/j:run"})
    findings = run("scheduler-target-not-google-api", [direct, job()])
    assert len(findings) == 1 and "proxy" in findings[0].message and findings[0].level == "advisory"
    assert run("scheduler-target-not-google-api", [job(httpTarget={"uri": UNKNOWN}), res(JOB, "bare", {})]) == []
    assert run("scheduler-target-not-google-api", [direct], {"allowedHosts": ["run.googleapis.com"]}) == []


# ------------------------------------------------------------------ cloud-run-no-public-invoker

@pytest.mark.parametrize(("typ", "props"), [
    ("gcp:cloudrunv2/serviceIamMember:ServiceIamMember", {"role": "roles/run.invoker", "member": "allUsers"}),
    ("gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding", {"role": "roles/run.invoker", "members": ["user:a@b", "allAuthenticatedUsers"]}),
    ("gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy",
     {"policyData": '{"bindings": [{"role": "roles/run.invoker", "members": ["allUsers"]}]}'}),
    ("gcp:cloudrun/iamMember:IamMember", {"role": "roles/run.invoker", "member": "allUsers"}),
    (SERVICE, {"invokerIamDisabled": True}),
    ("gcp:cloudrun/service:Service", {"metadata": {"annotations": {"run.googleapis.com/invoker-iam-disabled": "true"}}}),
])
def test_public_invoker_violations(typ: str, props: dict[str, Any]) -> None:
    findings = run("cloud-run-no-public-invoker", [res(typ, "x", props)])
    assert len(findings) == 1 and findings[0].level == "mandatory"
    assert "roles/run.invoker to the Scheduler job's service account" in findings[0].message


def test_public_invoker_compliant_missing_unknown_and_override() -> None:
    ok = res("gcp:cloudrunv2/serviceIamMember:ServiceIamMember", "m", {"role": "roles/run.invoker",
                                                                       "member": "serviceAccount:s@p.iam.gserviceaccount.com"})
    unknown = res("gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding", "b", {"role": "roles/run.invoker", "members": UNKNOWN})
    unknown_policy = res("gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy", "p", {"policyData": UNKNOWN})
    assert run("cloud-run-no-public-invoker", [ok, unknown, unknown_policy, res(SERVICE, "s", {}), service()]) == []
    public = res("gcp:cloudrunv2/serviceIamMember:ServiceIamMember", "m", {"member": "allUsers"})
    assert run("cloud-run-no-public-invoker", [public], {"enforcementLevel": "advisory"})[0].level == "advisory"


# ------------------------------------------------------------------ no-primitive-roles

def test_no_primitive_roles() -> None:
    editor = res("gcp:projects/iAMMember:IAMMember", "e", {"role": "roles/editor", "member": "serviceAccount:s@p", "project": "p"})
    owner_policy = res("gcp:projects/iAMPolicy:IAMPolicy", "o",
                       {"policyData": '{"bindings":[{"role":"roles/owner","members":["user:a@b"]}]}'})
    findings = run("no-primitive-roles", [editor, owner_policy])
    assert [f.resource.name for f in findings if f.resource] == ["e", "o"]
    assert "roles/editor" in findings[0].message and "predefined role" in findings[0].message
    fine = res("gcp:projects/iAMMember:IAMMember", "f", {"role": "roles/datastore.user", "member": "serviceAccount:s@p"})
    unknown = res("gcp:projects/iAMMember:IAMMember", "u", {"role": UNKNOWN, "member": UNKNOWN})
    not_iam = res("gcp:storage/bucket:Bucket", "b", {"role": "roles/owner"})
    assert run("no-primitive-roles", [fine, unknown, not_iam, res("gcp:projects/iAMBinding:IAMBinding", "x", {})]) == []
    assert run("no-primitive-roles", [fine], {"forbiddenRoles": ["roles/datastore.user"]})


# ------------------------------------------------------------------ dedup-firestore-ttl

def test_firestore_ttl_compliant() -> None:
    named = service(env={"DEDUP_COLLECTION": "runs", "DEDUP_DATABASE": "dedup-db"})
    assert run("dedup-firestore-ttl", good_stack()) == []
    assert run("dedup-firestore-ttl", [job(), named, ttl_field(collection="runs", database="projects/p/databases/dedup-db")]) == []


def test_firestore_ttl_violations() -> None:
    missing = run("dedup-firestore-ttl", [job(), service()])
    assert len(missing) == 1 and "collection='scheduler_runs'" in missing[0].message and "ttlConfig={}" in missing[0].message
    wrong_db = run("dedup-firestore-ttl", [job(), service(env={"DEDUP_DATABASE": "dedup-db"}), ttl_field()])
    assert len(wrong_db) == 1 and "database='dedup-db'" in wrong_db[0].message
    no_ttl = {k: v for k, v in ttl_field().props.items() if k != "ttlConfig"}
    findings = run("dedup-firestore-ttl", [job(), service(), res(FIELD, "ttl", no_ttl)])
    assert len(findings) == 1 and findings[0].resource and findings[0].resource.type == FIELD


def test_firestore_ttl_service_without_dedup_env_but_called_by_a_job_counts() -> None:
    assert run("dedup-firestore-ttl", [job(), service(env={})])
    assert run("dedup-firestore-ttl", [service(env={})]) == [], "an unrelated service needs no TTL"


def test_firestore_ttl_unknown_values() -> None:
    assert run("dedup-firestore-ttl", [job(), service(env={"DEDUP_DATABASE": UNKNOWN}),  # type: ignore[dict-item]
                                       ttl_field(database="db")]) == []
    assert run("dedup-firestore-ttl", [job(), service(), ttl_field(database=UNKNOWN)]) == []


def test_firestore_ttl_config_expiry_field() -> None:
    assert run("dedup-firestore-ttl", good_stack(), {"expiryField": "expires"})
    assert run("dedup-firestore-ttl", [job(), service(), ttl_field(field="expires")], {"expiryField": "expires"}) == []


# ------------------------------------------------------------------ dedup-lease-covers-deadline

def test_lease_covers_deadline() -> None:
    assert run("dedup-lease-covers-deadline", good_stack()) == []
    short_lease = run("dedup-lease-covers-deadline", [job(), service(env={"DEDUP_LEASE_SECONDS": "60"}), ttl_field()])
    assert len(short_lease) == 1 and "DEDUP_LEASE_SECONDS to at least 300" in short_lease[0].message
    long_deadline = run("dedup-lease-covers-deadline", [job(attemptDeadline="600s"), service(env={"DEDUP_LEASE_SECONDS": "900"})])
    assert len(long_deadline) == 1 and "template.timeout to at least \"600s\"" in long_deadline[0].message
    bad_number = run("dedup-lease-covers-deadline", [service(env={"DEDUP_LEASE_SECONDS": "five"})])
    assert len(bad_number) == 1 and "not a number of seconds" in bad_number[0].message


def test_lease_defaults_and_unknowns() -> None:
    bare_service = res(SERVICE, "svc", {"uri": RUN_URL, "template": {"containers": [{"envs": [{"name": "DEDUP_X", "value": "1"}]}]}})
    bare_job = res(JOB, "job", {"httpTarget": {"uri": RUN_URL}})
    assert run("dedup-lease-covers-deadline", [bare_job, bare_service]) == []  # 300 >= 300 >= 180
    assert run("dedup-lease-covers-deadline", [job(attemptDeadline="600s"),
                                               service(env={"DEDUP_LEASE_SECONDS": "900"}, timeout=UNKNOWN)]) == []
    short = run("dedup-lease-covers-deadline", [job(attemptDeadline="600s"), service(timeout=UNKNOWN)])
    assert len(short) == 1 and "DEDUP_LEASE_SECONDS to at least 600" in short[0].message
    assert run("dedup-lease-covers-deadline", [job(), service(env={"DEDUP_LEASE_SECONDS": UNKNOWN})]) == []  # type: ignore[dict-item]


def test_lease_config_margin() -> None:
    assert run("dedup-lease-covers-deadline", good_stack(), {"leaseMarginSeconds": 30})


def test_pairing_by_property_dependency_with_two_services() -> None:
    pending = res(JOB, "job", {"attemptDeadline": "600s", "httpTarget": {"uri": UNKNOWN}},
                  deps={"httpTarget": ["urn:pulumi:s::p::gcp:cloudrunv2/service:Service::svc"]})
    other = res(SERVICE, "other", {"template": {"timeout": "900s"}})
    findings = run("dedup-lease-covers-deadline", [pending, other, service(uri=UNKNOWN)])
    assert len(findings) == 1 and "service svc" in findings[0].message and "only Cloud Run service" not in findings[0].message


# ------------------------------------------------------------------ dedup-retention-covers-retries

def test_retry_window_arithmetic() -> None:
    # Cloud Tasks/Scheduler example: min 10 s, max 300 s, 3 doublings -> 10, 20, 40, 80, 160, 240, 300 ...
    props = {"attemptDeadline": "60s", "retryConfig": {"retryCount": 5.0, "minBackoffDuration": "10s",
                                                       "maxBackoffDuration": "300s", "maxDoublings": 3.0}}
    assert job_retry_window_seconds(props) == (10 + 20 + 40 + 80 + 160) + 6 * 60
    assert job_retry_window_seconds({}) == 180  # one attempt, default deadline, no retries
    with_duration = {"attemptDeadline": "60s", "retryConfig": {"retryCount": 1.0, "maxRetryDuration": "7200s"}}
    assert job_retry_window_seconds(with_duration) == 7200 + 60
    assert job_retry_window_seconds({"retryConfig": {"retryCount": UNKNOWN}}) is None


def test_retention_covers_retries() -> None:
    retrying = job(retryConfig={"retryCount": 5.0, "maxBackoffDuration": "3600s"})
    assert run("dedup-retention-covers-retries", [retrying, service(), ttl_field()]) == []
    short = run("dedup-retention-covers-retries", [retrying, service(env={"DEDUP_RETENTION_SECONDS": "900"})])
    assert len(short) == 1 and "DEDUP_RETENTION_SECONDS to at least" in short[0].message
    assert short[0].resource and short[0].resource.type == JOB


def test_retention_unknowns_and_override() -> None:
    assert run("dedup-retention-covers-retries", [job(retryConfig=UNKNOWN), service(env={"DEDUP_RETENTION_SECONDS": "1"})]) == []
    assert run("dedup-retention-covers-retries", [job(), service(env={"DEDUP_RETENTION_SECONDS": UNKNOWN})]) == []  # type: ignore[dict-item]
    assert run("dedup-retention-covers-retries", good_stack(), {"marginSeconds": 10 ** 7})


@pytest.mark.parametrize("schedule", ["0 9 * * WED", "0 9 * * mon-fri", "0 0 1 JAN,JUL *", "*/5 * * * *"])
def test_day_and_month_names_are_plain_unix_cron(schedule: str) -> None:
    assert run("scheduler-job-unix-cron", [job(schedule=schedule)]) == []


@pytest.mark.parametrize("schedule", ["0 0 L * *", "0 0 * * 5#3", "0 0 ? * *", "0 0 15W * *", "H * * * *"])
def test_the_component_and_the_rule_refuse_the_same_extensions(schedule: str) -> None:
    from scheduler_dedup.infra.errors import DedupConfigError
    from scheduler_dedup.infra.settings import validate_schedule

    assert run("scheduler-job-unix-cron", [job(schedule=schedule)]), schedule
    with pytest.raises(DedupConfigError, match="extensions|not a valid"):
        validate_schedule(schedule)


def test_oidc_token_must_pass_the_handlers_own_caller_verification() -> None:
    checked = {"DEDUP_OIDC_AUDIENCE": RUN_URL, "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com"}
    assert run("scheduler-job-oidc-auth", [job(), service(env=checked)]) == []
    wrong = {"DEDUP_OIDC_AUDIENCE": "https://something-else.example", "DEDUP_ALLOWED_CALLERS": "other@p.iam.gserviceaccount.com"}
    messages = [f.message for f in run("scheduler-job-oidc-auth", [job(), service(env=wrong)])]
    assert any("DEDUP_OIDC_AUDIENCE" in m and "401" in m for m in messages), messages
    assert any("DEDUP_ALLOWED_CALLERS" in m and "403" in m for m in messages), messages
    # verification off (only one variable set) or values unknown during preview: nothing to compare
    assert run("scheduler-job-oidc-auth", [job(), service(env={"DEDUP_OIDC_AUDIENCE": "x"})]) == []
    assert run("scheduler-job-oidc-auth", [job(), service(env={"DEDUP_OIDC_AUDIENCE": UNKNOWN,
                                                               "DEDUP_ALLOWED_CALLERS": UNKNOWN})]) == []


def trailing_slash_job() -> Resource:
    return job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "sched@p.iam.gserviceaccount.com",
                                                         "audience": RUN_URL + "/"}})


def test_an_audience_spelt_differently_from_the_handlers_is_a_mandatory_finding() -> None:
    """The handler compares audiences exactly (as google-auth does): 'https://svc/' != 'https://svc', 401 on every run."""
    env = {"DEDUP_OIDC_AUDIENCE": RUN_URL, "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com",
           "DEDUP_TRUST_CLOUD_RUN_IAM": "true"}
    [finding] = run("scheduler-job-oidc-auth", [trailing_slash_job(), service(env=env)])
    assert finding.level == "mandatory" and "DEDUP_OIDC_AUDIENCE" in finding.message and "401" in finding.message
    assert "exactly" in finding.message
    # Cloud Run's own gate accepts the slash form of its URL: without the handler's check there is nothing to flag
    assert run("scheduler-job-oidc-auth", [trailing_slash_job(), service()]) == []


def test_the_pack_applies_the_handlers_caller_rule() -> None:
    member = {"DEDUP_OIDC_AUDIENCE": RUN_URL, "DEDUP_ALLOWED_CALLERS": "serviceAccount:sched@p.iam.gserviceaccount.com"}
    assert run("scheduler-job-oidc-auth", [job(), service(env=member)]) == []
    user = {"DEDUP_OIDC_AUDIENCE": RUN_URL, "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com,user:alice@example.com"}
    [finding] = run("scheduler-job-oidc-auth", [job(), service(env=user)])
    assert "DEDUP_ALLOWED_CALLERS has 'user:alice@example.com'" in finding.message


def test_a_cloud_functions_target_needs_the_full_function_url_as_audience() -> None:
    fn = "https://us-central1-my-proj.cloudfunctions.net/export-report"
    origin_only = job(httpTarget={"uri": fn, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com",
                                                           "audience": "https://us-central1-my-proj.cloudfunctions.net"}})
    [finding] = run("scheduler-job-oidc-auth", [origin_only])
    assert f"to {fn!r}" in finding.message and "401" in finding.message
    for ok in ({"audience": fn}, {}):
        good = job(httpTarget={"uri": fn, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com", **ok}})
        assert run("scheduler-job-oidc-auth", [good]) == []


def generated_urls() -> list[str]:
    """Spellings people write for one service and its neighbours: slash, path, case, port, query, other host."""
    hosts = ["svc-abc-ew.a.run.app", "SVC-abc-ew.a.run.app", "other-xyz-uc.a.run.app",
             "us-central1-p.cloudfunctions.net", "api.example.com"]
    tails = ["", "/", "//", "/run", "/run/", "?x=1", ":443", ":443/"]
    return [f"{scheme}://{host}{tail}" for scheme in ("https", "http") for host in hosts for tail in tails]


def test_the_handler_and_the_pack_decide_the_same_audiences() -> None:
    """For every pair (token audience, DEDUP_OIDC_AUDIENCE) of generated URLs, the handler admits the token exactly
    when the pack reports no DEDUP_OIDC_AUDIENCE mismatch."""
    import base64
    import json
    import time

    from scheduler_dedup.handler.caller_auth import CallerAuthSettings, OidcVerifier

    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    email = "sched@p.iam.gserviceaccount.com"
    urls = generated_urls()
    compared = 0
    for accepted in urls[::3]:
        env = {"DEDUP_OIDC_AUDIENCE": accepted, "DEDUP_ALLOWED_CALLERS": email, "DEDUP_TRUST_CLOUD_RUN_IAM": "true"}
        settings = CallerAuthSettings.from_env(env)
        assert settings is not None
        verifier = OidcVerifier(settings)  # trust mode's premise is not this test's subject
        for audience in urls:
            claims = {"aud": audience, "email": email, "email_verified": True, "iss": "https://accounts.google.com",
                      "exp": int(time.time()) + 600, "iat": int(time.time())}
            token = f"{b64({'alg': 'RS256', 'kid': 'k'})}.{b64(claims)}.SIGNATURE_REMOVED_BY_GOOGLE"
            handler_admits = verifier.check({"Authorization": f"Bearer {token}"}) is None
            scheduled = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": email, "audience": audience}})
            findings = run("scheduler-job-oidc-auth", [scheduled, service(env=env)], {"allowedAudiences": urls})
            pack_admits = not any("DEDUP_OIDC_AUDIENCE" in f.message for f in findings)
            assert handler_admits == pack_admits, (audience, accepted)
            compared += 1
    assert compared == len(urls) * len(urls[::3])


FUNCTION_URL = "https://nightly-abc.a.run.app"


def gen2_function(env: dict[str, str], timeout_seconds: int | None = 540) -> Resource:
    config: dict[str, Any] = {"environmentVariables": env, "uri": FUNCTION_URL}
    if timeout_seconds is not None:
        config["timeoutSeconds"] = timeout_seconds
    return res("gcp:cloudfunctionsv2/function:Function", "fn", {"url": FUNCTION_URL, "serviceConfig": config})


def v1_service(env: dict[str, str], timeout_seconds: int = 900) -> Resource:
    return res("gcp:cloudrun/service:Service", "v1", {
        "template": {"spec": {"timeoutSeconds": timeout_seconds, "containers": [
            {"image": "sidecar", "envs": [{"name": "OTHER", "value": "x"}]},
            {"image": "handler", "envs": [{"name": k, "value": v} for k, v in env.items()]}]}},
        "statuses": [{"url": FUNCTION_URL}]})


@pytest.mark.parametrize("make", [gen2_function, v1_service])
def test_stack_rules_see_the_handler_on_cloud_functions_gen2_and_cloud_run_v1(make: Any) -> None:
    """The handler is a functions-framework target: deployed as a gen2 function or a v1 service, the same mistakes count."""
    bad = make({"DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "60", "DEDUP_RETENTION_SECONDS": "60"})
    scheduler = job(httpTarget={"uri": FUNCTION_URL, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com"}},
                    retryConfig={"retryCount": 5})
    stack = [scheduler, bad]
    assert run("dedup-lease-covers-deadline", stack), "lease 60 s < request timeout"
    assert run("dedup-firestore-ttl", stack), "no TTL field for scheduler_runs"
    assert run("dedup-retention-covers-retries", stack), "retention 60 s < retry window"
    good = make({"DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "900", "DEDUP_RETENTION_SECONDS": "604800"})
    fine = [scheduler, good, ttl_field()]
    for rule in ("dedup-lease-covers-deadline", "dedup-firestore-ttl", "dedup-retention-covers-retries"):
        assert run(rule, fine) == [], rule


def test_gen2_function_default_timeout_is_60_seconds() -> None:
    fn = gen2_function({"DEDUP_JOB": "jobs:run", "DEDUP_LEASE_SECONDS": "300"}, timeout_seconds=None)
    scheduler = job(httpTarget={"uri": FUNCTION_URL, "oidcToken": {"serviceAccountEmail": "s@p.iam.gserviceaccount.com"}})
    messages = [f.message for f in run("dedup-lease-covers-deadline", [scheduler, fn])]
    assert any("60" in m for m in messages), messages  # 60 s timeout < 180 s attempt deadline


@pytest.mark.parametrize("typ", ["gcp:projects/iAMMember:IAMMember", "gcp:projects/iAMBinding:IAMBinding",
                                 "gcp:folder/iAMMember:IAMMember", "gcp:organizations/iAMBinding:IAMBinding"])
def test_a_project_level_public_invoker_is_caught(typ: str) -> None:
    props: dict[str, Any] = {"project": "p", "role": "roles/run.invoker"}
    props.update({"member": "allUsers"} if typ.endswith("IAMMember") else {"members": ["allUsers"]})
    assert run("cloud-run-no-public-invoker", [res(typ, "public", props)])
    props["role"] = "roles/logging.viewer"  # another role for allUsers is not this rule's concern
    assert run("cloud-run-no-public-invoker", [res(typ, "public", props)]) == []


@pytest.mark.parametrize("zone", ["Factory", "localtime", "posixrules", "Mars/Olympus", "../etc/passwd", ""])
def test_non_zones_are_refused_by_the_rule_and_the_component(zone: str) -> None:
    from scheduler_dedup.infra.errors import DedupConfigError
    from scheduler_dedup.infra.settings import validate_time_zone

    assert run("scheduler-job-unix-cron", [job(timeZone=zone)]), zone
    with pytest.raises(DedupConfigError):
        validate_time_zone(zone)


def test_attempt_deadline_without_a_unit_is_refused() -> None:
    (finding,) = run("scheduler-attempt-deadline", [job(attemptDeadline="180")])
    assert "no unit" in finding.message and '"180s"' in finding.message
    assert run("scheduler-attempt-deadline", [job(attemptDeadline="180s")]) == []


def test_a_ttl_field_in_another_project_does_not_count() -> None:
    svc = service(env={"DEDUP_COLLECTION": "scheduler_runs", "GOOGLE_CLOUD_PROJECT": "p1"})
    assert run("dedup-firestore-ttl", [job(), svc, ttl_field(project="some-other-project")])
    assert run("dedup-firestore-ttl", [job(), svc, ttl_field(project="p1")]) == []
    assert run("dedup-firestore-ttl", [job(), svc, ttl_field()]) == []  # provider's project


def test_the_handlers_downstream_audience_must_be_one_the_target_accepts() -> None:
    fn = "https://us-central1-my-proj.cloudfunctions.net/export-report"
    base = {"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": fn}
    assert run("dedup-target-audience", [service(env=base)]) == []
    assert run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET_AUDIENCE": fn})]) == []
    [finding] = run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET_AUDIENCE":
                                                              "https://us-central1-my-proj.cloudfunctions.net"})])
    assert "DEDUP_TARGET_AUDIENCE" in finding.message and f"use {fn!r}" in finding.message
    [bare] = run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET": "https://r-p.cloudfunctions.net"})])
    assert "names no function" in bare.message
    assert run("dedup-target-audience", [service(env={**base, "DEDUP_TARGET_AUDIENCE": UNKNOWN})]) == []


# ------------------------------------------------------------------ fail closed on unreadable fields

def public_config_job(min_backoff: str) -> Resource:
    return job(retryConfig={"minBackoffDuration": min_backoff, "maxBackoffDuration": "0s", "maxRetryDuration": "3600s"})


def test_an_unreadable_duration_is_a_mandatory_finding_and_the_rest_is_still_checked() -> None:
    """'1m' is not a duration Scheduler accepts ("seconds ending in 's'"): the mandatory rule says so, and still finds
    that a 600 s retention cannot cover maxRetryDuration 3600 s."""
    stack = [public_config_job("1m"), service(env={"DEDUP_RETENTION_SECONDS": "600"})]
    messages = [f.message for f in run("dedup-retention-covers-retries", stack)]
    assert all(f.level == "mandatory" for f in run("dedup-retention-covers-retries", stack))
    assert any("retryConfig.minBackoffDuration '1m' is not a duration in seconds" in m and '"180s"' in m
               for m in messages), messages
    assert any("DEDUP_RETENTION_SECONDS=600" in m and "at least 3780s" in m for m in messages), messages
    readable = [f.message for f in run("dedup-retention-covers-retries",
                                       [public_config_job("60s"), service(env={"DEDUP_RETENTION_SECONDS": "600"})])]
    assert len(readable) == 1 and "retry window 3780s" in readable[0]


def test_no_message_quotes_a_default_as_if_the_user_wrote_it() -> None:
    unreadable = " | ".join(f.message for f in run("scheduler-retry-config", [public_config_job("1m")]))
    assert "5s" not in unreadable and "'1m'" in unreadable
    [above] = [f.message for f in run("scheduler-retry-config", [public_config_job("60s")]) if "above" in f.message]
    assert "minBackoffDuration 60s is above maxBackoffDuration 0s" in above
    only_min = job(retryConfig={"minBackoffDuration": "7200s"})
    [defaulted] = run("scheduler-retry-config", [only_min])
    assert "maxBackoffDuration 3600s (Scheduler's default)" in defaulted.message
    margin = [f.message for f in run("scheduler-attempt-deadline-margin",
                                     [job(attemptDeadline=None), service(timeout=None)])]
    assert margin == [] or all("default" in m for m in margin)
    lease = [f.message for f in run("dedup-lease-covers-deadline", [job(attemptDeadline="3m"), service()])]
    assert any("attemptDeadline '3m' is not a duration" in m for m in lease), lease
    [short] = [f.message for f in run("dedup-lease-covers-deadline", [job(), service(timeout="600s")])]
    assert "DEDUP_LEASE_SECONDS=300 (the handler's default) is shorter than the request timeout 600s" in short
    [unset] = [f.message for f in run("dedup-lease-covers-deadline",
                                      [job(), service(env={"DEDUP_LEASE_SECONDS": "100"}, timeout=None)])]
    assert "300s (the platform's default)" in unset


# ------------------------------------------------------------------ crash recovery

def test_retries_that_end_before_a_crashed_attempts_lease_are_a_mandatory_finding() -> None:
    """retryCount 3 with Scheduler's backoff defaults retries at +5, +10, +20 s; a 300 s lease answers 409 to all."""
    crashed = job(retryConfig={"retryCount": 3})
    [finding] = run("dedup-retries-outlast-lease", [crashed, service()])
    assert finding.level == "mandatory"
    assert "retries 5, 10, 20 s apart (35s in all)" in finding.message
    assert "DEDUP_LEASE_SECONDS=300 (the handler's default)" in finding.message and "409" in finding.message
    assert 'minBackoffDuration to at least "43s"' in finding.message
    [none] = run("dedup-retries-outlast-lease", [job(), service()])
    assert "retryCount 0 (Scheduler's default): no retry" in none.message
    spanning = job(retryConfig={"retryCount": 5, "minBackoffDuration": "15s"})
    assert run("dedup-retries-outlast-lease", [spanning, service()]) == []
    unreadable = job(retryConfig={"retryCount": 5, "minBackoffDuration": "15 seconds"})
    [bad] = run("dedup-retries-outlast-lease", [unreadable, service()])
    assert "'15 seconds'" in bad.message and "cannot be checked" in bad.message
    assert run("dedup-retries-outlast-lease", [job(retryConfig=UNKNOWN), service()]) == []


def test_a_schedule_with_no_fire_time_ahead_is_a_mandatory_finding() -> None:
    [finding] = run("scheduler-job-unix-cron", [job(schedule="0 0 31 2 *")])
    assert finding.level == "mandatory" and "never fires" in finding.message and "schedule" in finding.message
    assert run("scheduler-job-unix-cron", [job(schedule="0 0 29 2 *")]) == []


def test_an_empty_audience_is_the_target_uri() -> None:
    empty = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "sched@p.iam.gserviceaccount.com",
                                                          "audience": ""}})
    assert run("scheduler-job-oidc-auth", [empty, service()]) == []


def _with_cpu(resources: Any) -> Resource:
    envs = [{"name": "DEDUP_COLLECTION", "value": "scheduler_runs"}]
    container: dict[str, Any] = {"image": "i", "envs": envs}
    if resources is not None:
        container["resources"] = resources
    return res(SERVICE, "svc", {"uri": RUN_URL, "template": {"timeout": "300s", "containers": [container]}})


@pytest.mark.parametrize(("resources", "flagged"), [
    (None, True),  # Cloud Run's default: CPU only during requests
    ({"cpuIdle": True}, True),
    ({"startupCpuBoost": True}, True),  # resources set, cpuIdle unset: pulumi-gcp defaults it to true
    ({"cpuIdle": False}, False),
    ({"cpuIdle": UNKNOWN}, False),  # preview: cannot tell yet
])
def test_a_dedup_service_without_cpu_always_allocated_is_flagged_advisory(resources: Any, flagged: bool) -> None:
    findings = run("dedup-cpu-always-allocated", [job(), _with_cpu(resources)])
    assert bool(findings) is flagged, findings
    if flagged:
        assert findings[0].level == "advisory" and "cpuAlwaysAllocated" in findings[0].message
    other = res(SERVICE, "web", {"uri": "https://web-x.a.run.app", "template": {"containers": [{"image": "i"}]}})
    assert run("dedup-cpu-always-allocated", [other]) == [], "a service that is not the handler is not checked"


# ------------------------------------------------------------------ dedup-handler-settings

HANDLER_ENV = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run"}


def test_handler_settings_pass_a_complete_env_and_judge_only_dedup_services() -> None:
    both = {**HANDLER_ENV, "DEDUP_OIDC_AUDIENCE": RUN_URL, "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com"}
    assert run("dedup-handler-settings", [service(HANDLER_ENV), job()]) == []
    assert run("dedup-handler-settings", [service(both)]) == []
    # a service without DEDUP_* variables is not the handler, even when a job calls it
    assert run("dedup-handler-settings", [service({"PORT": "8080"}), job()]) == []


@pytest.mark.parametrize(("env", "named"), [
    ({"DEDUP_OIDC_AUDIENCE": RUN_URL}, "DEDUP_ALLOWED_CALLERS"),
    ({"DEDUP_LEASE_SECONDS": "0"}, "DEDUP_LEASE_SECONDS"),
    ({"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "http://plain.example.com"}, "DEDUP_TARGET"),
])
def test_handler_settings_report_the_handlers_refusal(env: dict[str, str], named: str) -> None:
    findings = run("dedup-handler-settings", [service({**HANDLER_ENV, **env})])
    assert len(findings) == 1 and findings[0].level == "mandatory"
    assert named in findings[0].message and "would refuse to start" in findings[0].message


def test_handler_settings_unknown_values_pass() -> None:
    """Preview: a value that is an output of another resource (or the whole list) is not judged."""
    partner_unknown = {**HANDLER_ENV, "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com",
                       "DEDUP_OIDC_AUDIENCE": UNKNOWN}
    target_type_unknown = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_TARGET_TYPE": UNKNOWN, "DEDUP_TARGET": UNKNOWN}
    whole = res(SERVICE, "svc", {"uri": RUN_URL, "template": {"containers": [{"image": "i", "envs": UNKNOWN}]}})
    assert run("dedup-handler-settings", [service(partner_unknown)]) == []  # type: ignore[arg-type]
    assert run("dedup-handler-settings", [service(target_type_unknown)]) == []  # type: ignore[arg-type]
    assert run("dedup-handler-settings", [whole]) == []
    # an unknown value hides no refusal of a known one
    lease_zero = {**partner_unknown, "DEDUP_LEASE_SECONDS": "0"}
    assert [f.rule for f in run("dedup-handler-settings", [service(lease_zero)])] == ["dedup-handler-settings"]  # type: ignore[arg-type]
