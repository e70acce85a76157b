"""Grants judged by what they can do, through the pack's own entry point: the hand-written good program
(policies/examples/raw_bad_program.py) plus one change each, run under mocks by ``check_program``."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pulumi_gcp as gcp
import pytest

from scheduler_dedup.policies.offline.check import check_program

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
SCHED = "sched@p.iam.gserviceaccount.com"
RUNTIME = "run@p.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def raw_program() -> ModuleType:
    spec = importlib.util.spec_from_file_location("raw_bad_program_grants", EXAMPLES / "raw_bad_program.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _custom_role(permissions: list[str], *, by_output: bool = False, member: str = f"serviceAccount:{RUNTIME}") -> None:
    """A custom role of the stack and a grant of it, by its literal name or (``by_output``) by its ``name`` output."""
    role = gcp.projects.IAMCustomRole("extra", project="p", role_id="dedupExtra", title="extra", permissions=permissions)
    gcp.projects.IAMMember("extra-grant", project="p", role=role.name if by_output else "projects/p/roles/dedupExtra",
                           member=member)


def _condition(expression: str) -> gcp.projects.IAMMemberConditionArgs:
    return gcp.projects.IAMMemberConditionArgs(title="c", expression=expression)


CHANGES: dict[str, tuple[Callable[[], object], str]] = {
    # who can mint the Scheduler account's tokens
    "a key of the Scheduler account": (lambda: gcp.serviceaccount.Key(
        "sched-key", service_account_id=f"projects/p/serviceAccounts/{SCHED}"), "key of the dedup job's Scheduler"),
    "project-wide OpenIdTokenCreator to a group": (lambda: gcp.projects.IAMMember(
        "oidc-all", project="p", role="roles/iam.serviceAccountOpenIdTokenCreator", member="group:ops@example.com"),
        f"mint tokens for {SCHED}"),
    "project-wide serviceAccountUser to a group": (lambda: gcp.projects.IAMMember(
        "user-all", project="p", role="roles/iam.serviceAccountUser", member="group:ops@example.com"),
        f"mint tokens for {RUNTIME}"),
    "TokenCreator on the runtime account to a group": (lambda: gcp.serviceaccount.IAMMember(
        "mint-runtime", service_account_id=f"projects/p/serviceAccounts/{RUNTIME}",
        role="roles/iam.serviceAccountTokenCreator", member="group:ops@example.com"), "iam.serviceAccounts.getAccessToken"),
    # admin powers for the runtime identity
    "projectIamAdmin on the project": (lambda: gcp.projects.IAMMember(
        "iam-admin", project="p", role="roles/resourcemanager.projectIamAdmin", member=f"serviceAccount:{RUNTIME}"),
        "resourcemanager.projects.setIamPolicy"),
    "securityAdmin on the organization": (lambda: gcp.organizations.IAMMember(
        "sec-admin", org_id="123", role="roles/iam.securityAdmin", member=f"serviceAccount:{RUNTIME}"),
        "on the organization"),
    "folderAdmin on a folder": (lambda: gcp.folder.IAMMember(
        "folder-admin", folder="folders/456", role="roles/resourcemanager.folderAdmin",
        member=f"serviceAccount:{RUNTIME}"), "resourcemanager.folders.setIamPolicy"),
    "a custom role with setIamPolicy, actAs and getOpenIdToken": (lambda: _custom_role(
        ["resourcemanager.projects.setIamPolicy", "iam.serviceAccounts.actAs", "iam.serviceAccounts.getOpenIdToken"]),
        "iam.serviceAccounts.getOpenIdToken"),
    "a custom role with *": (lambda: _custom_role(["*"]), "do anything ('*')"),
    "datastore.user with a condition that is always true": (lambda: gcp.projects.IAMMember(
        "ds-true", project="p", role="roles/datastore.user", member=f"serviceAccount:{RUNTIME}",
        condition=_condition('resource.name.startsWith("projects/") || true')), "ds-true (roles/datastore.user"),
    "run.admin with a negated condition": (lambda: gcp.projects.IAMMember(
        "run-not-x", project="p", role="roles/run.admin", member=f"serviceAccount:{RUNTIME}",
        condition=_condition('!resource.name.endsWith("x")')), "run.services.setIamPolicy"),
    # roles the pack's table does not know are unknown, never harmless
    "compute.admin (not in the table) on the project": (lambda: gcp.projects.IAMMember(
        "compute-admin", project="p", role="roles/compute.admin", member=f"serviceAccount:{RUNTIME}"),
        "the pack cannot judge this role, neither in the pack's table"),
    "pubsub.admin (not in the table) on the project to a group": (lambda: gcp.projects.IAMMember(
        "pubsub-admin", project="p", role="roles/pubsub.admin", member="group:ops@example.com"),
        f"{SCHED} (the dedup job's Scheduler account)"),
    "workloadIdentityPoolAdmin (not in the table) on the Scheduler account": (lambda: gcp.serviceaccount.IAMMember(
        "wif-admin", service_account_id=f"projects/p/serviceAccounts/{SCHED}",
        role="roles/iam.workloadIdentityPoolAdmin", member="group:ops@example.com"), "cannot judge"),
    "a custom role defined outside the stack": (lambda: gcp.projects.IAMMember(
        "outside-role", project="p", role="projects/p/roles/definedElsewhere", member=f"serviceAccount:{RUNTIME}"),
        "nor a custom role of this stack"),
    # a custom role granted by its output, as usually written
    "a custom role with * granted by its output": (lambda: _custom_role(["*"], by_output=True), "do anything ('*')"),
    "a custom role with getOpenIdToken granted by its output to a group": (lambda: _custom_role(
        ["iam.serviceAccounts.getOpenIdToken"], by_output=True, member="group:ops@example.com"),
        f"mint tokens for {SCHED}"),
    # a condition narrows only to a resource inside the intended one
    "datastore.user pinned to every resource of the project": (lambda: gcp.projects.IAMMember(
        "ds-project", project="p", role="roles/datastore.user", member=f"serviceAccount:{RUNTIME}",
        condition=_condition('resource.name.startsWith("projects/p/")')), "not inside projects/p/databases/(default)"),
    "datastore.user pinned to another database": (lambda: gcp.projects.IAMMember(
        "ds-other", project="p", role="roles/datastore.user", member=f"serviceAccount:{RUNTIME}",
        condition=_condition('resource.name == "projects/p/databases/other"')), "ds-other (roles/datastore.user"),
    "OpenIdTokenCreator pinned to a path that merely contains the Scheduler account's": (lambda: gcp.projects.IAMMember(
        "oidc-contains", project="p", role="roles/iam.serviceAccountOpenIdTokenCreator", member="group:ops@example.com",
        condition=_condition(f'resource.name.startsWith("projects/p/") && '
                             f'resource.name.endsWith("/serviceAccounts/{SCHED}")')),
        f"mint tokens for {SCHED}"),
    "OpenIdTokenCreator pinned to every account of the project": (lambda: gcp.projects.IAMMember(
        "oidc-accounts", project="p", role="roles/iam.serviceAccountOpenIdTokenCreator", member="group:ops@example.com",
        condition=_condition('resource.name.startsWith("projects/p/serviceAccounts/")')), f"mint tokens for {SCHED}"),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=lambda name: name.replace(" ", "-"))
def test_each_dangerous_grant_added_to_the_good_program_is_a_mandatory_finding(raw_program: ModuleType,
                                                                               change: str) -> None:
    add, needle = CHANGES[change]

    def program() -> None:
        raw_program.good_program()
        add()

    findings = [f for f in check_program(program) if f.level == "mandatory"]
    assert findings, change
    assert {f.rule for f in findings} <= {"dedup-identity-powers", "dedup-identity-expected-grants",
                                          "no-primitive-roles"}, findings
    assert any(needle in f.message for f in findings), [f.message for f in findings]


def test_the_good_program_without_a_runtime_account_is_a_mandatory_finding(raw_program: ModuleType,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raw_program, "RUNTIME_ACCOUNT", None)
    findings = check_program(raw_program.good_program)
    assert [(f.rule, f.level) for f in findings] == [("dedup-identity-expected-grants", "mandatory")], findings
    assert "Compute Engine default service account" in findings[0].message


def test_a_grant_narrowed_to_the_store_database_by_cel_passes(raw_program: ModuleType) -> None:
    def program() -> None:
        raw_program.good_program()
        gcp.projects.IAMMember("ds-one", project="p", role="roles/datastore.user", member=f"serviceAccount:{RUNTIME}",
                               condition=_condition('resource.name == "projects/p/databases/(default)" || '
                                                    'resource.name.startsWith("projects/p/databases/(default)/")'))

    assert check_program(program) == []


def test_the_pack_and_the_component_agree_on_the_component_type() -> None:
    from scheduler_dedup.infra.job.component import TYPE_TOKEN
    from scheduler_dedup.policies.rules.iam import COMPONENT_TYPE

    assert COMPONENT_TYPE == TYPE_TOKEN


@pytest.mark.parametrize("expression", [
    'resource.name == "projects/p/databases/(default)"',
    'resource.name.startsWith("projects/p/databases/(default)/")',
])
def test_datastore_user_pinned_inside_the_store_database_passes(raw_program: ModuleType, expression: str) -> None:
    def program() -> None:
        raw_program.good_program()
        gcp.projects.IAMMember("ds-one", project="p", role="roles/datastore.user", member=f"serviceAccount:{RUNTIME}",
                               condition=_condition(expression))

    assert check_program(program) == []


def test_the_scheduler_agent_pinned_to_the_scheduler_account_passes(raw_program: ModuleType) -> None:
    """Token creation narrowed to the Scheduler account itself, for Cloud Scheduler's service agent."""
    def program() -> None:
        raw_program.good_program()
        gcp.projects.IAMMember("agent-oidc", project="p", role="roles/iam.serviceAccountOpenIdTokenCreator",
                               member="serviceAccount:service-123@gcp-sa-cloudscheduler.iam.gserviceaccount.com",
                               condition=_condition(f'resource.name == "projects/-/serviceAccounts/{SCHED}"'))

    assert check_program(program) == []


def test_a_harmless_custom_role_granted_by_its_output_passes(raw_program: ModuleType) -> None:
    """Read through the grant's dependency on the role, a custom role with only harmless permissions is judged
    harmless (the same grant fails with ``*``, above)."""
    def program() -> None:
        raw_program.good_program()
        _custom_role(["datastore.entities.get"], by_output=True)

    assert [f for f in check_program(program) if f.rule == "dedup-identity-powers"] == []


def test_a_role_the_table_lacks_is_judged_by_the_permissions_given_in_the_config(raw_program: ModuleType) -> None:
    def program() -> None:
        raw_program.good_program()
        gcp.projects.IAMMember("compute-admin", project="p", role="roles/compute.admin",
                               member=f"serviceAccount:{RUNTIME}")

    def powers(permissions: list[str]) -> list[str]:
        config = {"dedup-identity-powers": {"rolePermissions": {"roles/compute.admin": permissions}}}
        return [f.message for f in check_program(program, policy_config=config) if f.rule == "dedup-identity-powers"]

    assert any("change IAM (compute.instances.setIamPolicy)" in m for m in powers(["compute.instances.setIamPolicy"]))
    assert powers(["compute.instances.get"]) == []


def test_a_role_declared_on_the_component_that_the_table_lacks_is_a_finding(tmp_path: Path) -> None:
    """good-image.yaml plus one declared job role: a declared role is judged by its permissions like any other grant,
    and one the pack cannot judge is named, never passed as harmless."""
    import yaml

    from scheduler_dedup.policies.offline.check import check_stack_config

    root = EXAMPLES.parents[1]
    config = yaml.safe_load((EXAMPLES / "good-image.yaml").read_text())
    config["config"]["scheduler-dedup:jobRoles"] = [{"role": "roles/pubsub.admin", "resource": "projects/my-project-id"}]
    stack = tmp_path / "Pulumi.declared.yaml"
    stack.write_text(yaml.safe_dump(config))
    findings = [f for f in check_stack_config(stack, root / "Pulumi.yaml") if f.level == "mandatory"]
    assert any(f.rule == "dedup-identity-powers" and "roles/pubsub.admin" in f.message and "cannot judge" in f.message
               for f in findings), findings


WORKFLOW = "projects/p/locations/europe-west1/workflows/w"


@pytest.mark.parametrize(("expression", "passes"), [
    (f'resource.name == "{WORKFLOW}" || resource.name.startsWith("{WORKFLOW}/")', True),
    ('resource.name.startsWith("projects/p/locations/europe-west1/workflows/")', False),
    ('resource.name == "projects/p/locations/europe-west1/workflows/other"', False),
])
def test_workflows_invoker_counts_as_the_components_only_pinned_to_the_target(raw_program: ModuleType,
                                                                               expression: str, passes: bool) -> None:
    target = {"DEDUP_JOB": None, "DEDUP_TARGET_TYPE": "workflows", "DEDUP_TARGET": WORKFLOW}

    def program() -> None:
        raw_program.good_program(target)
        gcp.projects.IAMMember("wf-invoker", project="p", role="roles/workflows.invoker",
                               member=f"serviceAccount:{RUNTIME}", condition=_condition(expression))

    findings = [f for f in check_program(program) if f.rule == "dedup-identity-expected-grants"]
    assert (findings == []) is passes, findings
