"""The Cloud Scheduler job's rules (policies/rules/scheduler.py) on engine-shaped (camelCase) properties: compliant,
violating, missing/unknown, and config override."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_dedup.policies.reading.model import UNKNOWN, Resource
from scheduler_dedup.policies.rules import RULES_BY_NAME, evaluate
from scheduler_dedup.handler.schedule.cron.accepted import groc_to_unix_cron

from .conftest import JOB, RUN_URL, SERVICE, job, public_config_job, res, run, service


CUSTOM_AUD = "https://scheduler-dedup.invalid/projects/p/locations/r/services/svc"


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


@pytest.mark.parametrize("schedule", ["0 9 * * WED", "0 9 * * mon-fri", "0 0 1 JAN,JUL *", "*/5 * * * *"])
def test_day_and_month_names_are_plain_unix_cron(schedule: str) -> None:
    assert run("scheduler-job-unix-cron", [job(schedule=schedule)]) == []


@pytest.mark.parametrize("schedule", ["0 0 L * *", "0 0 * * 5#3", "0 0 ? * *", "0 0 15W * *", "H * * * *"])
def test_the_component_and_the_rule_refuse_the_same_extensions(schedule: str) -> None:
    from scheduler_dedup.infra.errors import DedupConfigError
    from scheduler_dedup.infra.job.settings import validate_schedule

    assert run("scheduler-job-unix-cron", [job(schedule=schedule)]), schedule
    with pytest.raises(DedupConfigError, match="extensions|not a valid"):
        validate_schedule(schedule)


@pytest.mark.parametrize("zone", ["Factory", "localtime", "posixrules", "Mars/Olympus", "../etc/passwd", ""])
def test_non_zones_are_refused_by_the_rule_and_the_component(zone: str) -> None:
    from scheduler_dedup.infra.errors import DedupConfigError
    from scheduler_dedup.infra.job.settings import validate_time_zone

    assert run("scheduler-job-unix-cron", [job(timeZone=zone)]), zone
    with pytest.raises(DedupConfigError):
        validate_time_zone(zone)


def test_a_schedule_with_no_fire_time_ahead_is_a_mandatory_finding() -> None:
    [finding] = run("scheduler-job-unix-cron", [job(schedule="0 0 31 2 *")])
    assert finding.level == "mandatory" and "never fires" in finding.message and "schedule" in finding.message
    assert run("scheduler-job-unix-cron", [job(schedule="0 0 29 2 *")]) == []


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

    from scheduler_dedup.handler.callers.oidc import OidcVerifier
    from scheduler_dedup.handler.callers.oidc_settings import CallerAuthSettings

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


def test_an_empty_audience_is_the_target_uri() -> None:
    empty = job(httpTarget={"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "sched@p.iam.gserviceaccount.com",
                                                          "audience": ""}})
    assert run("scheduler-job-oidc-auth", [empty, service()]) == []


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


def test_attempt_deadline_without_a_unit_is_refused() -> None:
    (finding,) = run("scheduler-attempt-deadline", [job(attemptDeadline="180")])
    assert "no unit" in finding.message and '"180s"' in finding.message
    assert run("scheduler-attempt-deadline", [job(attemptDeadline="180s")]) == []


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


# ------------------------------------------------------------------ fail closed on unreadable fields

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


# ------------------------------------------------------------------ preview's truths about Scheduler (one good, one bad each)

#: The component's default retries with a 600 s attempt deadline: 6 attempts and waits 30..480 s, 4530 s in all.
COMPONENT_RETRIES = {"retryCount": 5, "minBackoffDuration": "30s", "maxBackoffDuration": "3600s", "maxDoublings": 5}


def test_runs_that_reach_the_next_fire_time_are_an_advisory_naming_both_numbers() -> None:
    [bad] = run("scheduler-runs-overlap", [job(schedule="*/5 * * * *", attemptDeadline="600s",
                                               retryConfig=COMPONENT_RETRIES)])
    assert bad.level == "advisory" and "300 s apart" in bad.message and "4530 s" in bad.message
    assert "600 s attempt deadline" in bad.message
    assert run("scheduler-runs-overlap", [job(schedule="0 */2 * * *", attemptDeadline="600s",
                                              retryConfig=COMPONENT_RETRIES)]) == []
    assert run("scheduler-runs-overlap", [job(schedule=UNKNOWN)]) == []


def test_a_schedule_form_the_cron_page_leaves_open_is_an_advisory() -> None:
    [bad] = run("scheduler-schedule-unsettled", [job(schedule="0 0 */2 * 1")])
    assert bad.level == "advisory" and "'1-31/2'" in bad.message
    assert run("scheduler-schedule-unsettled", [job(schedule="0 0 * * 1"), job(schedule="0 0 * * 7-7")]) == []


def test_a_time_zone_alias_is_an_advisory_and_a_fixed_offset_abbreviation_mandatory() -> None:
    [alias] = run("scheduler-time-zone-canonical", [job(timeZone="US/Eastern")])
    assert alias.level == "advisory" and "'America/New_York'" in alias.message
    assert run("scheduler-time-zone-canonical", [job(timeZone="America/New_York")]) == []
    [fixed] = run("scheduler-time-zone-fixed-offset", [job(timeZone="EST")])
    assert fixed.level == "mandatory" and "America/New_York" in fixed.message and "'Etc/GMT+5'" in fixed.message
    assert run("scheduler-time-zone-fixed-offset", [job(timeZone="Etc/GMT+5"), job(timeZone="UTC")]) == []


def test_a_job_region_scheduler_lacks_is_mandatory_with_the_nearest_spelling() -> None:
    [bad] = run("scheduler-job-location", [job(region="europe-west99")])
    assert bad.level == "mandatory" and "did you mean 'europe-west9'?" in bad.message
    assert run("scheduler-job-location", [job(region="europe-west1"), job(), job(region=UNKNOWN)]) == []


def test_a_job_name_scheduler_refuses_is_mandatory_naming_the_characters() -> None:
    """``nightly.report`` and a 501-character name passed the pack; Scheduler refuses both at ``pulumi up``."""
    [dotted] = run("scheduler-job-name", [job(name="nightly.report")])
    assert dotted.level == "mandatory" and "'.'" in dotted.message and "'nightly-report'" in dotted.message
    [long] = run("scheduler-job-name", [job(name="a" * 501)])
    assert "501 characters" in long.message
    assert run("scheduler-job-name", [job(name="nightly_report-2"), job(name="a" * 500), job(), job(name=UNKNOWN)]) == []


def test_an_oidc_account_of_another_project_is_mandatory() -> None:
    token = {"uri": RUN_URL, "oidcToken": {"serviceAccountEmail": "dedup-scheduler@other-proj.iam.gserviceaccount.com"}}
    [bad] = run("scheduler-oidc-account-project", [job(project="my-proj", httpTarget=token)])
    assert bad.level == "mandatory" and "within the same project as the job" in bad.message
    token["oidcToken"] = {"serviceAccountEmail": "dedup-scheduler@my-proj.iam.gserviceaccount.com"}
    assert run("scheduler-oidc-account-project", [job(project="my-proj", httpTarget=token)]) == []
    assert run("scheduler-oidc-account-project", [job()]) == []  # no project written: the provider's, not judged
