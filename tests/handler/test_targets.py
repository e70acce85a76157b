"""Proxy targets over real HTTP: real handler processes on the real emulator, local fakes of the Google APIs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler_dedup.handler import ConfigError, TargetSettings
from scheduler_dedup.handler.core.safe_text import shown_url

from .conftest import Harness, deliver, scheduler_headers
from .fake_google import FakeGoogle
from tests.paths import ROOT

T = "2026-10-16T12:00:00Z"
WORKFLOW = "projects/p1/locations/us-central1/workflows/wf"
JOB = "projects/p1/locations/us-central1/jobs/nightly-job"
TRIGGER = "projects/p1/locations/us-central1/triggers/nightly-build"


@pytest.fixture()
def fake() -> Iterator[FakeGoogle]:
    server = FakeGoogle().start()
    yield server
    server.stop()


#: The handler's timeout on each call to the fake: only a "hang" fault waits it out, and every other call
#: must be answered within it, which a loaded machine can take more than a second to do.
TARGET_TIMEOUT_SECONDS = 5


def target_env(fake: FakeGoogle, kind: str) -> dict[str, str]:
    target = {"workflows": WORKFLOW, "cloud_run_job": JOB, "cloud_build_trigger": TRIGGER,
              "http": f"{fake.url}/hook"}[kind]
    return {"DEDUP_TARGET_TYPE": kind, "DEDUP_TARGET": target, "DEDUP_WORKFLOWS_API": fake.url,
            "DEDUP_RUN_API": fake.url, "DEDUP_CLOUD_BUILD_API": fake.url, "DEDUP_TARGET_AUTH": "none",
            "DEDUP_TARGET_TIMEOUT_SECONDS": str(TARGET_TIMEOUT_SECONDS)}


def downstream_executions(fake: FakeGoogle, kind: str) -> int:
    """Executions the downstream actually started (what a second start would duplicate)."""
    return {"workflows": len(fake.workflow_executions), "cloud_run_job": len(fake.job_executions),
            "cloud_build_trigger": len(fake.builds), "http": len(fake.hook_executions)}[kind]


TARGETS = ["workflows", "cloud_run_job", "cloud_build_trigger", "http"]
#: Targets that look for an earlier execution before starting one.
CHECKING_TARGETS = ["workflows", "cloud_run_job", "cloud_build_trigger"]


def test_workflows_starts_one_execution_with_the_run_in_its_argument(harness: Harness, fake: FakeGoogle) -> None:
    server = harness.server(**target_env(fake, "workflows"))
    first = deliver(server.url, scheduler_headers("nightly", T))
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["status"] == "processed"
    run_id = body["run_id"]
    [post] = fake.posts()
    assert post.path == f"/v1/{WORKFLOW}/executions"
    argument = json.loads(post.body["argument"])
    assert argument["run_id"] == run_id and argument["job_name"] == "nightly"
    assert argument["schedule_time"] == T and len(argument["attempt_id"]) == 32
    assert post.body["labels"] == {"dedup_run_id": run_id[:63]}
    [listed] = fake.gets("/executions")
    assert listed.query["filter"] == [f'labels.dedup_run_id="{run_id[:63]}"']
    assert body["result"] == {"target": "workflows", "execution": fake.workflow_executions[0]["name"],
                              "status_code": 200, "existing": False}
    assert harness.records()[run_id]["result"] == body["result"]

    second = deliver(server.url, scheduler_headers("nightly", T))
    assert second.json()["status"] == "duplicate"
    assert len(fake.posts()) == 1


def test_cloud_run_job_runs_once_with_the_run_id_env_override(harness: Harness, fake: FakeGoogle) -> None:
    server = harness.server(**target_env(fake, "cloud_run_job"))
    body = deliver(server.url, scheduler_headers("nightly", T)).json()
    assert body["status"] == "processed", body
    [post] = fake.posts()
    assert post.path == f"/v2/{JOB}:run"
    # Without DEDUP_SCHEDULE the handler knows no previous fire time: only the interval's end is passed on.
    assert post.body == {"overrides": {"containerOverrides": [{"env": [
        {"name": "DEDUP_RUN_ID", "value": body["run_id"]}, {"name": "DEDUP_SCHEDULE_TIME", "value": T}]}]}}
    assert body["result"]["execution"] == fake.job_executions[0]["name"]
    assert body["result"]["operation"].startswith("projects/p1/locations/us-central1/operations/")
    assert deliver(server.url, scheduler_headers("nightly", T)).json()["status"] == "duplicate"
    assert len(fake.posts()) == 1


def test_cloud_build_trigger_runs_once_with_the_run_id_substitution(harness: Harness, fake: FakeGoogle) -> None:
    server = harness.server(**target_env(fake, "cloud_build_trigger"))
    body = deliver(server.url, scheduler_headers("nightly", T)).json()
    assert body["status"] == "processed", body
    [post] = fake.posts()
    assert post.path == f"/v1/{TRIGGER}:run"
    assert post.body == {"projectId": "p1", "triggerId": "nightly-build",
                         "source": {"projectId": "p1", "substitutions": {"_DEDUP_RUN_ID": body["run_id"]}}}
    [build] = fake.builds
    assert body["result"] == {"target": "cloud_build_trigger", "operation": body["result"]["operation"],
                              "build": build["name"], "build_status": "QUEUED", "status_code": 200, "existing": False}
    assert body["result"]["operation"].startswith("projects/p1/locations/us-central1/operations/")
    # The existence check: the trigger's id first (builds carry buildTriggerId, not the name), then its builds
    # since the schedule time less the clock skew allowance.
    [got_trigger] = fake.gets(f"/v1/{TRIGGER}")
    [listed] = fake.gets("/builds")
    assert listed.path == "/v1/projects/p1/locations/us-central1/builds"
    assert listed.query["filter"] == [f'trigger_id="{build["buildTriggerId"]}" AND create_time>="2026-10-16T11:55:00Z"']
    assert deliver(server.url, scheduler_headers("nightly", T)).json()["status"] == "duplicate"
    assert len(fake.posts()) == 1


#: A daily 09:00 run in Berlin on the day clocks go forward (29 March 2026): its interval is 23 hours long.
DST_RUN, DST_PREVIOUS = "2026-03-29T07:00:00Z", "2026-03-28T08:00:00Z"


@pytest.mark.parametrize("kind", TARGETS)
def test_each_target_receives_the_runs_interval(harness: Harness, fake: FakeGoogle, kind: str) -> None:
    """The previous fire time, on the job's wall clock across a DST change, reaches the execution: the Cloud Run job's
    env, the Workflows argument, the Cloud Build substitutions the trigger declares, the HTTP target's body."""
    fake.trigger_substitutions = {"_DEDUP_RUN_ID": "", "_DEDUP_SCHEDULE_TIME": "", "_DEDUP_PREVIOUS_SCHEDULE_TIME": ""}
    server = harness.server(**target_env(fake, kind), DEDUP_SCHEDULE="0 9 * * *", DEDUP_TIME_ZONE="Europe/Berlin")
    body = deliver(server.url, scheduler_headers("nightly", DST_RUN)).json()
    assert body["status"] == "processed", body
    [post] = fake.posts()
    if kind in ("workflows", "http"):
        passed = json.loads(post.body["argument"]) if kind == "workflows" else post.body
        passed = {"start": passed["previous_schedule_time"], "end": passed["schedule_time"]}
    elif kind == "cloud_run_job":
        env = {e["name"]: e["value"] for e in post.body["overrides"]["containerOverrides"][0]["env"]}
        passed = {"start": env["DEDUP_PREVIOUS_SCHEDULE_TIME"], "end": env["DEDUP_SCHEDULE_TIME"]}
    else:
        substitutions = post.body["source"]["substitutions"]
        passed = {"start": substitutions["_DEDUP_PREVIOUS_SCHEDULE_TIME"], "end": substitutions["_DEDUP_SCHEDULE_TIME"]}
    assert passed == {"start": DST_PREVIOUS, "end": DST_RUN}, post.body


def test_a_trigger_that_declares_no_interval_gets_only_the_run_id(harness: Harness, fake: FakeGoogle) -> None:
    """Under Cloud Build's default MUST_MATCH a substitution the build config does not use fails the build: a trigger
    that does not declare the interval's substitutions is not sent them."""
    server = harness.server(**target_env(fake, "cloud_build_trigger"), DEDUP_SCHEDULE="0 9 * * *")
    body = deliver(server.url, scheduler_headers("nightly", DST_RUN)).json()
    assert body["status"] == "processed", body
    [post] = fake.posts()
    assert post.body["source"]["substitutions"] == {"_DEDUP_RUN_ID": body["run_id"]}


def test_http_target_sends_the_idempotency_key_and_run(harness: Harness, fake: FakeGoogle) -> None:
    server = harness.server(**target_env(fake, "http"))
    body = deliver(server.url, scheduler_headers("nightly", T)).json()
    assert body["status"] == "processed", body
    [post] = fake.posts()
    assert post.headers["Idempotency-Key"] == body["run_id"]
    assert post.body == {"run_id": body["run_id"], "job_name": "nightly", "schedule_time": T,
                         "previous_schedule_time": None}  # the handler knows no schedule (DEDUP_SCHEDULE unset)
    assert "Authorization" not in post.headers  # DEDUP_TARGET_AUTH=none
    # The URL is shown as scheme, host and a hash of the rest: a webhook's path is its secret.
    assert body["result"] == {"target": "http", "url": shown_url(f"{fake.url}/hook"), "status_code": 200}
    assert deliver(server.url, scheduler_headers("nightly", T)).json()["status"] == "duplicate"
    assert len(fake.posts()) == 1


@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("fault", [500, 503, 429, "hang"])
def test_retryable_failure_releases_and_a_retry_calls_again(harness: Harness, fake: FakeGoogle, kind: str,
                                                            fault: Any) -> None:
    server = harness.server(**target_env(fake, kind))
    fake.fail_next(fault)
    first = deliver(server.url, scheduler_headers("flaky", T))
    assert first.status_code == 500, first.text
    assert first.json()["status"] == "released"
    [record] = harness.records().values()  # released: kept with the downstream's error, claimed again at once
    assert record["status"] == "released" and record["error"] == first.json()["error"] and record["releases"] == 1
    assert downstream_executions(fake, kind) == 0

    second = deliver(server.url, scheduler_headers("flaky", T))
    assert second.status_code == 200 and second.json()["status"] == "processed", second.text
    assert len(fake.posts()) == 2
    assert downstream_executions(fake, kind) == 1


@pytest.mark.parametrize("kind", TARGETS)
def test_auth_conflict_and_timeout_answers_release_the_run_for_a_retry(harness: Harness, fake: FakeGoogle,
                                                                       kind: str) -> None:
    """401/403 (an IAM grant still propagating after a deploy), 408 and 409 (a downstream @idempotent service
    still running this run id) must not lose the run: released, and the next delivery runs it."""
    server = harness.server(**target_env(fake, kind))
    for fault in (401, 403, 408, 409):
        job = f"answer-{fault}"
        fake.fail_next(fault)
        first = deliver(server.url, scheduler_headers(job, T))
        assert first.status_code == 500 and first.json()["status"] == "released", (fault, first.text)
        assert f"HTTP {fault}" in first.json()["error"]
        second = deliver(server.url, scheduler_headers(job, T))
        assert second.status_code == 200 and second.json()["status"] == "processed", (fault, second.text)
    # an execution started downstream holds its run until it ends (the run check records how); an HTTP call is done
    done = "completed" if kind == "http" else "running_downstream"
    assert harness.records() and all(r["status"] == done for r in harness.records().values())
    assert downstream_executions(fake, kind) == 4


@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("fault", [400, 404, 422])
def test_permanent_failure_is_recorded_failed_and_not_retried(harness: Harness, fake: FakeGoogle, kind: str,
                                                              fault: int) -> None:
    server = harness.server(**target_env(fake, kind))
    fake.fail_next(fault)
    first = deliver(server.url, scheduler_headers("broken", T))
    assert first.status_code == 200 and first.json()["status"] == "failed", first.text
    assert f"HTTP {fault}" in first.json()["error"]
    [record] = harness.records().values()
    assert record["status"] == "failed"

    again = deliver(server.url, scheduler_headers("broken", T))
    assert again.json()["status"] == "failed"
    assert len(fake.posts()) == 1


@pytest.mark.parametrize("kind", CHECKING_TARGETS)
def test_a_refused_existence_check_does_not_fail_the_run(harness: Harness, fake: FakeGoogle, kind: str) -> None:
    """A 403 on executions.list (no list permission) must still start the run, not record it failed."""
    server = harness.server(**target_env(fake, kind))
    fake.refuse_next_list(403)
    first = deliver(server.url, scheduler_headers("no-list", T))
    assert first.status_code == 200 and first.json()["status"] == "processed", first.text
    assert downstream_executions(fake, kind) == 1
    assert "existence_check_skipped" in server.log()


@pytest.mark.parametrize("kind", TARGETS)
def test_dropped_response_then_retry_starts_no_second_execution(harness: Harness, fake: FakeGoogle,
                                                                kind: str) -> None:
    server = harness.server(**target_env(fake, kind))
    fake.fail_next("drop")
    first = deliver(server.url, scheduler_headers("lossy", T))
    assert first.status_code == 500 and first.json()["status"] == "released", first.text
    assert downstream_executions(fake, kind) == 1  # it started; the handler never heard

    second = deliver(server.url, scheduler_headers("lossy", T))
    assert second.status_code == 200 and second.json()["status"] == "processed", second.text
    assert downstream_executions(fake, kind) == 1
    if kind == "http":
        # The proxy cannot look: it calls again with the same key and the endpoint deduplicates.
        assert [p.headers["Idempotency-Key"] for p in fake.posts()] == [first.json()["run_id"]] * 2
    else:
        assert len(fake.posts()) == 1  # found the execution; did not start another
        assert second.json()["result"]["existing"] is True
        name = (fake.workflow_executions or fake.job_executions or fake.builds)[0]["name"]
        key = "build" if kind == "cloud_build_trigger" else "execution"
        assert second.json()["result"][key] == name


def test_invalid_target_stops_the_handler_at_start_up(harness: Harness, fake: FakeGoogle) -> None:
    with pytest.raises(RuntimeError, match="DEDUP_TARGET="):
        harness.server(**{**target_env(fake, "workflows"), "DEDUP_TARGET": "wf"})


@pytest.mark.parametrize("env, variable", [
    ({"DEDUP_TARGET_TYPE": "pubsub"}, "DEDUP_TARGET_TYPE="),
    ({"DEDUP_TARGET_TYPE": "workflows"}, "DEDUP_TARGET is not set"),
    ({"DEDUP_TARGET_TYPE": "workflows", "DEDUP_TARGET": "projects/p/workflows/w"}, "DEDUP_TARGET="),
    ({"DEDUP_TARGET_TYPE": "cloud_run_job", "DEDUP_TARGET": WORKFLOW}, "DEDUP_TARGET="),
    ({"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "ftp://x/y"}, "DEDUP_TARGET="),
    ({"DEDUP_TARGET": "https://x"}, "DEDUP_TARGET_TYPE is python"),
    ({"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "https://x", "DEDUP_TARGET_TIMEOUT_SECONDS": "soon"},
     "DEDUP_TARGET_TIMEOUT_SECONDS="),
    ({"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "https://x", "DEDUP_TARGET_TIMEOUT_SECONDS": "0"},
     "DEDUP_TARGET_TIMEOUT_SECONDS="),
    ({"DEDUP_TARGET_TYPE": "workflows", "DEDUP_TARGET": WORKFLOW, "DEDUP_WORKFLOWS_API": "localhost"},
     "DEDUP_WORKFLOWS_API="),
    ({"DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "https://x", "DEDUP_TARGET_AUTH": "off"}, "DEDUP_TARGET_AUTH="),
])
def test_target_settings_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        TargetSettings.from_env(env)


def test_target_settings_defaults() -> None:
    settings = TargetSettings.from_env({"DEDUP_TARGET_TYPE": "workflows", "DEDUP_TARGET": WORKFLOW})
    assert settings.workflows_api == "https://workflowexecutions.googleapis.com"
    assert settings.run_api == "https://run.googleapis.com"
    assert settings.timeout_seconds == 30 and settings.auth == "google"
    assert TargetSettings.from_env({}).type == "python"


def test_http_target_sends_the_id_token_and_a_minting_failure_is_retryable(fake: FakeGoogle) -> None:
    import datetime as dt

    import requests

    from scheduler_dedup.handler import ScheduledRun
    from scheduler_dedup.handler.targets.call import TargetRetryableError
    from scheduler_dedup.handler.targets.http_url import HttpTarget

    run = ScheduledRun(run_id="a" * 64, job_name="j", schedule_time=dt.datetime(2026, 10, 16, 12, tzinfo=dt.timezone.utc),
                       project="p1", location="", attempt_id="b" * 32)
    HttpTarget(f"{fake.url}/hook", requests.Session(), lambda: "id-token-123", 1)(run)
    assert fake.posts()[0].headers["Authorization"] == "Bearer id-token-123"

    def no_metadata_server() -> str:
        raise OSError("metadata server unreachable")

    with pytest.raises(TargetRetryableError, match="ID token"):
        HttpTarget(f"{fake.url}/hook", requests.Session(), no_metadata_server, 1)(run)
    assert len(fake.posts()) == 1


def test_a_redirect_is_a_recorded_failure_never_followed(harness: Harness, fake: FakeGoogle) -> None:
    """requests would turn the POST into a body-less GET on 302 and report 200: the run must not count as done."""
    server = harness.server(**{**target_env(fake, "http"), "DEDUP_TARGET": f"{fake.url}/moved"})
    first = deliver(server.url, scheduler_headers("moved", T))
    assert first.status_code == 200 and first.json()["status"] == "failed", first.text
    assert "HTTP 302 redirect to '/landing'" in first.json()["error"]
    assert fake.gets("/landing") == [] and fake.hook_executions == {}
    [record] = harness.records().values()
    assert record["status"] == "failed"


@pytest.mark.parametrize(("kind", "target"), [
    ("http", "http://example.com/run"),
    ("workflows", "projects/p/locations/l/workflows/w#frag"),
    ("workflows", "projects/p/locations/l/workflows/w?x=1"),
    ("cloud_run_job", "projects/p/locations/l/jobs/../../x"),
    # a custom method after the id: the proxy would POST to .../jobs/j:run:run, another method than meant
    ("cloud_run_job", "projects/p/locations/l/jobs/j:run"),
    ("workflows", "projects/p/locations/l/workflows/w:cancel"),
    ("cloud_build_trigger", "projects/p/locations/l/triggers/t:run"),
    ("workflows", "projects/p/locations/l.x/workflows/w"),
])
def test_targets_that_would_leak_a_token_or_change_the_request_path_are_refused(kind: str, target: str) -> None:
    with pytest.raises(ConfigError, match="DEDUP_TARGET="):
        TargetSettings(type=kind, target=target)


def test_each_status_has_one_outcome_per_target_type() -> None:
    """The agreed table: 401, 403, 408, 409, 429 and 5xx are retried for every target type; 3xx, 400, 404 and 422
    (a downstream @idempotent service's permanent failure) record the run failed."""
    from scheduler_dedup.handler.targets.answers import TABLE, classify

    for kind in TABLE:
        assert classify(kind, 200).outcome == classify(kind, 204).outcome == "completed"
        for status in (401, 403, 408, 409, 429, 500, 502, 503, 504):
            assert classify(kind, status).outcome == "retry", (kind, status)
        for status in (301, 302, 400, 404, 405, 410, 422):
            assert classify(kind, status).outcome == "failed", (kind, status)


@pytest.mark.parametrize(("url", "audience"), [
    ("https://svc-abc-ew.a.run.app/run/now", "https://svc-abc-ew.a.run.app"),
    ("https://us-central1-my-proj.cloudfunctions.net/export-report", "https://us-central1-my-proj.cloudfunctions.net/export-report"),
    ("https://us-central1-my-proj.cloudfunctions.net/export-report/sub?x=1", "https://us-central1-my-proj.cloudfunctions.net/export-report"),
    ("https://api.example.com/hooks/run", "https://api.example.com"),
])
def test_http_target_mints_the_audience_its_host_kind_accepts(url: str, audience: str) -> None:
    """A Cloud Functions URL needs the full function URL as audience (the origin gets 401)."""
    from scheduler_dedup.handler.targets.build_target import build_target
    from scheduler_dedup.handler.targets.http_url import HttpTarget

    target = build_target(TargetSettings(type="http", target=url))
    assert isinstance(target, HttpTarget) and target.token is not None
    assert target.token.__self__.audience == audience  # type: ignore[attr-defined]
    explicit = build_target(TargetSettings(type="http", target=url, audience="https://custom.example"))
    assert explicit.token.__self__.audience == "https://custom.example"  # type: ignore[attr-defined,union-attr]


def test_a_cloud_functions_url_without_a_function_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="DEDUP_TARGET=.*FUNCTION"):
        TargetSettings(type="http", target="https://us-central1-my-proj.cloudfunctions.net/")


def test_the_reference_page_shows_the_downstream_table_of_every_target_type() -> None:
    from scheduler_dedup.handler.targets.answers import TABLE

    page = (ROOT / "docs" / "reference" / "http-answers.md").read_text()
    for kind, rows in TABLE.items():
        assert f"(`DEDUP_TARGET_TYPE={kind}`)" in page, kind
        for row in rows:
            assert f"| {row.statuses} | {row.outcome} | {row.reason} |" in page, (kind, row)


def test_cloud_build_lost_run_answer_then_a_retry_on_another_instance_finds_the_build(harness: Harness,
                                                                                      fake: FakeGoogle) -> None:
    """triggers.run started a build and the answer was lost; Scheduler's retry reaches a fresh instance (which
    resolves the trigger's id itself): it finds the build by its substitution and runs the trigger no more."""
    first_server = harness.server(**target_env(fake, "cloud_build_trigger"))
    fake.fail_next("drop")
    first = deliver(first_server.url, scheduler_headers("lossy-build", T))
    assert first.status_code == 500 and first.json()["status"] == "released", first.text
    assert len(fake.builds) == 1

    other_server = harness.server(**target_env(fake, "cloud_build_trigger"))
    second = deliver(other_server.url, scheduler_headers("lossy-build", T))
    assert second.status_code == 200 and second.json()["status"] == "processed", second.text
    result = second.json()["result"]
    assert result["existing"] is True and result["build"] == fake.builds[0]["name"]
    assert result["build_status"] == "QUEUED"
    assert len(fake.builds) == 1 and len(fake.posts()) == 1
    assert len(fake.gets(f"/v1/{TRIGGER}")) == 2  # each instance resolved the trigger's id once


def _run(run_id: str, schedule_time: str = T, manual: bool = False) -> Any:
    import datetime as dt

    from scheduler_dedup.handler import ScheduledRun

    return ScheduledRun(run_id=run_id, job_name="j", schedule_time=dt.datetime.fromisoformat(schedule_time),
                        project="p1", location="us-central1", attempt_id="b" * 32, manual=manual)


def test_cloud_build_scan_pages_past_other_runs_builds_and_ignores_older_ones(fake: FakeGoogle) -> None:
    """The run's build is found behind a full page of other runs' builds of the trigger; a build carrying the run
    id but created before the run's window (or by another trigger) is not this run's."""
    import requests

    from scheduler_dedup.handler.targets.cloud_build_trigger import CloudBuildTriggerTarget

    target = CloudBuildTriggerTarget(TRIGGER, requests.Session(), fake.url, 5)
    mine = target(_run("a" * 64))
    assert mine["existing"] is False
    for n in range(150):  # newer builds of other runs: the run's build is on the second page
        target(_run(f"{n:064x}"))
    assert len(fake.builds) == 151
    lists_before = len(fake.gets("/builds"))
    again = target(_run("a" * 64))
    assert again == {**again, "existing": True, "build": mine["build"]}
    assert len(fake.builds) == 151
    second_page = fake.gets("/builds")[lists_before:]
    assert [r.query.get("pageToken") for r in second_page] == [None, ["100"]]

    # A build of this run id created long before the schedule time is outside the window: not this run.
    fake.builds[0]["createTime"] = "2026-10-15T00:00:00.000000Z"
    assert target(_run("a" * 64))["existing"] is False
    assert len(fake.builds) == 152


def test_cloud_build_forced_run_looks_back_a_day_from_now() -> None:
    """A forced run's schedule time is not when it started, so its builds are looked for from a day before now."""
    import datetime as dt

    from scheduler_dedup.handler.targets.cloud_build_trigger import CloudBuildTriggerTarget

    now = dt.datetime(2026, 12, 1, 19, 0, tzinfo=dt.timezone.utc)
    target = CloudBuildTriggerTarget(TRIGGER, requests_session(), "https://cloudbuild.invalid", 5, clock=lambda: now)
    assert target._window_start(_run("a" * 64, "2026-12-01T21:00:00+00:00", manual=True)) == now - dt.timedelta(days=1)
    assert (target._window_start(_run("a" * 64, "2026-10-16T12:00:00+00:00"))
            == dt.datetime(2026, 10, 16, 11, 55, tzinfo=dt.timezone.utc))


def requests_session() -> Any:
    import requests

    return requests.Session()


@pytest.mark.parametrize("target", [
    "projects/p/locations/l/triggers",
    "projects/p/triggers/t",
    "projects/p/locations/l/triggers/t/../x",
    "projects/p/locations/l/jobs/j",
])
def test_a_cloud_build_target_that_is_not_a_trigger_name_is_refused(target: str) -> None:
    with pytest.raises(ConfigError, match="DEDUP_TARGET=.*Cloud Build trigger name"):
        TargetSettings(type="cloud_build_trigger", target=target)


def test_a_legacy_domain_scoped_project_id_is_still_accepted() -> None:
    for kind, name in (("workflows", "projects/example.com:proj/locations/us-central1/workflows/wf"),
                       ("cloud_build_trigger", "projects/example.com:proj/locations/global/triggers/nightly")):
        assert TargetSettings(type=kind, target=name, auth="none").target == name


def test_cloud_build_api_is_settable_and_checked() -> None:
    settings = TargetSettings.from_env({"DEDUP_TARGET_TYPE": "cloud_build_trigger", "DEDUP_TARGET": TRIGGER})
    assert settings.cloud_build_api == "https://cloudbuild.googleapis.com"
    with pytest.raises(ConfigError, match="DEDUP_CLOUD_BUILD_API="):
        TargetSettings.from_env({"DEDUP_TARGET_TYPE": "cloud_build_trigger", "DEDUP_TARGET": TRIGGER,
                                 "DEDUP_CLOUD_BUILD_API": "cloudbuild"})
