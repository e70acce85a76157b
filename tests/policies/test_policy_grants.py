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


def _custom_role(permissions: list[str]) -> None:
    gcp.projects.IAMCustomRole("extra", project="p", role_id="dedupExtra", title="extra", permissions=permissions)
    gcp.projects.IAMMember("extra-grant", project="p", role="projects/p/roles/dedupExtra",
                           member=f"serviceAccount:{RUNTIME}")


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
