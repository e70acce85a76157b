"""The IAM rules (policies/rules/iam.py) on engine-shaped (camelCase) properties: compliant, violating,
missing/unknown, and config override."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_dedup.policies.reading.model import UNKNOWN

from .conftest import SERVICE, good_stack, res, run, service


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


# ------------------------------------------------------------------ dedup-identity-powers, dedup-identity-expected-grants

RUNTIME = "runtime@p.iam.gserviceaccount.com"
SCHED = "sched@p.iam.gserviceaccount.com"  # the conftest job's OIDC account
POWERS = "dedup-identity-powers"
EXPECTED = "dedup-identity-expected-grants"


def _dedup_stack(**service_props: Any) -> list[Any]:
    from .conftest import job

    template = {"serviceAccount": RUNTIME, "timeout": "300s",
                "containers": [{"image": "i", "envs": [{"name": "DEDUP_COLLECTION", "value": "scheduler_runs"}]}]}
    return [job(), service(template=template, **service_props)]


def _project_member(role: str, member: Any, **props: Any) -> Any:
    return res("gcp:projects/iAMMember:IAMMember", f"grant-{role.rsplit('.', 1)[-1]}",
               {"project": "p", "role": role, "member": member, **props})


@pytest.mark.parametrize(("role", "member", "power"), [
    ("roles/run.admin", f"serviceAccount:{RUNTIME}", "run.services.setIamPolicy"),
    ("roles/iam.serviceAccountUser", f"serviceAccount:{RUNTIME}", "iam.serviceAccounts.actAs"),
    ("roles/iam.serviceAccountUser", f"serviceAccount:{SCHED}", "iam.serviceAccounts.actAs"),
    ("roles/resourcemanager.projectIamAdmin", f"serviceAccount:{RUNTIME}", "resourcemanager.projects.setIamPolicy"),
    ("roles/spanner.databaseAdmin", f"serviceAccount:{RUNTIME}", "spanner.databases.drop"),
])
def test_a_dangerous_project_grant_to_a_dedup_identity_is_mandatory(role: str, member: str, power: str) -> None:
    findings = run(POWERS, [*_dedup_stack(), _project_member(role, member)])
    assert findings and all(f.level == "mandatory" for f in findings), findings
    assert any(role in f.message and power in f.message for f in findings), findings


@pytest.mark.parametrize(("role", "power"), [
    # entries the table had wrong, checked against Google's role pages (policies/reading/permissions.py TABLE_SOURCE)
    ("roles/workflows.admin", "change IAM (workflows.workflows.setIamPolicy)"),
    ("roles/datastore.owner", "change IAM (datastore.databases.setIamPolicy)"),
    ("roles/resourcemanager.folderAdmin", "resourcemanager.projects.setIamPolicy"),
    ("roles/run.sourceDeveloper", "run.services.delete"),
    ("roles/spanner.databaseUser", "spanner.databases.updateDdl"),  # project-wide: every database's schema
])
def test_what_a_role_can_do_follows_googles_role_pages(role: str, power: str) -> None:
    findings = run(POWERS, [*_dedup_stack(), _project_member(role, f"serviceAccount:{RUNTIME}")])
    assert any(role in f.message and power in f.message for f in findings), findings


def test_the_role_table_holds_what_googles_pages_list() -> None:
    from scheduler_dedup.policies.reading.permissions import PREDEFINED_ROLES as R

    assert not R["roles/iam.workloadIdentityUser"] & {"iam.serviceAccounts.signBlob", "iam.serviceAccounts.signJwt"}
    assert "resourcemanager.projects.delete" not in R["roles/resourcemanager.folderAdmin"]
    assert "redis.instances.getAuthString" not in R["roles/redis.editor"]  # the AUTH string is redis.admin's
    for executor in ("roles/run.jobsExecutor", "roles/run.jobsExecutorWithOverrides"):
        assert {"run.jobs.run", "run.executions.cancel"} <= R[executor]
        assert not R[executor] & {"run.executions.get", "run.executions.list"}  # the component adds run.viewer


def test_the_runtime_identitys_spanner_data_role_on_its_database_is_not_counted_as_administering_it() -> None:
    """roles/spanner.databaseUser also changes the schema, and Spanner has no predefined role that writes data
    without it: on the store's database, to the runtime identity, the rules let it be (docs/stores.md says so)."""
    grant = res("gcp:spanner/databaseIAMMember:DatabaseIAMMember", "db-user", {
        "project": "p", "instance": "i", "database": "d", "role": "roles/spanner.databaseUser",
        "member": f"serviceAccount:{RUNTIME}"})
    assert run(POWERS, [*_dedup_stack(), grant]) == []
    for member in (f"serviceAccount:{SCHED}", "serviceAccount:deployer@p.iam.gserviceaccount.com"):
        other = res("gcp:spanner/databaseIAMMember:DatabaseIAMMember", "other", {**grant.props, "member": member})
        findings = run(POWERS, [*_dedup_stack(), other])
        assert all("updateDdl" in f.message for f in findings) and bool(findings) is ("sched" in member), findings


def test_a_binding_or_a_policy_counts_like_a_member() -> None:
    binding = res("gcp:projects/iAMBinding:IAMBinding", "b", {"project": "p", "role": "roles/run.admin",
                                                              "members": ["user:a@b.c", f"serviceAccount:{RUNTIME}"]})
    policy = res("gcp:projects/iAMPolicy:IAMPolicy", "pol", {"project": "p", "policyData": (
        '{"bindings": [{"role": "roles/iam.securityAdmin", "members": ["serviceAccount:' + SCHED + '"]}]}')})
    findings = run(POWERS, [*_dedup_stack(), binding, policy])
    assert sorted(f.resource.name for f in findings if f.resource) == ["b", "pol"]


def test_a_pinned_or_harmless_grant_and_other_accounts_pass_the_powers_rule() -> None:
    conditional = _project_member("roles/datastore.user", f"serviceAccount:{RUNTIME}",
                                  condition={"title": "db", "expression": 'resource.name == "projects/p/databases/d"'})
    other = _project_member("roles/run.admin", "serviceAccount:deployer@p.iam.gserviceaccount.com")
    assert run(POWERS, [*_dedup_stack(), conditional, other]) == []
    assert run(EXPECTED, [*_dedup_stack(), conditional, other]) == []


def test_at_preview_an_account_of_the_stack_is_known_by_its_dependency() -> None:
    """New accounts have no email yet at preview: the grant's member depends on the account resource the dedup
    service runs as."""
    account = res("gcp:serviceaccount/account:Account", "runtime-sa", {"accountId": "runtime"})
    template = {"serviceAccount": UNKNOWN, "containers": [{"image": "i", "envs": [
        {"name": "DEDUP_COLLECTION", "value": "scheduler_runs"}]}]}
    svc = res(SERVICE, "svc", {"template": template}, deps={"template": [account.urn]})
    grant = res("gcp:projects/iAMMember:IAMMember", "g", {"project": "p", "role": "roles/run.admin", "member": UNKNOWN},
                deps={"member": [account.urn]})
    findings = run(POWERS, [account, svc, grant])
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
    findings = run(POWERS, [*_dedup_stack(), grant])
    assert bool(findings) is flagged, findings
    if flagged:
        assert "call the handler as Cloud Scheduler" in findings[0].message and findings[0].level == "mandatory"
    # the same grant on an account that is no dedup identity is not this rule's business
    elsewhere = res("gcp:serviceaccount/iAMMember:IAMMember", "t2", {
        "serviceAccountId": "projects/p/serviceAccounts/other@p.iam.gserviceaccount.com",
        "role": "roles/iam.serviceAccountOpenIdTokenCreator", "member": member})
    assert run(POWERS, [*_dedup_stack(), elsewhere]) == []


@pytest.mark.parametrize("expression", [
    'request.time < timestamp("2030-01-01T00:00:00Z")',
    'resource.type == "run.googleapis.com/Service"',
    'resource.name.startsWith("projects/") || true',
    '!resource.name.endsWith("x")',
    'resource.name != "projects/p/serviceAccounts/other@p.iam.gserviceaccount.com"',
])
def test_a_condition_that_does_not_pin_resource_name_leaves_a_project_wide_grant_broad(expression: str) -> None:
    """Parsed as CEL: only resource.name == X, in [...], startsWith(X + "/") on every branch narrow."""
    grant = _project_member("roles/iam.serviceAccountTokenCreator", "group:ops@example.com",
                            condition={"title": "c", "expression": expression})
    findings = run(POWERS, [*_dedup_stack(), grant])
    assert any(RUNTIME in f.message for f in findings) and any(SCHED in f.message for f in findings), findings


def test_a_custom_role_of_the_stack_is_judged_by_its_permissions() -> None:
    role = res("gcp:projects/iAMCustomRole:IAMCustomRole", "powerful", {
        "project": "p", "roleId": "dedupExtra", "title": "t",
        "permissions": ["resourcemanager.projects.setIamPolicy", "iam.serviceAccounts.actAs"]})
    everything = res("gcp:organizations/iAMCustomRole:IAMCustomRole", "all", {
        "orgId": "123", "roleId": "all", "title": "t", "permissions": ["*"]})
    grants = [_project_member("projects/p/roles/dedupExtra", f"serviceAccount:{RUNTIME}"),
              res("gcp:organizations/iAMMember:IAMMember", "org", {"orgId": "123", "role": "organizations/123/roles/all",
                                                                  "member": f"serviceAccount:{RUNTIME}"})]
    messages = " | ".join(f.message for f in run(POWERS, [*_dedup_stack(), role, everything, *grants]))
    assert "resourcemanager.projects.setIamPolicy" in messages and "iam.serviceAccounts.actAs" in messages
    assert "do anything ('*')" in messages


def test_a_key_of_a_dedup_account_is_mandatory() -> None:
    key = res("gcp:serviceaccount/key:Key", "sched-key", {"serviceAccountId": f"projects/p/serviceAccounts/{SCHED}"})
    [finding] = run(POWERS, [*_dedup_stack(), key])
    assert "key of the dedup job's Scheduler account" in finding.message


def test_a_grant_the_component_would_not_make_is_named_unless_declared() -> None:
    extra = _project_member("roles/pubsub.publisher", f"serviceAccount:{RUNTIME}")
    [finding] = run(EXPECTED, [*_dedup_stack(), extra])
    assert finding.level == "mandatory" and "grant-publisher (roles/pubsub.publisher" in finding.message
    assert run(EXPECTED, [*_dedup_stack(), extra], {"declaredRoles": ["roles/pubsub.publisher"]}) == []


def test_a_dedup_service_without_a_runtime_account_is_mandatory() -> None:
    [finding] = run(EXPECTED, [service()])
    assert "default service account" in finding.message and "roles/editor" in finding.message


def test_the_rules_page_names_the_permission_tables_date_and_source() -> None:
    from scheduler_dedup.policies.reading.permissions import TABLE_DATE, TABLE_SOURCE
    from scheduler_dedup.policies.rules.iam import dedup_identity_powers

    doc = dedup_identity_powers.__doc__ or ""
    assert f"read {TABLE_DATE}" in doc and TABLE_SOURCE.split()[0] in doc


def test_a_custom_role_named_by_its_output_at_preview_is_read_through_its_dependency() -> None:
    """At ``pulumi preview`` the role's name is unknown; the engine's property dependency names the custom role."""
    role = res("gcp:projects/iAMCustomRole:IAMCustomRole", "extra",
               {"project": "p", "roleId": "extra", "permissions": ["iam.serviceAccounts.getOpenIdToken"], "name": UNKNOWN})
    grant = res("gcp:projects/iAMMember:IAMMember", "grant",
                {"project": "p", "role": UNKNOWN, "member": "group:ops@example.com"}, deps={"role": [role.urn]})
    findings = run("dedup-identity-powers", [*good_stack(), role, grant])
    assert any("getOpenIdToken" in f.message and "the role extra defines" in f.message for f in findings), findings


def test_a_role_output_the_pack_cannot_trace_is_a_finding() -> None:
    grant = res("gcp:projects/iAMMember:IAMMember", "grant",
                {"project": "p", "role": UNKNOWN, "member": "group:ops@example.com"})
    findings = run("dedup-identity-powers", [*good_stack(), grant])
    assert any("cannot trace to a custom role" in f.message for f in findings), findings
