"""The offline check: the root program under mocks, the same rules, a table and an exit code.

Also proves the pack on a stack written by hand with raw pulumi-gcp resources
(policies/examples/raw_bad_program.py): each misconfiguration the component refuses is caught by a rule.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from rich.console import Console

from scheduler_dedup.infra.stack.mock_run import run_stack_config
from scheduler_dedup.policies.offline.check import check_program, check_stack_config, run_check
from scheduler_dedup.policies.rules import RULES
from tests.paths import ROOT, HELLO_JOB
from tests.infra.served import beyond_function_cpu

EXAMPLES = ROOT / "policies" / "examples"
BAD_CONFIGS = sorted(EXAMPLES.glob("bad-*.yaml"))


def _check(**kwargs: object) -> tuple[int, str]:
    console = Console(record=True, width=200)
    code = run_check(console=console, **kwargs)  # type: ignore[arg-type]
    return code, console.export_text()


@pytest.fixture(scope="module")
def raw_program() -> ModuleType:
    spec = importlib.util.spec_from_file_location("raw_bad_program", EXAMPLES / "raw_bad_program.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_stack_passes_every_mandatory_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code, text = _check(stack="example", config_file=None)
    assert code == 0, text
    assert "mandatory" not in text.replace("0 mandatory", "")


def test_component_defaults_and_good_examples_pass_every_rule(raw_program: ModuleType) -> None:
    """Our own defaults and every example documented as good pass every rule, advisory ones included."""
    every = {rule.name: "mandatory" for rule in RULES}  # advisory rules raised, so none is skipped
    # good-image.yaml: only what the component cannot default (project, image, entry point)
    for config in (EXAMPLES / "good-image.yaml", ROOT / "Pulumi.example.yaml", ROOT / "Pulumi.example-store.yaml"):
        assert beyond_function_cpu(check_stack_config(config, ROOT / "Pulumi.yaml")) == [], config
        assert beyond_function_cpu(check_stack_config(config, ROOT / "Pulumi.yaml", every)) == [], config
    # a job stack on the store stack, its StackReference answered from the store example's outputs
    store = run_stack_config(ROOT / "Pulumi.example-store.yaml")
    on_store = {"acme/scheduler-dedup/store": store.exports}
    assert beyond_function_cpu(check_stack_config(ROOT / "Pulumi.example-job-on-store.yaml", ROOT / "Pulumi.yaml",
                                                   every, on_store)) == []
    # the hand-written stack done right, alerting (a watchdog job and an alert policy) and CPU allocation included
    assert check_program(raw_program.good_program) == []
    assert check_program(raw_program.good_program, policy_config=every) == []


@pytest.mark.parametrize("change", [
    {"DEDUP_ALLOWED_CALLERS": "user:alice@example.com"},
    {"DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com"},
    {"DEDUP_OIDC_AUDIENCE": "https://handler-abc123xyz-uc.a.run.app"},
    {"GOOGLE_CLOUD_PROJECT": None},
    {"DEDUP_JOB": "jobs.run"},
    {"DEDUP_TARGET_TYPE": "workflows"},
    {"DEDUP_TARGET_TIMEOUT_SECONDS": "soon"},
    # a setting meant for tests, in a deployed stack
    {"DEDUP_JOB": None, "DEDUP_TARGET_TYPE": "http", "DEDUP_TARGET": "http://hooks.example.com/run",
     "DEDUP_TARGET_AUTH": "none"},
], ids=lambda change: ",".join(f"{k}={v}" for k, v in change.items()))
def test_a_hand_written_env_the_handler_refuses_at_start_up_fails_the_pack(raw_program: ModuleType,
                                                                        change: dict[str, str | None]) -> None:
    """Whatever stops the real handler at start-up is one mandatory dedup-handler-settings row with its message."""
    from scheduler_dedup.handler.service.app import build_handler_from_env
    from scheduler_dedup.handler.core.errors import ConfigError

    env = {k: v for k, v in {**raw_program.GOOD_ENV, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as refused:
        build_handler_from_env(env)  # refuses before it connects to Firestore or imports the job
    findings = check_program(lambda: raw_program.good_program(change))
    assert [(f.rule, f.level) for f in findings] == [("dedup-handler-settings", "mandatory")], findings
    assert str(refused.value) in findings[0].message


@pytest.mark.parametrize(("change", "named"), [
    ({"DEDUP_OIDC_CERTS_URL": "http://certs.example.com/certs"}, "DEDUP_OIDC_CERTS_URL points at http://"),
    ({"DEDUP_RUN_API": "https://run.example.com", "DEDUP_TRUST_CLOUD_RUN_IAM": "true",
      "DEDUP_SERVICE": "projects/p/locations/europe-west1/services/handler"},
     "DEDUP_RUN_API points at https://run.example.com"),
    ({"DEDUP_OIDC_CERTS_URL": "https://storage.googleapis.com/bucket/certs.json"},
     "DEDUP_OIDC_CERTS_URL points at https://storage.googleapis.com/bucket/certs.json"),
    ({"DEDUP_RUN_API": "https://storage.googleapis.com", "DEDUP_TRUST_CLOUD_RUN_IAM": "true",
      "DEDUP_SERVICE": "projects/p/locations/europe-west1/services/handler"},
     "DEDUP_RUN_API points at https://storage.googleapis.com"),
    ({"DEDUP_OIDC_CERTS_URL": "https://[www.googleapis.com/oauth2/v1/certs"}, "DEDUP_OIDC_CERTS_URL is not a URL"),
], ids=["certs-http", "trust-mode-run-api-not-google", "certs-on-storage", "trust-mode-run-api-on-storage",
        "certs-url-unreadable"])
def test_test_only_caller_endpoints_in_a_stack_fail_the_pack(raw_program: ModuleType, change: dict[str, str],
                                                             named: str) -> None:
    """With caller verification on (its audience and caller), as the handler would refuse to start with them."""
    from scheduler_dedup.handler.core.errors import ConfigError
    from scheduler_dedup.handler.service.app import build_handler_from_env

    oidc = {"DEDUP_OIDC_AUDIENCE": "https://jobs.example.com", "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com"}
    with pytest.raises(ConfigError, match=named):
        build_handler_from_env({**raw_program.GOOD_ENV, **oidc, **change})
    findings = check_program(lambda: raw_program.good_program({**oidc, **change}))
    assert [f.level for f in findings if f.rule == "dedup-handler-settings" and named in f.message] == ["mandatory"]


def test_two_handlers_on_one_collection_without_a_scheduler_job_binding_fail_the_pack(raw_program: ModuleType) -> None:
    def program() -> None:
        raw_program.good_program()
        raw_program._service("second", env=raw_program.GOOD_ENV, timeout="600s", cpu_always_allocated=True,
                             min_instances=1, service_account="second@p.iam.gserviceaccount.com")

    findings = [f for f in check_program(program) if f.rule == "dedup-shared-collection-job-bound"]
    assert sorted(f.resource.name for f in findings if f.resource) == ["handler", "second"], findings
    assert all(f.level == "mandatory" and "DEDUP_SCHEDULER_JOB" in f.message for f in findings)


def test_a_stack_that_allows_test_endpoints_fails_the_pack(raw_program: ModuleType) -> None:
    findings = check_program(lambda: raw_program.good_program({"DEDUP_ALLOW_TEST_ENDPOINTS": "1"}))
    assert [(f.rule, f.level) for f in findings] == [("dedup-handler-settings", "mandatory")], findings
    assert "tests and local tools only" in findings[0].message


def test_a_test_flag_the_pack_cannot_read_counts_as_set(raw_program: ModuleType) -> None:
    """DEDUP_ALLOW_TEST_ENDPOINTS from a Secret Manager secret is not readable: it counts as set, and the endpoint it
    would admit is still refused."""
    flag = {"DEDUP_ALLOW_TEST_ENDPOINTS": raw_program.SecretEnv("test-flag")}
    findings = check_program(lambda: raw_program.good_program(flag))
    assert [(f.rule, f.level) for f in findings] == [("dedup-handler-settings", "mandatory")], findings
    assert "cannot read" in findings[0].message and "counts as set" in findings[0].message
    oidc = {"DEDUP_OIDC_AUDIENCE": "https://jobs.example.com", "DEDUP_ALLOWED_CALLERS": "sched@p.iam.gserviceaccount.com",
            "DEDUP_OIDC_CERTS_URL": "https://storage.googleapis.com/bucket/certs.json"}
    messages = [f.message for f in check_program(lambda: raw_program.good_program({**flag, **oidc}))
                if f.rule == "dedup-handler-settings"]
    assert any("counts as set" in m for m in messages) and \
        any("DEDUP_OIDC_CERTS_URL points at https://storage.googleapis.com" in m for m in messages), messages


def test_variables_that_redirect_the_handler_in_a_stack_fail_the_pack(raw_program: ModuleType) -> None:
    """Named plain or from a secret (by name: the value of a secret is not readable)."""
    change = {"HTTPS_PROXY": "http://10.0.0.9:3128",
              "GOOGLE_APPLICATION_CREDENTIALS": raw_program.SecretEnv("runtime-key")}
    findings = check_program(lambda: raw_program.good_program(change))
    assert [(f.rule, f.level) for f in findings] == [("dedup-handler-environment", "mandatory")] * 2, findings
    assert sorted(f.message.split("'")[1] for f in findings) == ["GOOGLE_APPLICATION_CREDENTIALS", "HTTPS_PROXY"]


def test_a_stack_that_switches_idempotency_off_fails_the_pack(raw_program: ModuleType) -> None:
    """The good program plus one change: DEDUP_IDEMPOTENCY_DISABLED on the handler's service."""
    findings = check_program(lambda: raw_program.good_program({"DEDUP_IDEMPOTENCY_DISABLED": "1"}))
    assert [(f.rule, f.level) for f in findings] == [("dedup-idempotency-enabled", "mandatory")], findings
    assert "DEDUP_IDEMPOTENCY_DISABLED=1" in findings[0].message and "remove it" in findings[0].message
    assert check_program(lambda: raw_program.good_program({"DEDUP_IDEMPOTENCY_DISABLED": "0"})) == []


def test_the_check_runs_in_a_process_that_ran_asyncio_before(raw_program: ModuleType) -> None:
    """``asyncio.run`` (an ``async def`` idempotent function, a test of one) leaves the main thread without an event
    loop, and Pulumi's mocks asked for one: every later check in the process failed as a program error."""
    import asyncio

    asyncio.run(asyncio.sleep(0))
    assert check_program(lambda: raw_program.good_program({})) == []


def advisory_config(tmp_path: Path) -> Path:
    """good-image.yaml with the request timeout set equal to the attempt deadline: one advisory finding."""
    config = yaml.safe_load((EXAMPLES / "good-image.yaml").read_text())
    config["config"]["scheduler-dedup:requestTimeoutSeconds"] = 180
    path = tmp_path / "Pulumi.margin.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("config", BAD_CONFIGS, ids=lambda p: p.name)
def test_bad_example_configs_fail_with_a_row_naming_the_field(config: Path) -> None:
    code, text = _check(stack=None, config_file=config)
    assert code == 1, text
    assert "component-config" in text and "mandatory" in text
    field = {"bad-groc-schedule.yaml": "schedule", "bad-attempt-deadline.yaml": "attempt_deadline_seconds",
             "bad-lease.yaml": "lease_seconds", "bad-retention.yaml": "retention_seconds",
             "bad-time-zone.yaml": "time_zone", "bad-retry-count.yaml": "retry_count"}[config.name]
    assert field in text


def test_table_columns_and_advisory_rows(tmp_path: Path) -> None:
    code, text = _check(stack=None, config_file=advisory_config(tmp_path))
    assert code == 0
    header = next(line for line in text.splitlines() if "rule" in line and "message" in line)
    assert [w for w in header.replace("┃", " ").split()] == ["rule", "resource", "level", "message"]
    assert "scheduler-attempt-deadline-margin" in text and "advisory" in text


@pytest.mark.parametrize(("schedule", "rule", "needle"), [
    ("0 22-2 * * *", "scheduler-schedule-unsettled", "'0 0,1,2,22,23 * * *'"),
    ("30 9 * * FRI-MON", "scheduler-schedule-unsettled", "'30 9 * * 0,1,5,6'"),
    ("0/120 * * * *", "scheduler-schedule-step", "runs hourly"),
    ("*/61 * * * *", "scheduler-schedule-step", "runs hourly"),
    ("0 */25 * * *", "scheduler-schedule-step", "runs daily"),
    ("0 0 */45 * *", "scheduler-schedule-step", "runs monthly"),
])
def test_check_flags_what_a_schedule_really_does_and_never_refuses_a_backwards_range(
        tmp_path: Path, schedule: str, rule: str, needle: str) -> None:
    """Backwards ranges were refused ("does not fire within 2929 days": the alerts' gap scan read them as never
    firing) and oversized steps passed silently. Now: one advisory row each, saying what the schedule does, with
    alerts on (Pulumi.example.yaml has them)."""
    config = yaml.safe_load((ROOT / "Pulumi.example.yaml").read_text())
    config["config"]["scheduler-dedup:schedule"] = schedule
    path = tmp_path / "Pulumi.schedule.yaml"
    path.write_text(yaml.safe_dump(config))
    findings = check_stack_config(path, ROOT / "Pulumi.yaml")
    assert [f for f in findings if f.level == "mandatory"] == []
    (finding,) = [f for f in findings if f.rule == rule]
    assert finding.level == "advisory" and needle in finding.message
    assert not [f for f in findings if "does not fire" in f.message]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _check(stack=None, config_file=None)[0] == 2
    assert _check(stack="example", config_file=EXAMPLES / "good-image.yaml")[0] == 2
    assert _check(stack=None, config_file=tmp_path / "missing.yaml")[0] == 2
    assert _check(stack="no-such-stack", config_file=None)[0] == 2


@pytest.mark.parametrize(("text", "named"), [
    ('config:\n  scheduler-dedup:schedule: "0 3 * * *\n', "not valid YAML"),
    ("config:\n  - scheduler-dedup:schedule\n", "'config:' must map keys to values"),
    ("- config\n", "must be a mapping with a 'config:' key"),
])
def test_a_stack_config_that_is_not_stack_config_is_a_usage_error_naming_the_file(tmp_path: Path, text: str,
                                                                                    named: str) -> None:
    """As the checked file or a --stack-ref file: exit 2 naming the file and what is wrong, not a program error
    row and not a traceback."""
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(text)
    for kwargs in ({"config_file": bad}, {"config_file": ROOT / "Pulumi.example-job-on-store.yaml",
                                          "stack_refs": [("acme/scheduler-dedup/store", bad)]}):
        code, out = _check(stack=None, **kwargs)
        assert code == 2 and str(bad) in out.replace("\n", "") and named in out, out


def test_a_job_stack_on_a_store_stack_without_its_stack_ref_is_a_usage_error_naming_the_option() -> None:
    code, out = _check(stack="example-job-on-spanner-store", config_file=None)
    text = " ".join(out.split())
    assert code == 2 and "scheduler-dedup:storeStack" in text, out
    assert "--stack-ref acme/scheduler-dedup/store=Pulumi.store.yaml" in text and "run_program" not in text, out


def test_policy_config_file_overrides_levels(tmp_path: Path) -> None:
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"scheduler-attempt-deadline-margin": {"enforcementLevel": "mandatory"}}))
    code, text = _check(stack=None, config_file=advisory_config(tmp_path), policy_config=config)
    assert code == 1 and "mandatory" in text
    config.write_text("{not json")
    assert _check(stack=None, config_file=EXAMPLES / "good-image.yaml", policy_config=config)[0] == 2


def test_mocked_inputs_arrive_in_engine_names(raw_program: ModuleType) -> None:
    from scheduler_dedup.infra.stack.mock_run import run_program

    job = next(r for r in run_program(raw_program.good_program, {}) if r.type == "gcp:cloudscheduler/job:Job")
    assert job.inputs["attemptDeadline"] == "300s"
    assert job.inputs["httpTarget"]["oidcToken"]["serviceAccountEmail"] == "sched@p.iam.gserviceaccount.com"
    assert job.inputs["retryConfig"]["minBackoffDuration"] == "30s"


def test_raw_resources_program_is_caught_by_every_rule(raw_program: ModuleType) -> None:
    findings = check_program(raw_program.program)
    by_rule: dict[str, list[str]] = {}
    for finding in findings:
        by_rule.setdefault(finding.rule, []).append(finding.message)
    expected = {"scheduler-job-unix-cron": ["groc", "IANA"], "scheduler-job-oidc-auth": ["wrong.example.com"],
                "scheduler-attempt-deadline": ["10s"], "scheduler-retry-config": ["retryCount 9"],
                "scheduler-target-not-google-api": ["googleapis.com"], "cloud-run-no-public-invoker": ["allUsers", "invokerIamDisabled"],
                "no-primitive-roles": ["roles/editor", "roles/owner"], "dedup-firestore-ttl": ["expire_at"],
                "dedup-lease-covers-deadline": ["DEDUP_LEASE_SECONDS=60"], "dedup-retention-covers-retries": ["DEDUP_RETENTION_SECONDS=600"],
                "dedup-cpu-always-allocated": ["cpuIdle", "cpuAlwaysAllocated"],
                "cloud-run-env-names": ["'1BAD' is not a name Cloud Run takes", "use e.g. _1BAD"],
                "dedup-identity-powers": ["roles/iam.serviceAccountUser on the whole project",
                                          "group:ops@example.com is granted roles/iam.serviceAccountOpenIdTokenCreator"],
                "dedup-identity-expected-grants": ["sets no runtime service account"]}
    for rule, needles in expected.items():
        text = " | ".join(by_rule.get(rule, []))
        for needle in needles:
            assert needle in text, f"{rule} did not report {needle!r}: {text!r}"


def test_raw_resources_done_right_pass_every_mandatory_rule(raw_program: ModuleType) -> None:
    assert [f for f in check_program(raw_program.good_program) if f.level == "mandatory"] == []


def test_cli_passes_the_policy_config_through(tmp_path: Path) -> None:
    """The console script's --policy-config reaches the rules: a raised level turns exit 0 into exit 1."""
    import os
    import subprocess
    import sys

    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"scheduler-attempt-deadline-margin": {"enforcementLevel": "mandatory"}}))
    command = [sys.executable, "-m", "scheduler_dedup.local.commands.cli", "check", "--config", str(advisory_config(tmp_path))]
    env = {**os.environ, "COLUMNS": "250"}  # keep rule names on one line of the table
    plain = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    raised = subprocess.run([*command, "--policy-config", str(config)], capture_output=True, text=True, timeout=300,
                            env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert raised.returncode == 1, raised.stdout + raised.stderr
    assert "scheduler-attempt-deadline-margin" in raised.stdout


@pytest.mark.parametrize(("policy_config", "named"), [
    ({"scheduler-attempt-deadline-margin": "mandatry"}, "scheduler-attempt-deadline-margin: 'mandatry'"),
    ({"scheduler-retry-config": {"enforcementLevel": "disabeld"}}, "did you mean 'disabled'"),
    ({"scheduler-attempt-deadline-margin": {"minMarginSecnds": 30}}, "did you mean 'minMarginSeconds'"),
    ({"scheduler-attempt-deadlin": "advisory"}, "did you mean 'scheduler-attempt-deadline'"),
    ({"scheduler-attempt-deadline-margin": {"minMarginSeconds": "30"}}, "not of type number"),
    ({"all": "strict"}, "all: 'strict'"),
    ({"dedup-retention-covers-retries": {"marginSeconds": -5}},
     "dedup-retention-covers-retries.marginSeconds: -5 is below the minimum 0"),
    ({"scheduler-attempt-deadline": {"minSeconds": 900, "maxSeconds": 100}},
     "scheduler-attempt-deadline.minSeconds: 900 is above maxSeconds (100)"),
    ({"scheduler-attempt-deadline": {"maxSeconds": 10}}, "scheduler-attempt-deadline.maxSeconds: 10 is below the minimum 15"),
    ({"scheduler-retry-config": {"maxRetryCount": -1}}, "scheduler-retry-config.maxRetryCount: -1 is below the minimum 0"),
])
def test_a_typo_or_nonsense_threshold_in_a_policy_config_is_refused_naming_the_entry(tmp_path: Path, policy_config: dict[str, Any],
                                                               named: str) -> None:
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps(policy_config))
    code, text = _check(stack=None, config_file=EXAMPLES / "good-image.yaml", policy_config=config)
    assert code == 2, text
    assert named in " ".join(text.split()), text


def test_every_policy_config_in_the_docs_is_accepted() -> None:
    import re

    from scheduler_dedup.policies.offline.policy_config import check_policy_config

    page = (ROOT / "docs" / "policy-pack.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", page, flags=re.S)
    assert blocks
    for block in blocks:
        check_policy_config(json.loads(block))


def test_root_stack_messages_name_the_stack_config_key(tmp_path: Path) -> None:
    """A root-stack user edits requestTimeoutSeconds, not template.timeout."""
    [finding] = [f for f in check_stack_config(advisory_config(tmp_path), ROOT / "Pulumi.yaml")
                 if f.rule == "scheduler-attempt-deadline-margin" and f.resource and f.resource.name.endswith("-job")]
    assert "scheduler-dedup:requestTimeoutSeconds" in finding.message
    assert "scheduler-dedup:attemptDeadlineSeconds" in finding.message


@pytest.mark.parametrize(("overrides", "needles"), [
    # retries at +5, +10, +20 s against a 300 s lease: the crashed attempt's run would never complete
    ({"scheduler-dedup:retryCount": 3, "scheduler-dedup:minBackoffSeconds": 5},
     ["409", "scheduler-dedup:minBackoffSeconds to at least 43", "scheduler-dedup:leaseSeconds"]),
    ({"scheduler-dedup:schedule": "0 0 31 2 *"}, ["never fires", "scheduler-dedup:schedule"]),
])
def test_stacks_that_cannot_work_fail_the_check(tmp_path: Path, overrides: dict[str, Any], needles: list[str]) -> None:
    config = yaml.safe_load((EXAMPLES / "good-image.yaml").read_text())
    config["config"].update(overrides)
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(config))
    code, text = _check(stack=None, config_file=path)
    assert code == 1, text
    flat = " ".join(text.replace("│", " ").split())
    for needle in needles:
        assert needle in flat, (needle, flat)


def test_a_job_entry_point_missing_from_job_source_fails_the_check(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "Pulumi.example.yaml").read_text())
    config["config"]["scheduler-dedup:jobSource"] = str(HELLO_JOB)
    config["config"]["scheduler-dedup:job"] = "jobs:nonexistent"
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(config))
    code, text = _check(stack=None, config_file=path)
    flat = " ".join(text.replace("│", " ").split())
    assert code == 1 and "defines no 'nonexistent'" in flat and "scheduler-dedup:job" in flat, flat


def _handler_admits(env: dict[str, Any], audience: str, email: str, sub: str | None) -> bool:
    """The handler's own caller check (built from the service env) on the token Scheduler would send."""
    import base64
    import time

    from scheduler_dedup.handler.callers.oidc import OidcVerifier
    from scheduler_dedup.handler.callers.oidc_settings import CallerAuthSettings

    settings = CallerAuthSettings.from_env({k: str(v) for k, v in env.items() if isinstance(v, str)})
    if settings is None:
        return True

    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    claims = {"aud": audience, "email": email, "email_verified": True, "iss": "https://accounts.google.com",
              "exp": int(time.time()) + 600, "iat": int(time.time()), "sub": sub}
    token = f"{b64({'alg': 'RS256', 'kid': 'k'})}.{b64(claims)}.SIGNATURE_REMOVED_BY_GOOGLE"
    return OidcVerifier(settings).check({"Authorization": f"Bearer {token}"}) is None


@pytest.mark.parametrize("overrides", [
    {},
    {"scheduler-dedup:image": None, "scheduler-dedup:job": None,
     "scheduler-dedup:httpUrl": "https://us-central1-my-project-id.cloudfunctions.net/export-report"},
    {"scheduler-dedup:oidcAudience": "https://jobs.example.com/nightly"},
])
def test_a_stack_the_check_passes_never_refuses_its_own_scheduler_job(tmp_path: Path, overrides: dict[str, Any]) -> None:
    """As a new user: whatever `check` passes, the handler and Cloud Run admit the token the job sends."""
    from scheduler_dedup.handler.callers.audience import platform_accepts
    from scheduler_dedup.infra.stack.mock_run import run_stack_config
    from scheduler_dedup.policies.reading.model import get
    from scheduler_dedup.policies.offline.check import resources_from_registered
    from scheduler_dedup.policies.rules import evaluate
    from scheduler_dedup.policies.reading.topology import Topology, service_env, service_urls

    config = yaml.safe_load((EXAMPLES / "good-image.yaml").read_text())
    for key, value in overrides.items():
        if value is None:
            config["config"].pop(key, None)
        else:
            config["config"][key] = value
    path = tmp_path / "Pulumi.user.yaml"
    path.write_text(yaml.safe_dump(config))
    registered = run_stack_config(path, project_file=ROOT / "Pulumi.yaml")
    resources = resources_from_registered(registered)
    assert [f for f in evaluate(resources) if f.level == "mandatory"] == []
    # the token's sub is the account's unique id (the mocks give each account one)
    unique_ids = {r.state.get("email"): r.state.get("uniqueId") for r in registered
                  if r.type == "gcp:serviceaccount/account:Account"}
    pairings = Topology.of(resources).pairings
    assert pairings
    for pairing in pairings:
        token = get(pairing.job.props, "httpTarget.oidcToken")
        audience = token.get("audience") or get(pairing.job.props, "httpTarget.uri")
        assert _handler_admits(service_env(pairing.service), audience, token["serviceAccountEmail"],
                               unique_ids.get(token["serviceAccountEmail"])), pairing.job.name
        custom = get(pairing.service.props, "customAudiences") or []
        assert platform_accepts(audience, service_urls(pairing.service)[0], custom), pairing.job.name


def test_the_table_keeps_a_readable_width_when_piped(tmp_path: Path) -> None:
    """In a CI log (stdout not a terminal, no COLUMNS) the table is not squeezed to 80 columns."""
    import os
    import subprocess
    import sys

    from scheduler_dedup.local.commands.console import PIPE_WIDTH

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    command = [sys.executable, "-m", "scheduler_dedup.local.commands.cli", "check", "--config", str(advisory_config(tmp_path))]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) > 120, done.stdout
    assert max(len(line) for line in lines) <= PIPE_WIDTH, done.stdout
    message_cells = [line.split("│")[4] for line in lines if line.count("│") == 5]
    assert max(len(cell.strip()) for cell in message_cells) > 45, done.stdout  # was ~22 at 80 columns


def test_a_config_with_several_mistakes_gets_a_row_for_each_in_one_check(tmp_path: Path) -> None:
    config = yaml.safe_load((EXAMPLES / "good-image.yaml").read_text())
    config["config"].update({"scheduler-dedup:schedule": "every 5 minutes", "scheduler-dedup:timeZone": "Mars/Olympus",
                             "scheduler-dedup:attemptDeadlineSeconds": 10, "scheduler-dedup:maxInstanceCount": 0,
                             "scheduler-dedup:retrycount": 3})
    path = tmp_path / "Pulumi.four.yaml"
    path.write_text(yaml.safe_dump(config))
    findings = check_stack_config(path, ROOT / "Pulumi.yaml")
    assert {f.rule for f in findings} == {"component-config"} and len(findings) == 5
    for key in ("retrycount", "scheduler-dedup:schedule", "scheduler-dedup:timeZone",
                "scheduler-dedup:attemptDeadlineSeconds", "scheduler-dedup:maxInstanceCount"):
        assert sum(key in f.message for f in findings) >= 1, key
    code, text = _check(stack=None, config_file=path)
    assert code == 1 and "5 mandatory" in text


def test_a_hand_written_memorystore_store_is_caught_by_every_memorystore_rule(raw_program: ModuleType) -> None:
    by_rule: dict[str, list[str]] = {}
    for finding in check_program(raw_program.redis_program):
        by_rule.setdefault(finding.rule, []).append(f"{finding.level}: {finding.message}")
    expected = {"memorystore-dedup-standard-tier": "mandatory: Memorystore instance runs-redis holds run records, "
                                                   "but its tier is BASIC (the default)",
                "memorystore-dedup-noeviction": "mandatory: Memorystore instance runs-redis holds run records, but its "
                                                "maxmemory-policy is volatile-lru (the default)",
                "memorystore-dedup-auth": "mandatory: Memorystore instance runs-redis holds run records, but AUTH is off",
                "memorystore-dedup-transit-encryption": "mandatory: Memorystore instance runs-redis holds run records, "
                                                        "but in-transit encryption is DISABLED",
                "memorystore-dedup-persistence": "advisory: Memorystore instance runs-redis holds run records, but it "
                                                 "has no persistence",
                "memorystore-dedup-replica": "DEDUP_REDIS_WAIT_TIMEOUT_MS=0"}
    for rule, needle in expected.items():
        assert any(needle in text for text in by_rule.get(rule, [])), f"{rule}: {by_rule.get(rule)}"
    assert "dedup-firestore-ttl" not in by_rule, "Redis expires each record itself"
    every = {rule.name: "mandatory" for rule in RULES}
    assert check_program(raw_program.good_redis_program, policy_config=every) == []


def test_a_test_flag_from_a_secret_on_a_cloud_run_v1_service_counts_as_set(raw_program: ModuleType) -> None:
    """Cloud Run v1 spells a secret-sourced variable ``valueFrom`` (v2: ``valueSource``): the pack cannot read it
    either, so DEDUP_ALLOW_TEST_ENDPOINTS from one counts as set."""
    import pulumi_gcp as gcp

    def v1_service(extra: list[Any]) -> None:
        env = {**raw_program.GOOD_ENV, "DEDUP_COLLECTION": "v1_runs"}
        envs = [gcp.cloudrun.ServiceTemplateSpecContainerEnvArgs(name=k, value=v) for k, v in env.items()]
        gcp.cloudrun.Service("v1-handler", location=raw_program.REGION, template=gcp.cloudrun.ServiceTemplateArgs(
            spec=gcp.cloudrun.ServiceTemplateSpecArgs(
                service_account_name=raw_program.RUNTIME_ACCOUNT, timeout_seconds=600,
                containers=[gcp.cloudrun.ServiceTemplateSpecContainerArgs(image="x", envs=envs + extra)])))

    flag = gcp.cloudrun.ServiceTemplateSpecContainerEnvArgs(
        name="DEDUP_ALLOW_TEST_ENDPOINTS", value_from=gcp.cloudrun.ServiceTemplateSpecContainerEnvValueFromArgs(
            secret_key_ref=gcp.cloudrun.ServiceTemplateSpecContainerEnvValueFromSecretKeyRefArgs(name="flag", key="1")))

    def settings_findings(extra: list[Any]) -> list[str]:
        return [f.message for f in check_program(lambda: (raw_program.good_program(), v1_service(extra)))
                if f.rule == "dedup-handler-settings" and f.level == "mandatory"]

    assert settings_findings([]) == []
    assert any("v1-handler" in m and "counts as set" in m for m in settings_findings([flag])), settings_findings([flag])


def test_a_volume_mounted_in_a_home_folder_beside_the_handler_fails_the_pack(raw_program: ModuleType) -> None:
    """A secret mounted at /root/.config/gcloud puts a credentials file where Application Default Credentials look
    before the runtime account: named by dedup-handler-environment, as the component refuses it in secret_files."""
    import pulumi_gcp as gcp

    def program(mount_path: str) -> None:
        raw_program.good_program()
        run = gcp.cloudrunv2
        run.Service("second", location=raw_program.REGION, template=run.ServiceTemplateArgs(
            service_account=raw_program.RUNTIME_ACCOUNT, timeout="600s",
            volumes=[run.ServiceTemplateVolumeArgs(name="adc", secret=run.ServiceTemplateVolumeSecretArgs(secret="adc"))],
            containers=[run.ServiceTemplateContainerArgs(
                image="x", envs=[run.ServiceTemplateContainerEnvArgs(name=k, value=v)
                                 for k, v in {**raw_program.GOOD_ENV, "DEDUP_COLLECTION": "second_runs"}.items()],
                volume_mounts=[run.ServiceTemplateContainerVolumeMountArgs(name="adc", mount_path=mount_path)])]))

    def named(mount_path: str) -> list[str]:
        return [f.message for f in check_program(lambda: program(mount_path))
                if f.rule == "dedup-handler-environment" and f.level == "mandatory"]

    assert named("/secrets/adc") == []
    [message] = named("/root/.config/gcloud")
    assert "/root/.config/gcloud is in a home folder" in message and "second" in message
