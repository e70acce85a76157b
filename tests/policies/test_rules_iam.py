"""The IAM rules (policies/rules/iam.py) on engine-shaped (camelCase) properties: compliant, violating,
missing/unknown, and config override."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler_dedup.policies.model import UNKNOWN

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
