"""The pack's entry point builds under the real pulumi-policy, and its analyzer survives what the engine sends.

``policies/__main__.py`` is run as Pulumi runs it (``runpy.run_path`` of the pack folder) with only the
gRPC server replaced; the captured analyzer servicer is then driven with real protobuf requests,
including the engine's unknown-value sentinels, so the adapters are tested end to end.
"""

from __future__ import annotations

import json
import runpy
from typing import Any
from unittest import mock

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi_policy import proxy as policy_proxy

from scheduler_dedup.policies.reading.model import UNKNOWN_SENTINELS
from scheduler_dedup.policies.rules import RULES
from tests.paths import ROOT

PACK_DIR = ROOT / "policies"
UNKNOWN_STRING = policy_proxy.UNKNOWN_STRING_VALUE
JOB = "gcp:cloudscheduler/job:Job"
SERVICE = "gcp:cloudrunv2/service:Service"


@pytest.fixture(scope="module")
def servicer() -> Any:
    """The analyzer servicer ``PolicyPack`` builds, captured instead of being served."""
    captured: dict[str, Any] = {}

    def add_servicer(servicer: Any, server: Any) -> None:
        captured["servicer"] = servicer

    fake_server = mock.MagicMock()
    fake_server.add_insecure_port.return_value = 0
    with mock.patch("pulumi_policy.policy.grpc.server", return_value=fake_server), \
         mock.patch("pulumi_policy.policy.analyzer_pb2_grpc.add_AnalyzerServicer_to_server", side_effect=add_servicer), \
         mock.patch("pulumi_policy.policy.time.sleep", side_effect=KeyboardInterrupt), \
         mock.patch("pulumi_policy.policy.sys.stdout"):
        runpy.run_path(str(PACK_DIR), run_name="__main__")
    fake_server.start.assert_called_once()
    fake_server.stop.assert_called_once_with(0)
    return captured["servicer"]


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(props)
    return s


def _analyze(servicer: Any, typ: str, props: dict[str, Any], name: str = "r") -> list[Any]:
    request = proto.AnalyzeRequest(type=typ, properties=_struct(props), urn=f"urn:pulumi:s::p::{typ}::{name}", name=name)
    return list(servicer.Analyze(request, None).diagnostics)


def _analyze_stack(servicer: Any, resources: list[tuple[str, str, dict[str, Any]]]) -> list[Any]:
    request = proto.AnalyzeStackRequest(resources=[
        proto.AnalyzerResource(type=typ, name=name, urn=f"urn:pulumi:s::p::{typ}::{name}", properties=_struct(props))
        for typ, name, props in resources
    ])
    return list(servicer.AnalyzeStack(request, None).diagnostics)


def test_sentinels_match_pulumi_policy() -> None:
    installed = {getattr(policy_proxy, n) for n in dir(policy_proxy) if n.startswith("UNKNOWN_") and n.endswith("_VALUE")}
    assert installed == set(UNKNOWN_SENTINELS)


def test_pack_declares_every_rule_with_level_and_schema(servicer: Any) -> None:
    info = servicer.GetAnalyzerInfo(None, None)
    assert info.name == "scheduler-dedup"
    by_name = {p.name: p for p in info.policies}
    assert list(by_name) == [rule.name for rule in RULES]
    levels = {p.name: p.enforcementLevel for p in info.policies}
    assert levels["scheduler-job-unix-cron"] == proto.MANDATORY
    assert levels["scheduler-retry-config"] == proto.ADVISORY
    assert "minMarginSeconds" in by_name["scheduler-attempt-deadline-margin"].configSchema.properties


def test_resource_policy_reports_violation_through_the_engine_path(servicer: Any) -> None:
    diagnostics = _analyze(servicer, JOB, {"schedule": "every 5 minutes", "httpTarget": {"uri": "https://x.run.app"}})
    messages = [d.message for d in diagnostics if d.policyName == "scheduler-job-unix-cron"]
    assert messages and "*/5 * * * *" in messages[0]
    assert all(d.enforcementLevel == proto.MANDATORY for d in diagnostics if d.policyName == "scheduler-job-unix-cron")


def test_unknown_values_during_preview_neither_crash_nor_violate(servicer: Any) -> None:
    props = {"schedule": UNKNOWN_STRING, "attemptDeadline": UNKNOWN_STRING, "timeZone": UNKNOWN_STRING,
             "httpTarget": {"uri": UNKNOWN_STRING, "oidcToken": {"serviceAccountEmail": UNKNOWN_STRING,
                                                                 "audience": UNKNOWN_STRING}},
             "retryConfig": policy_proxy.UNKNOWN_OBJECT_VALUE}
    assert _analyze(servicer, JOB, props) == []
    stack = _analyze_stack(servicer, [
        (JOB, "job", props),
        (SERVICE, "svc", {"template": {"timeout": UNKNOWN_STRING, "serviceAccount": UNKNOWN_STRING,
                                       "containers": [{"envs": policy_proxy.UNKNOWN_ARRAY_VALUE,
                                                       "resources": {"cpuIdle": UNKNOWN_STRING}}]},
                          "uri": UNKNOWN_STRING}),
        ("gcp:firestore/field:Field", "ttl", {"collection": "scheduler_runs", "field": "expire_at",
                                              "database": UNKNOWN_STRING, "ttlConfig": {}}),
    ])
    assert stack == []


def test_stack_policy_reports_on_the_offending_resource(servicer: Any) -> None:
    diagnostics = _analyze_stack(servicer, [
        (JOB, "job", {"schedule": "*/5 * * * *", "attemptDeadline": "600s",
                      "httpTarget": {"uri": UNKNOWN_STRING, "oidcToken": {"serviceAccountEmail": "a@p.iam.gserviceaccount.com"}}}),
        (SERVICE, "svc", {"template": {"timeout": "300s", "containers": [{"envs": [{"name": "DEDUP_LEASE_SECONDS", "value": "300"}]}]}}),
    ])
    lease = [d for d in diagnostics if d.policyName == "dedup-lease-covers-deadline"]
    assert lease and lease[0].urn.endswith("::job")
    assert "template.timeout" in lease[0].message and "only Cloud Run service" in lease[0].message
    ttl = [d for d in diagnostics if d.policyName == "dedup-firestore-ttl"]
    assert ttl and "ttlConfig" in ttl[0].message


def test_engine_config_overrides_level_and_threshold(servicer: Any) -> None:
    job = (JOB, "job", {"attemptDeadline": "290s", "httpTarget": {"uri": "https://svc.run.app"}})
    service = (SERVICE, "svc", {"uri": "https://svc.run.app", "template": {"timeout": "300s"}})
    assert [d.policyName for d in _analyze_stack(servicer, [job, service])
            if d.policyName == "scheduler-attempt-deadline-margin"] == ["scheduler-attempt-deadline-margin"]
    config = proto.ConfigureAnalyzerRequest(policyConfig={
        "scheduler-attempt-deadline-margin": proto.PolicyConfig(enforcementLevel=proto.MANDATORY,
                                                                properties=_struct({"minMarginSeconds": 5})),
        "scheduler-job-unix-cron": proto.PolicyConfig(enforcementLevel=proto.DISABLED),
    })
    servicer.Configure(config, None)
    try:
        assert not [d for d in _analyze_stack(servicer, [job, service]) if d.policyName == "scheduler-attempt-deadline-margin"]
        tight = [job[0], job[1], {**job[2], "attemptDeadline": "298s"}]
        found = [d for d in _analyze_stack(servicer, [tuple(tight), service])  # type: ignore[list-item]
                 if d.policyName == "scheduler-attempt-deadline-margin"]
        assert found and found[0].enforcementLevel == proto.MANDATORY
        assert not _analyze(servicer, JOB, {"schedule": "every 5 minutes"})
    finally:
        servicer.Configure(proto.ConfigureAnalyzerRequest(), None)


def test_the_test_switch_of_idempotent_is_refused_through_the_engine_path(servicer: Any) -> None:
    """DEDUP_IDEMPOTENCY_DISABLED on any container of a Cloud Run service or job (a downstream service using
    ``idempotent``, not only the handler) is a mandatory violation; its absence, or ``0``, is none."""
    def envs(value: str | None) -> dict[str, Any]:
        own = [{"name": "DEDUP_IDEMPOTENCY_DISABLED", "value": value}] if value is not None else []
        return {"containers": [{"envs": [{"name": "A", "value": "1"}]}, {"envs": own}]}

    for typ, props in ((SERVICE, lambda v: {"template": envs(v)}),
                       ("gcp:cloudrunv2/job:Job", lambda v: {"template": {"template": envs(v)}})):
        found = [d for d in _analyze(servicer, typ, props("true")) if d.policyName == "dedup-idempotency-enabled"]
        assert len(found) == 1 and found[0].enforcementLevel == proto.MANDATORY, typ
        assert "DEDUP_IDEMPOTENCY_DISABLED=true" in found[0].message
        for value in ("0", None):
            assert not [d for d in _analyze(servicer, typ, props(value)) if d.policyName == "dedup-idempotency-enabled"]
        # a value that is neither on nor off would fail every idempotent call of the service: refused, named
        found = [d for d in _analyze(servicer, typ, props("yes")) if d.policyName == "dedup-idempotency-enabled"]
        assert len(found) == 1 and "DEDUP_IDEMPOTENCY_DISABLED='yes'" in found[0].message, typ


FUNCTION = "gcp:cloudfunctionsv2/function:Function"


def _source_deploy_stack() -> list[tuple[str, str, dict[str, Any]]]:
    """The component's source deploy (a Cloud Run function) as the engine sends it after an update."""
    from scheduler_dedup.infra import DedupScheduledJob
    from scheduler_dedup.infra.stack.mock_run import run_program

    registered = run_program(lambda: DedupScheduledJob("nightly", {
        "schedule": "0 3 * * *", "region": "us-central1", "job_source": str(ROOT / "examples" / "hello_job"),
        "job": "jobs:run", "attempt_deadline_seconds": 300, "min_instance_count": 1}), {"gcp:project": "p1"})
    return [(r.type, r.name, json.loads(json.dumps(r.state or r.inputs, default=str))) for r in registered]


def _with_function(stack: list[tuple[str, str, dict[str, Any]]], change: Any) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for typ, name, props in stack:
        if typ == FUNCTION:
            props = change(json.loads(json.dumps(props)))
        out.append((typ, name, props))
    return out


def test_the_pack_judges_the_source_deploys_function_as_it_judges_a_service(servicer: Any) -> None:
    """The component's function passes every mandatory rule through the pack's entry point; each one change to the
    function is caught by the rule that owns it."""
    stack = _source_deploy_stack()
    good = _analyze_stack(servicer, stack)
    assert not [d for d in good if d.enforcementLevel == proto.MANDATORY], [(d.policyName, d.message) for d in good]
    # advisories only: the function's per-request CPU, and no alerting (none was asked for)
    assert {d.policyName for d in good} == {"dedup-cpu-always-allocated", "dedup-job-alerting"}
    # the build's read of the Functions API's source buckets passes only pinned to them: widened, it is named
    widened = [(t, n, {k: v for k, v in p.items() if k != "condition"} if n.endswith("-function-source-reader") else p)
               for t, n, p in stack]
    named = [d for d in _analyze_stack(servicer, widened) if d.policyName == "dedup-identity-expected-grants"]
    assert [d.urn.rsplit("::", 1)[-1] for d in named] == ["nightly-build-function-source-reader"], named

    def short_timeout(props: dict[str, Any]) -> dict[str, Any]:
        props["serviceConfig"]["timeoutSeconds"] = 60
        return props

    def other_audience(props: dict[str, Any]) -> dict[str, Any]:
        props["serviceConfig"]["environmentVariables"]["DEDUP_OIDC_AUDIENCE"] = "https://other.example.com"
        return props

    def reserved_name(props: dict[str, Any]) -> dict[str, Any]:
        props["serviceConfig"]["environmentVariables"]["K_SERVICE"] = "x"
        return props

    for change, rule, words in ((short_timeout, "dedup-lease-covers-deadline", "serviceConfig.timeoutSeconds"),
                                (other_audience, "scheduler-job-oidc-auth", "DEDUP_OIDC_AUDIENCE"),
                                (reserved_name, "cloud-run-env-names", "K_SERVICE")):
        found = [d for d in _analyze_stack(servicer, _with_function(stack, change)) +
                 [d for t, n, p in _with_function(stack, change) if t == FUNCTION for d in _analyze(servicer, t, p, n)]
                 if d.policyName == rule]
        assert found and words in found[0].message, (rule, [(d.policyName, d.message) for d in found])
