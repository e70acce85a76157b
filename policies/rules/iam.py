"""Rules on IAM grants in the stack: no public invoker (or disabled invoker check) on a Cloud Run service or gen2
function, no basic (primitive) role granted to anyone, and no broad grant to a dedup job's own identities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.model import Resource, get, is_unknown, policy_bindings
from scheduler_dedup.policies.rules.base import narrows_to_a_resource
from scheduler_dedup.policies.reading.topology import (
    APP_ENGINE_VERSION,
    CLOUD_FUNCTION_V2,
    CLOUD_RUN_SERVICE,
    CLOUD_RUN_SERVICE_V1,
    Identities,
    Topology,
    env_value,
    service_env,
)


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


# ---------------------------------------------------------------- dedup-identity-no-broad-grants

#: Roles that, granted on a whole project, folder or organization without an IAM condition, give a dedup identity
#: far more than its job: administer or deploy every Cloud Run service (run.admin, run.developer), act as every
#: service account (iam.serviceAccountUser, TokenCreator, OpenIdTokenCreator), or read and write every
#: Firestore database and Spanner database of the project (datastore.user/owner, spanner.databaseUser/Admin).
#: Sources: https://cloud.google.com/run/docs/reference/iam/roles, https://cloud.google.com/iam/docs/service-account-permissions,
#: https://cloud.google.com/firestore/docs/security/iam, https://cloud.google.com/spanner/docs/iam.
BROAD_ROLES = ("roles/run.admin", "roles/run.developer", "roles/iam.serviceAccountUser",
               "roles/iam.serviceAccountTokenCreator", "roles/iam.serviceAccountOpenIdTokenCreator",
               "roles/datastore.user", "roles/datastore.owner", "roles/spanner.databaseUser",
               "roles/spanner.databaseAdmin", "roles/cloudscheduler.admin")

#: Roles that let a principal mint tokens as (or act as) a service account
#: (https://cloud.google.com/iam/docs/service-account-permissions#token-creator-role).
TOKEN_ROLES = ("roles/iam.serviceAccountOpenIdTokenCreator", "roles/iam.serviceAccountTokenCreator",
               "roles/iam.serviceAccountUser", "roles/iam.workloadIdentityUser")

#: The Cloud Scheduler service agent's domain: the one principal that needs to mint the Scheduler account's
#: OIDC tokens (https://cloud.google.com/scheduler/docs/http-target-auth#add).
SCHEDULER_AGENT_DOMAIN = "@gcp-sa-cloudscheduler.iam.gserviceaccount.com"

_SERVICE_ACCOUNT_IAM = frozenset({"gcp:serviceaccount/iAMMember:IAMMember", "gcp:serviceaccount/iAMBinding:IAMBinding",
                                  "gcp:serviceaccount/iAMPolicy:IAMPolicy"})


def _scope(resource_type: str) -> str:
    return {"projects": "project", "folder": "folder"}.get(resource_type.split(":")[1].split("/")[0], "organization")


def dedup_identity_no_broad_grants(resources: Sequence[Resource],
                                   config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """No dedup identity (a dedup job's runtime, build or Scheduler account) holds a broad role on a whole project,
    folder or organization without an IAM condition, and nobody but Cloud Scheduler's service agent may mint tokens
    as a dedup job's Scheduler account.

    A principal that can mint the Scheduler account's OIDC tokens can call the handler as Scheduler; one with
    project-wide run.admin or datastore.user can rewrite the service or every run record. Grants made outside the
    stack are invisible to any policy pack. Config ``broadRoles`` replaces :data:`BROAD_ROLES`.
    """
    identities = Identities.of(resources)
    broad = [r for r in config.get("broadRoles") or BROAD_ROLES if isinstance(r, str)]
    found: list[tuple[Resource | None, str]] = []
    for resource in resources:
        if _is_container_level_iam(resource.type):
            if narrows_to_a_resource(get(resource.props, "condition")):
                continue  # a grant conditioned on resource.name (e.g. datastore.user on one database) is narrow
            by_role: dict[str | None, list[str]] = {}
            for role, member in _members(resource.props):
                by_role.setdefault(role, []).append(member)
            role = get(resource.props, "role")
            if isinstance(role, str) and role not in by_role:
                by_role[role] = []
            for role_name, members in by_role.items():
                if role_name not in broad:
                    continue
                for member, what in identities.in_grant(resource, members):
                    found.append((resource, f"{member}, the dedup job's {what} account, is granted {role_name} on the "
                                            f"whole {_scope(resource.type)} without a condition on resource.name: grant it on the one "
                                            "resource it needs (the component's own grants are scoped: run.invoker "
                                            "on its service, datastore.user with a condition on its database), or "
                                            "add an IAM condition on resource.name"))
        elif resource.type in _SERVICE_ACCOUNT_IAM:
            target = get(resource.props, "serviceAccountId")
            account = Resource(resource.type, resource.name, resource.urn, {}, dependencies={
                "member": list(resource.dependencies.get("serviceAccountId", ()))})
            holders = identities.in_grant(account, [f"serviceAccount:{target.rsplit('/', 1)[-1]}"]
                                          if isinstance(target, str) and not is_unknown(target) else [])
            if not any(kind == "Scheduler" for _, kind in holders):
                continue
            for role, member in _members(resource.props):
                if role in TOKEN_ROLES and not member.endswith(SCHEDULER_AGENT_DOMAIN):
                    found.append((resource, f"{member} is granted {role} on the dedup job's Scheduler account, so it "
                                            "can mint that account's OIDC tokens and call the handler as Cloud "
                                            "Scheduler: remove the grant (only Cloud Scheduler's service agent, "
                                            f"service-PROJECT_NUMBER{SCHEDULER_AGENT_DOMAIN}, needs it)"))
    return found


# ---------------------------------------------------------------- dedup-cloud-build-trigger-grant

#: Predefined roles holding cloudbuild.builds.create, .get and .list (https://cloud.google.com/build/docs/iam-roles-permissions;
#: the basic roles too, which no-primitive-roles refuses on its own).
CLOUD_BUILD_RUN_ROLES = frozenset({"roles/cloudbuild.builds.editor", "roles/cloudbuild.builds.builder",
                                   "roles/cloudbuild.admin", "roles/editor", "roles/owner"})
#: Where each kind of handler service names its runtime service account.
_RUNTIME_ACCOUNT_PATHS = {CLOUD_RUN_SERVICE: "template.serviceAccount", APP_ENGINE_VERSION: "serviceAccount",
                          CLOUD_RUN_SERVICE_V1: "template.spec.serviceAccountName",
                          CLOUD_FUNCTION_V2: "serviceConfig.serviceAccountEmail"}


def dedup_cloud_build_trigger_grant(resources: Sequence[Resource],
                                    config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """A handler whose proxy target is a Cloud Build trigger has, in this stack, a grant that lets its runtime service
    account run the trigger and list its builds.

    ``triggers.run`` needs ``cloudbuild.builds.create``, the existence check ``cloudbuild.builds.get`` and
    ``cloudbuild.builds.list`` (Cloud Build REST reference); ``roles/cloudbuild.builds.editor`` is the least
    predefined role with all three. Cloud Build grants roles on projects only and recognizes no IAM condition's
    resource attributes (https://cloud.google.com/iam/docs/conditions-resource-attributes lists no
    ``cloudbuild.googleapis.com``), so the grant must be a project-level member, binding or policy on the
    trigger's project, and a grant with a condition is reported as one that may never apply. Services whose
    runtime account or target is unknown (preview) or not set pass; a grant made outside this stack cannot be
    seen, hence advisory. The trigger's own service account (``iam.serviceAccounts.actAs``) is not visible here.
    """
    findings: list[tuple[Resource | None, str]] = []
    grants = [r for r in resources if _is_container_level_iam(r.type) and r.type.startswith("gcp:projects/")]
    for service in Topology.of(resources).dedup_services():
        env = service_env(service)
        if env_value(env, "DEDUP_TARGET_TYPE", None) != "cloud_build_trigger":
            continue
        trigger = env_value(env, "DEDUP_TARGET", None)
        account = get(service.props, _RUNTIME_ACCOUNT_PATHS.get(service.type, "serviceAccount"))
        if not isinstance(trigger, str) or is_unknown(trigger) or not isinstance(account, str) or is_unknown(account):
            continue
        parts = trigger.split("/")
        if len(parts) < 2:
            continue  # dedup-handler-settings reports the malformed target
        project, member = parts[1], f"serviceAccount:{account}".lower()
        matching = [grant for grant in grants
                    if get(grant.props, "project") in (project, None) or is_unknown(get(grant.props, "project"))
                    if any(role in CLOUD_BUILD_RUN_ROLES and m.lower() == member for role, m in _members(grant.props))]
        if any(get(grant.props, "condition") is None for grant in matching):
            continue
        if matching:
            findings.append((service, f"service {service.name} runs Cloud Build trigger {trigger}, but every grant of a "
                                      f"Cloud Build role to {account} on project {project} has an IAM condition, and "
                                      "Cloud Build evaluates no resource attributes: remove the condition (the role "
                                      "applies to the whole project; Cloud Build has nothing narrower)"))
            continue
        findings.append((service, f"service {service.name} runs Cloud Build trigger {trigger}, but no grant in this stack "
                                  f"lets its runtime account {account} run it: grant roles/cloudbuild.builds.editor on "
                                  f"project {project} to serviceAccount:{account} (DedupScheduledJob does with "
                                  "cloud_build_trigger_target), or disable this rule if the grant is made elsewhere"))
    return findings
