"""Rules on IAM grants in the stack: no public invoker (or disabled invoker check) on a Cloud Run service or gen2
function, and no basic (primitive) role granted to anyone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.model import Resource, get, is_unknown, policy_bindings


# ---------------------------------------------------------------- cloud-run-no-public-invoker

_RUN_IAM_TYPES = frozenset({
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember",
    "gcp:cloudrunv2/serviceIamBinding:ServiceIamBinding",
    "gcp:cloudrunv2/serviceIamPolicy:ServiceIamPolicy",
    "gcp:cloudrun/iamMember:IamMember",
    "gcp:cloudrun/iamBinding:IamBinding",
    "gcp:cloudrun/iamPolicy:IamPolicy",
    "gcp:cloudfunctionsv2/functionIamMember:FunctionIamMember",
    "gcp:cloudfunctionsv2/functionIamBinding:FunctionIamBinding",
    "gcp:cloudfunctionsv2/functionIamPolicy:FunctionIamPolicy",
})


#: Roles that let a member call a Cloud Run service or a gen2 function
#: (https://cloud.google.com/run/docs/reference/iam/roles).
_INVOKER_ROLES = frozenset({"roles/run.invoker", "roles/cloudfunctions.invoker", "roles/run.servicesInvoker"})


def _is_container_level_iam(resource_type: str) -> bool:
    """Project, folder or organization IAM member/binding/policy resources."""
    module = resource_type.split(":")[1].split("/")[0] if resource_type.count(":") == 2 else ""
    kind = resource_type.rsplit(":", 1)[-1].lower()
    return module in ("projects", "folder", "organizations") and kind.startswith("iam")


def _members(props: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """(role, member) pairs of an IAM member, binding or policy resource; unknown entries skipped."""
    pairs: list[tuple[str | None, str]] = []
    role = get(props, "role")
    role_s = role if isinstance(role, str) and not is_unknown(role) else None
    member = get(props, "member")
    if isinstance(member, str) and not is_unknown(member):
        pairs.append((role_s, member))
    members = get(props, "members")
    if isinstance(members, list):
        pairs.extend((role_s, m) for m in members if isinstance(m, str) and not is_unknown(m))
    bindings = policy_bindings(get(props, "policyData"))
    for binding in bindings if isinstance(bindings, list) else []:
        b_role = binding.get("role") if isinstance(binding.get("role"), str) else None
        pairs.extend((b_role, m) for m in binding.get("members") or [] if isinstance(m, str))
    return pairs


def cloud_run_no_public_invoker(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """No ``allUsers``/``allAuthenticatedUsers`` on a Cloud Run service (v1, v2, functions gen2) or its IAM resources, and no disabled invoker check.

    The dedup handler must only be called by the Scheduler identity (roles/run.invoker on this service):
    a public invoker lets anyone trigger runs. ``invokerIamDisabled: true`` (v2) and the v1 annotation
    ``run.googleapis.com/invoker-iam-disabled`` switch the invoker check off entirely
    (https://cloud.google.com/run/docs/securing/managing-access#invoker_check).
    """
    messages: list[str] = []
    if resource.type in _RUN_IAM_TYPES:
        for role, member in _members(resource.props):
            if member in limits.PUBLIC_MEMBERS:
                messages.append(f"{member} is granted {role or 'a role'} on a Cloud Run service: remove it and grant "
                                "roles/run.invoker to the Scheduler job's service account only "
                                "(serviceAccount:<email>)")
    elif _is_container_level_iam(resource.type):
        # A project/folder/organization grant of an invoker role reaches every service below it.
        for role, member in _members(resource.props):
            if member in limits.PUBLIC_MEMBERS and role in _INVOKER_ROLES:
                scope = {"projects": "project", "folder": "folder"}.get(resource.type.split(":")[1].split("/")[0],
                                                                           "organization")
                messages.append(f"{member} is granted {role} on the whole {scope}, which makes every Cloud Run "
                                "service in it public: remove it and grant "
                                "roles/run.invoker on the dedup service to the Scheduler job's service account only")
    elif resource.type == "gcp:cloudrunv2/service:Service":
        if get(resource.props, "invokerIamDisabled") is True:
            messages.append("invokerIamDisabled is true, so anyone can invoke the service: remove it (or set false) and "
                            "grant roles/run.invoker to the Scheduler job's service account")
    elif resource.type == "gcp:cloudrun/service:Service":
        flag = get(resource.props, "metadata.annotations")
        value = flag.get("run.googleapis.com/invoker-iam-disabled") if isinstance(flag, Mapping) else None
        if isinstance(value, str) and value.lower() == "true":
            messages.append("annotation run.googleapis.com/invoker-iam-disabled=true lets anyone invoke the service: "
                            "remove it and grant roles/run.invoker to the Scheduler job's service account")
    return messages


# ---------------------------------------------------------------- no-primitive-roles

def no_primitive_roles(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """No basic role (``roles/owner``, ``roles/editor``, ``roles/viewer``) is granted by any IAM member, binding or policy resource.

    Basic roles carry thousands of permissions across the project
    (https://cloud.google.com/iam/docs/roles-overview#basic); the component needs only roles/run.invoker
    and roles/datastore.user. Config ``forbiddenRoles`` replaces the list.
    """
    token = resource.type.split(":")[-1].lower()
    if "iam" not in token:
        return []
    forbidden = [r for r in config.get("forbiddenRoles") or limits.PRIMITIVE_ROLES if isinstance(r, str)]
    messages = []
    seen: set[tuple[str, str]] = set()
    for role, member in _members(resource.props):
        if role in forbidden and (role, member) not in seen:
            seen.add((role, member))
            messages.append(f"{member} is granted the basic role {role}: grant a predefined role with only what it "
                            "needs instead (roles/run.invoker to call the service, roles/datastore.user for Firestore)")
    role = get(resource.props, "role")
    if role in forbidden and not any(r == role for r, _ in seen):
        messages.append(f"this resource grants the basic role {role}: grant a narrower predefined role instead")
    return messages
