"""The IAM rules (policies/rules/iam.py) on engine-shaped (camelCase) properties: compliant, violating,
missing/unknown, and config override."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_dedup.policies.reading.model import UNKNOWN

from .conftest import SERVICE, res, run, service


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


@pytest.mark.parametrize("typ", ["gcp:projects/iAMMember:IAMMember", "gcp:projects/iAMBinding:IAMBinding",
                                 "gcp:folder/iAMMember:IAMMember", "gcp:organizations/iAMBinding:IAMBinding"])
def test_a_project_level_public_invoker_is_caught(typ: str) -> None:
    props: dict[str, Any] = {"project": "p", "role": "roles/run.invoker"}
    props.update({"member": "allUsers"} if typ.endswith("IAMMember") else {"members": ["allUsers"]})
    assert run("cloud-run-no-public-invoker", [res(typ, "public", props)])
    props["role"] = "roles/logging.viewer"  # another role for allUsers is not this rule's concern
    assert run("cloud-run-no-public-invoker", [res(typ, "public", props)]) == []


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


# ------------------------------------------------------------------ dedup-identity-no-broad-grants

RUNTIME = "runtime@p.iam.gserviceaccount.com"
SCHED = "sched@p.iam.gserviceaccount.com"  # the conftest job's OIDC account


def _dedup_stack(**service_props: Any) -> list[Any]:
    from .conftest import job

    template = {"serviceAccount": RUNTIME, "timeout": "300s",
                "containers": [{"image": "i", "envs": [{"name": "DEDUP_COLLECTION", "value": "scheduler_runs"}]}]}
    return [job(), service(template=template, **service_props)]


def _project_member(role: str, member: Any, **props: Any) -> Any:
    return res("gcp:projects/iAMMember:IAMMember", f"grant-{role.rsplit('.', 1)[-1]}",
               {"project": "p", "role": role, "member": member, **props})


@pytest.mark.parametrize(("role", "member"), [
    ("roles/run.admin", f"serviceAccount:{RUNTIME}"),
    ("roles/iam.serviceAccountUser", f"serviceAccount:{RUNTIME}"),
    ("roles/datastore.user", f"serviceAccount:{RUNTIME}"),
    ("roles/iam.serviceAccountUser", f"serviceAccount:{SCHED}"),
])
def test_a_broad_project_grant_to_a_dedup_identity_is_mandatory(role: str, member: str) -> None:
    findings = run("dedup-identity-no-broad-grants", [*_dedup_stack(), _project_member(role, member)])
    assert len(findings) == 1 and findings[0].level == "mandatory", findings
    assert role in findings[0].message and "whole project without a condition" in findings[0].message


def test_a_binding_or_a_policy_counts_like_a_member() -> None:
    binding = res("gcp:projects/iAMBinding:IAMBinding", "b", {"project": "p", "role": "roles/run.admin",
                                                              "members": ["user:a@b.c", f"serviceAccount:{RUNTIME}"]})
    policy = res("gcp:projects/iAMPolicy:IAMPolicy", "pol", {"project": "p", "policyData": (
        '{"bindings": [{"role": "roles/datastore.user", "members": ["serviceAccount:' + SCHED + '"]}]}')})
    findings = run("dedup-identity-no-broad-grants", [*_dedup_stack(), binding, policy])
    assert sorted(f.resource.name for f in findings if f.resource) == ["b", "pol"]


def test_a_conditional_or_narrow_grant_and_other_accounts_pass() -> None:
    conditional = _project_member("roles/datastore.user", f"serviceAccount:{RUNTIME}",
                                  condition={"title": "db", "expression": 'resource.name == "projects/p/databases/d"'})
    narrow = _project_member("roles/logging.logWriter", f"serviceAccount:{RUNTIME}")
    other = _project_member("roles/run.admin", "serviceAccount:deployer@p.iam.gserviceaccount.com")
    assert run("dedup-identity-no-broad-grants", [*_dedup_stack(), conditional, narrow, other]) == []


def test_at_preview_an_account_of_the_stack_is_known_by_its_dependency() -> None:
    """New accounts have no email yet at preview: the grant's member depends on the account resource the dedup
    service runs as."""
    account = res("gcp:serviceaccount/account:Account", "runtime-sa", {"accountId": "runtime"})
    template = {"serviceAccount": UNKNOWN, "containers": [{"image": "i", "envs": [
        {"name": "DEDUP_COLLECTION", "value": "scheduler_runs"}]}]}
    svc = res(SERVICE, "svc", {"template": template}, deps={"template": [account.urn]})
    grant = res("gcp:projects/iAMMember:IAMMember", "g", {"project": "p", "role": "roles/run.admin", "member": UNKNOWN},
                deps={"member": [account.urn]})
    findings = run("dedup-identity-no-broad-grants", [account, svc, grant])
    assert len(findings) == 1 and "runtime account" in findings[0].message


@pytest.mark.parametrize(("member", "flagged"), [
    ("group:ops@example.com", True),
    ("user:alice@example.com", True),
    ("serviceAccount:ci@p.iam.gserviceaccount.com", True),
    ("serviceAccount:service-123456789@gcp-sa-cloudscheduler.iam.gserviceaccount.com", False),
])
def test_only_schedulers_service_agent_may_mint_the_scheduler_accounts_tokens(member: str, flagged: bool) -> None:
    grant = res("gcp:serviceaccount/iAMMember:IAMMember", "token", {
        "serviceAccountId": f"projects/p/serviceAccounts/{SCHED}",
        "role": "roles/iam.serviceAccountOpenIdTokenCreator", "member": member})
    findings = run("dedup-identity-no-broad-grants", [*_dedup_stack(), grant])
    assert bool(findings) is flagged, findings
    if flagged:
        assert "mint that account's OIDC tokens" in findings[0].message and findings[0].level == "mandatory"
    # the same grant on an account that is no dedup identity is not this rule's business
    elsewhere = res("gcp:serviceaccount/iAMMember:IAMMember", "t2", {
        "serviceAccountId": "projects/p/serviceAccounts/other@p.iam.gserviceaccount.com",
        "role": "roles/iam.serviceAccountOpenIdTokenCreator", "member": member})
    assert run("dedup-identity-no-broad-grants", [*_dedup_stack(), elsewhere]) == []


def test_a_condition_on_the_request_alone_leaves_a_project_wide_grant_broad() -> None:
    """``request.time`` (or an access level) limits when a grant holds, not what it reaches: datastore.user on the
    project under such a condition still reads and writes every database of the project."""
    timed = _project_member("roles/datastore.user", f"serviceAccount:{RUNTIME}",
                            condition={"title": "until", "expression": 'request.time < timestamp("2030-01-01T00:00:00Z")'})
    typed = _project_member("roles/run.admin", f"serviceAccount:{RUNTIME}",
                            condition={"title": "t", "expression": 'resource.type == "run.googleapis.com/Service"'})
    findings = run("dedup-identity-no-broad-grants", [*_dedup_stack(), timed, typed])
    assert len(findings) == 2 and all("condition on resource.name" in f.message for f in findings)
