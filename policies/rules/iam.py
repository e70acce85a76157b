"""Rules on IAM grants in the stack: no public invoker (or disabled invoker check) on a Cloud Run service or gen2
function, no basic (primitive) role granted to anyone, and no broad grant to a dedup job's own identities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.model import UNKNOWN, Resource, get, is_unknown, policy_bindings
from scheduler_dedup.policies.rules.base import rule
from scheduler_dedup.policies.reading.conditions import ConditionScope, condition_scope
from scheduler_dedup.infra.job.function_sources import is_function_sources_grant
from scheduler_dedup.policies.reading.permissions import CUSTOM_ROLE_TYPES, STORE_DATA_ROLE_EXTRAS, TABLE_DATE, Powers, RoleBook
from scheduler_dedup.policies.reading.topology import (
    APP_ENGINE_VERSION,
    CLOUD_FUNCTION_V2,
    CLOUD_RUN_SERVICE,
    CLOUD_RUN_SERVICE_V1,
    Identities,
    Topology,
    env_value,
    secret_env_names,
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
    return [(role, member) for role, member, _ in _member_grants(props)]


def _member_grants(props: Mapping[str, Any]) -> list[tuple[str | None, str, Any]]:
    """(role, member, condition) of an IAM member, binding or policy resource: the resource's ``condition``, or each
    policy binding's own (a policy may hold the same role and member in several bindings, each with its condition);
    unknown entries skipped."""
    found: list[tuple[str | None, str, Any]] = []
    role = get(props, "role")
    role_s = role if isinstance(role, str) and not is_unknown(role) else None
    condition = get(props, "condition")
    member = get(props, "member")
    if isinstance(member, str) and not is_unknown(member):
        found.append((role_s, member, condition))
    members = get(props, "members")
    if isinstance(members, list):
        found.extend((role_s, m, condition) for m in members if isinstance(m, str) and not is_unknown(m))
    bindings = policy_bindings(get(props, "policyData"))
    for binding in bindings if isinstance(bindings, list) else []:
        b_role = binding.get("role") if isinstance(binding.get("role"), str) else None
        found.extend((b_role, m, binding.get("condition")) for m in binding.get("members") or [] if isinstance(m, str))
    return found


@rule(name="cloud-run-no-public-invoker", enforcement="mandatory",
      description="No allUsers or allAuthenticatedUsers on a Cloud Run service or its IAM resources, and no disabled "
                  "invoker check.")
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

@rule(name="no-primitive-roles", enforcement="mandatory",
      description="No roles/owner, roles/editor or roles/viewer granted to any member by the stack.",
      config_schema={"forbiddenRoles": {"type": "array", "items": {"type": "string"}, "default": list(limits.PRIMITIVE_ROLES),
                                        "description": "roles no IAM resource of the stack may grant"}})
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


# ---------------------------------------------------------------- dedup-identity-powers, dedup-identity-expected-grants

#: The Cloud Scheduler service agent's domain: the one principal that needs to mint the Scheduler account's
#: OIDC tokens (https://cloud.google.com/scheduler/docs/http-target-auth#add).
SCHEDULER_AGENT_DOMAIN = "@gcp-sa-cloudscheduler.iam.gserviceaccount.com"
#: The component's type token (infra/job/component.py ``TYPE_TOKEN``; a test keeps the two equal).
COMPONENT_TYPE = "scheduler-dedup:index:DedupScheduledJob"

_SERVICE_ACCOUNT_IAM = frozenset({"gcp:serviceaccount/iAMMember:IAMMember", "gcp:serviceaccount/iAMBinding:IAMBinding",
                                  "gcp:serviceaccount/iAMPolicy:IAMPolicy"})
SERVICE_ACCOUNT_KEY = "gcp:serviceaccount/key:Key"


def _scope(resource_type: str) -> str:
    return {"projects": "project", "folder": "folder"}.get(resource_type.split(":")[1].split("/")[0], "organization")


def _is_iam_grant(resource_type: str) -> bool:
    """An IAM member, binding or policy resource of any level (``...IamMember``, ``...IAMBinding``...)."""
    kind = resource_type.rsplit(":", 1)[-1].lower()
    return kind.startswith("iam") and kind.endswith(("member", "binding", "policy")) or \
        kind.endswith(("iammember", "iambinding", "iampolicy"))


@dataclass(frozen=True)
class Grant:
    """One role given to one member by one IAM resource of the stack.

    Attributes:
        resource: the IAM member, binding or policy resource.
        role: the role name (None: not known yet).
        member: the member (``serviceAccount:EMAIL``, ``group:...``), or a label of a stack account at preview.
        level: ``project``, ``folder``, ``organization``, ``service account`` or ``resource``.
        scope: what its condition limits it to (container levels only).
        account: the email (or ``projects/P/serviceAccounts/EMAIL``) of the account a service-account-level grant is on.
    """

    resource: Resource
    role: str | None
    member: str
    level: str
    scope: ConditionScope
    account: str | None = None
    role_source: str | None = None

    @property
    def role_shown(self) -> str:
        """The role's name, or where it comes from when its name is not known yet."""
        if self.role is not None:
            return self.role
        if self.role_source is not None:
            return f"the role {self.role_source.rsplit('::', 1)[-1]} defines"
        return "a role whose name the pack cannot read"

    @property
    def shown(self) -> str:
        return f"{self.resource.name} ({self.role_shown} to {self.member or 'a member'} on the {self.level})"


def _grants(resources: Sequence[Resource]) -> list[Grant]:
    grants: list[Grant] = []
    custom_roles = {r.urn for r in resources if r.type in CUSTOM_ROLE_TYPES}
    for resource in resources:
        if not _is_iam_grant(resource.type):
            continue
        container = _is_container_level_iam(resource.type)
        level = (_scope(resource.type) if container else
                 "service account" if resource.type in _SERVICE_ACCOUNT_IAM else "resource")
        account = get(resource.props, "serviceAccountId") if level == "service account" else None
        account = account if isinstance(account, str) and not is_unknown(account) else None
        scope = condition_scope(get(resource.props, "condition"))
        pairs = _member_grants(resource.props)
        sources = [urn for urn in resource.dependencies.get("role", ()) if urn in custom_roles]
        source = sources[0] if len(sources) == 1 else None
        for role, member, condition in pairs:
            grants.append(Grant(resource, role, member, level, condition_scope(condition), account,
                                source if role is None else None))
        if not pairs and any(resource.dependencies.get(p) for p in ("member", "members")):
            role = get(resource.props, "role")
            role = role if isinstance(role, str) and not is_unknown(role) else None
            grants.append(Grant(resource, role, "", level, scope, account, source if role is None else None))
    return grants


def _holder(identities: Identities, grant: Grant) -> tuple[str, str] | None:
    """``(member, what)`` when the grant is to a dedup identity."""
    found = identities.in_grant(grant.resource, [grant.member] if grant.member else [])
    if grant.member:
        found = [(m, w) for m, w in found if m == grant.member or not m.startswith("serviceAccount:")]
    return found[0] if found else None


def _email(account: str) -> str:
    return account.rsplit("/", 1)[-1].removeprefix("serviceAccount:").lower()


def _accounts_reached(grant: Grant, identities: Identities, keyed: Sequence[Resource]) -> list[tuple[str, str]]:
    """The dedup accounts ``(email, what)`` a grant reaches: the one it is on (service-account level; an account
    named by its unique id, ``projects/P/serviceAccounts/123...``, which IAM accepts in place of the email
    (https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts/get), may be any of
    them), or, at project, folder or organization level, each one unless its condition pins other resources."""
    emails = {e.lower(): w for e, w in identities.emails.items()}
    if grant.level == "service account":
        if grant.account is not None:
            if _email(grant.account).isdigit():  # a unique id: it may be any dedup account's
                return sorted(emails.items())
            what = emails.get(_email(grant.account))
            return [(_email(grant.account), what)] if what else []
        deps = grant.resource.dependencies.get("serviceAccountId", ())
        return [(urn.rsplit("::", 1)[-1], identities.accounts[urn]) for urn in deps if urn in identities.accounts]
    if grant.level in ("project", "folder", "organization"):
        if grant.scope.unknown:
            return []
        if grant.scope.pins is None:
            return sorted(emails.items())
        return sorted((e, w) for e, w in emails.items() if any(_pin_reaches_account(pin, e) for pin in grant.scope.pins))
    return []


def _pin_reaches_account(pin: str, email: str) -> bool:
    """True unless ``pin`` (a resource name a condition limits ``resource.name`` to, with its children) provably
    leaves out the service account ``email``, whose name is ``projects/P/serviceAccounts/EMAIL``
    (https://cloud.google.com/iam/docs/conditions-attribute-reference#resource-name). Reached: the account itself
    (by email in any project, ``-`` included, or by a unique id, which cannot be told apart), a child of it, or a pin
    above it (``projects/P``, ``projects/P/serviceAccounts``); a pin that merely contains the account's path further
    down (``projects/p/secrets/projects/p/serviceAccounts/EMAIL``) is another resource."""
    account = ["projects", "", "serviceAccounts", email.lower()]
    for index, (segment, own) in enumerate(zip(pin.split("/"), account)):
        if index == 1:
            continue  # the project: an id, a number or "-" may all name the account's
        if index == 3 and segment.isdigit():
            continue  # the account's unique id: it may be this account
        if (segment.lower() if index == 3 else segment) != own:
            return False
    return True


@rule(name="dedup-identity-powers", enforcement="mandatory",
      description="Judged by the permissions a role carries (a dated table of predefined roles, the stack's custom "
                  "roles), at every level: nobody may act as or mint tokens for a dedup job's runtime, build or "
                  "Scheduler account (only Cloud Scheduler's service agent, the Scheduler account's OIDC tokens), "
                  "and no dedup identity may change IAM, administer the store or the service, or do anything ('*', a "
                  "basic role). A role it cannot judge is a finding where it could reach a dedup identity.",
      config_schema={"rolePermissions": {
          "type": "object", "default": {},
          "description": "role -> its permissions, for a role the pack's table does not know (as "
                         "https://cloud.google.com/iam/docs/roles-permissions lists them): the role is then judged by "
                         "them instead of being reported as unknown"}})
def dedup_identity_powers(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Judge each grant of the stack by the permissions its role carries (:mod:`~..reading.permissions`: the dated
    table of predefined roles and the stack's own custom roles), at every level (resource, service account, project,
    folder, organization):

    - nobody may act as or mint credentials for a dedup identity (runtime, build or Scheduler account): no
      ``iam.serviceAccounts.actAs/getAccessToken/getOpenIdToken/signJwt/signBlob`` or ``serviceAccountKeys.create``
      on it or on its project, folder or organization (unless a condition pins other resources), and no
      ``gcp.serviceaccount.Key`` of it; only Cloud Scheduler's service agent may mint the Scheduler account's OIDC
      tokens (https://cloud.google.com/scheduler/docs/http-target-auth#add);
    - a dedup identity may not change IAM (``*.setIamPolicy``), administer a store or a service, or hold ``*`` (a
      basic role), whoever made the grant, the component's declared extra roles included. The one exception is
      what a store's data role carries and no predefined role avoids, granted to the runtime identity on one resource
      (``STORE_DATA_ROLE_EXTRAS``: Spanner's ``roles/spanner.databaseUser`` also changes the schema).

    A principal that can mint the Scheduler account's tokens calls the handler as Scheduler, through Cloud Run IAM,
    the OIDC check and trust mode. Grants made outside the stack are invisible to any policy pack.

    Permission table (``PREDEFINED_ROLES``) read 2026-12-04 from https://cloud.google.com/iam/docs/understanding-roles
    and https://cloud.google.com/iam/docs/roles-permissions/SERVICE. A custom role granted by its output
    (``role=custom_role.name``) is read through the grant's dependency on it. A role the pack cannot judge (in neither
    the table nor the stack's custom roles, a custom role whose permissions are not known, or a name it cannot read
    and cannot trace) is a finding wherever it could give those powers: held by a dedup identity, or granted on a
    dedup account or on the project, folder or organization holding one (:func:`_unjudged`).
    """
    identities = Identities.of(resources)
    given = config.get("rolePermissions") or {}
    # the stack's own custom roles win over the config: what the stack defines is what IAM grants
    # (the config fills in only a custom role whose permissions are not known)
    configured = {str(role): frozenset(p for p in perms if isinstance(p, str))
                  for role, perms in (given.items() if isinstance(given, Mapping) else ()) if isinstance(perms, list)}
    book = RoleBook({**configured, **{name: perms for name, perms in RoleBook.of(resources).custom.items()
                                      if perms is not None or name not in configured}})
    found: list[tuple[Resource | None, str]] = []
    keys = [r for r in resources if r.type == SERVICE_ACCOUNT_KEY]
    emails = {e.lower(): w for e, w in identities.emails.items()}
    for key in keys:
        target = get(key.props, "serviceAccountId")
        what = emails.get(_email(target)) if isinstance(target, str) and not is_unknown(target) else None
        what = what or next((identities.accounts[u] for u in key.dependencies.get("serviceAccountId", ())
                             if u in identities.accounts), None)
        if what:
            found.append((key, f"{key.name} is a key of the dedup job's {what} account: whoever holds it can mint that "
                               "account's tokens (and call the handler as Scheduler, or act as the handler) from "
                               "anywhere, for up to the key's lifetime; remove the key (Cloud Run, Scheduler and Cloud "
                               "Build need none)"))
    for grant in _grants(resources):
        powers = book.powers(grant.role, grant.role_source)
        if not powers.known:
            unjudged = _unjudged(grant, book, identities, keys)
            if unjudged:
                found.append((grant.resource, unjudged))
            continue
        mints = ["*"] if powers.everything else powers.mints
        if mints:
            for email, what in _accounts_reached(grant, identities, keys):
                if (what == "Scheduler" and grant.member.endswith(SCHEDULER_AGENT_DOMAIN) and not powers.everything
                        and (grant.level == "service account"
                             or grant.scope.inside([f"projects/*/serviceAccounts/{email}"]) and not grant.scope.unknown)):
                    continue  # Cloud Scheduler's agent, on the Scheduler account itself
                where = ("on that account" if grant.level == "service account" else
                         f"on the whole {grant.level}" + ("" if grant.scope.pins is None else " (pinned to it)"))
                found.append((grant.resource,
                              f"{grant.member or 'a member'} is granted {grant.role_shown} {where} by "
                              f"{grant.resource.name}, "
                              f"which holds {', '.join(mints)}: it can act as or mint tokens for {email}, the dedup "
                              f"job's {what} account" + (", and call the handler as Cloud Scheduler" if what ==
                                                         "Scheduler" else "") +
                              ": remove the grant" + (f" (only Cloud Scheduler's service agent, service-PROJECT_NUMBER"
                                                      f"{SCHEDULER_AGENT_DOMAIN}, needs getOpenIdToken on it)"
                                                      if what == "Scheduler" else "")))
        holder = _holder(identities, grant)
        if holder is None:
            continue
        if grant.level in ("project", "folder", "organization") and grant.scope.unknown:
            continue
        extras = STORE_DATA_ROLE_EXTRAS.get(grant.role or "")
        if extras is not None and holder[1] == "runtime" and grant.level == "resource":
            powers = Powers(powers.permissions - extras[0])  # its store's data role: no narrower one exists
        dangers = [d for d in powers.dangers if not (d.startswith("act as") and grant.level in ("service account",
                                                                                              "resource"))]
        if dangers:
            member, what = holder
            found.append((grant.resource,
                          f"{member}, the dedup job's {what} account, is granted {grant.role_shown} on the "
                          f"{grant.level} by "
                          f"{grant.resource.name}: it can {' and '.join(dangers)}. A dedup identity needs none of "
                          "this: remove the grant, or grant a role with only the permissions the job's own work "
                          "needs, on the resource it works on"))
    return found


def _unjudged(grant: Grant, book: RoleBook, identities: Identities, keys: Sequence[Resource]) -> str | None:
    """The finding for a grant whose role the pack cannot judge, when that role could act on a dedup account or give
    a dedup identity a dangerous power; None when the grant reaches neither (or its condition is not known yet)."""
    if grant.level in ("project", "folder", "organization") and grant.scope.unknown:
        return None  # judged again at pulumi up, with the condition known
    reached = [f"{email} (the dedup job's {what} account)" for email, what in _accounts_reached(grant, identities, keys)]
    holder = _holder(identities, grant)
    if holder is not None:
        reached.insert(0, f"what {holder[0]}, the dedup job's {holder[1]} account, may do")
    if not reached:
        return None
    if grant.role is None and grant.role_source is None:
        why = "its name is an output the pack cannot trace to a custom role of this stack"
    elif grant.role_source is not None or grant.role in book.custom:
        why = "a custom role of this stack whose permissions are not known"
    else:
        why = (f"neither in the pack's table of predefined roles (read {TABLE_DATE}) nor a custom role of this "
               "stack")
    return (f"{grant.shown} by {grant.resource.name}: the pack cannot judge this role, {why}, so it cannot tell "
            f"whether it acts as or mints tokens for, changes IAM or administers: {'; '.join(reached)}. What the pack "
            "cannot read counts as unknown, never as harmless: grant a predefined role the table knows, define the "
            "role in this stack (gcp.projects.IAMCustomRole with its permissions) and grant it by its name or output, "
            "or give its permissions in this rule's rolePermissions config")


#: For a stack written without the component: the grants the component would make, as ``(identity, role, where)``,
#: ``where`` being ``resource`` (an IAM resource of one resource), ``pinned`` (a project grant whose condition pins
#: resources), ``function sources`` (the build's project read pinned to the Functions API's source buckets,
#: infra/job/function_sources.py) or ``project`` (Cloud Build and Logging grant on projects only). See
#: infra/job/component.py GRANTS_DOC.
COMPONENT_EQUIVALENT_GRANTS = frozenset({
    ("Scheduler", "roles/run.invoker", "resource"),
    ("runtime", "roles/run.viewer", "resource"),
    ("runtime", "roles/datastore.user", "pinned"),
    ("runtime", "roles/spanner.databaseUser", "resource"),
    ("runtime", "roles/secretmanager.secretAccessor", "resource"),
    ("runtime", "roles/workflows.invoker", "pinned"),
    ("runtime", "roles/run.jobsExecutorWithOverrides", "resource"),
    ("runtime", "roles/run.invoker", "resource"),
    ("runtime", "roles/cloudbuild.builds.editor", "project"),
    ("runtime", "roles/iam.serviceAccountUser", "service account"),
    ("build", "roles/storage.objectViewer", "resource"),
    ("build", "roles/storage.objectViewer", "function sources"),
    ("build", "roles/artifactregistry.writer", "resource"),
    ("build", "roles/logging.logWriter", "project"),
})


def _made_by_component(resource: Resource) -> bool:
    """True when ``resource`` is a child the DedupScheduledJob component made: its parent is the component and its
    name is the component's name and a suffix (``<name>-runtime-datastore-user``, ``<name>-scheduler-invoker``...)."""
    parent = resource.parent or ""
    if "::" not in parent:
        return False
    parent_type, parent_name = parent.split("::")[-2:]
    return parent_type.rsplit("$", 1)[-1] == COMPONENT_TYPE and resource.name.startswith(f"{parent_name}-")


#: What a pinned project grant of a role may be pinned to, by the role: the run store's Firestore database, the
#: workflow the handler starts (each by its shape when the stack's values are not known).
_PIN_SHAPES = {"roles/datastore.user": "projects/*/databases/*",
               "roles/workflows.invoker": "projects/*/locations/*/workflows/*"}


def _intended_pins(resources: Sequence[Resource]) -> dict[str, list[str]]:
    """Role -> the resource names its pinned grant may narrow to: each dedup service's Firestore database
    (``projects/GOOGLE_CLOUD_PROJECT/databases/DEDUP_DATABASE``) and workflow target (``DEDUP_TARGET``); a value not
    known yet stands for any resource of its shape (:data:`_PIN_SHAPES`: the engine checks again at ``pulumi up``),
    one from a Secret Manager secret, never readable, for none."""
    found: dict[str, list[str]] = {role: [] for role in _PIN_SHAPES}
    for service in Topology.of(resources).dedup_services():
        env, secret = service_env(service), secret_env_names(service)
        if env_value(env, "DEDUP_STORE", "firestore") in ("firestore", UNKNOWN) and \
                not secret & {"GOOGLE_CLOUD_PROJECT", limits.ENV_DATABASE}:
            project = env_value(env, "GOOGLE_CLOUD_PROJECT", None)
            database = env_value(env, limits.ENV_DATABASE, limits.DEFAULT_DATABASE)
            known = isinstance(project, str) and isinstance(database, str)
            found["roles/datastore.user"].append(f"projects/{project}/databases/{database}" if known
                                                 else _PIN_SHAPES["roles/datastore.user"])
        if env_value(env, "DEDUP_TARGET_TYPE", None) in ("workflows", UNKNOWN) and "DEDUP_TARGET" not in secret:
            target = env_value(env, "DEDUP_TARGET", None)
            found["roles/workflows.invoker"].append(target if isinstance(target, str)
                                                    else _PIN_SHAPES["roles/workflows.invoker"])
    return found


def _where(grant: Grant, intended: Mapping[str, Sequence[str]]) -> str:
    """``resource``, ``service account``, or for a project, folder or organization grant ``pinned`` when its
    condition narrows it to the resources the role is meant for (:func:`_intended_pins`), else the level."""
    if grant.level == "project" and is_function_sources_grant(grant.role, get(grant.resource.props, "condition")):
        return "function sources"  # the build's read of the Functions API's source copies (function_sources.py)
    if grant.level in ("project", "folder", "organization"):
        return "pinned" if grant.scope.inside(intended.get(grant.role or "", ())) else grant.level
    return grant.level


@rule(name="dedup-identity-expected-grants", enforcement="mandatory",
      description="Each dedup identity holds exactly the grants the component makes plus the roles declared for the "
                  "job's own work; any other grant to one is named. A dedup service without a runtime account (the "
                  "default compute account, Editor by default) is refused.",
      config_schema={"declaredRoles": {"type": "array", "items": {"type": "string"}, "default": [],
                                       "description": "roles a stack written without the component grants its runtime "
                                                      "account for the job's own work (still refused when dedup-identity-powers "
                                                      "finds them dangerous)"}})
def dedup_identity_expected_grants(resources: Sequence[Resource],
                                   config: Mapping[str, Any]) -> list[tuple[Resource | None, str]]:
    """Each dedup identity holds exactly the grants the component makes plus those declared for the job's own work;
    every other grant to one in the stack is named. A dedup service with no runtime account runs as the default
    compute (Cloud Run) or App Engine account, which holds Editor on the project by default
    (https://cloud.google.com/iam/docs/service-account-types#default).

    Expected: a child of a ``DedupScheduledJob`` named by it (its grants, and the extra roles declared on it); in a
    stack written without the component, a grant the component would make (:data:`COMPONENT_EQUIVALENT_GRANTS`: the
    role, to that identity, scoped as the component scopes it, a project grant pinned by its condition); or a role in
    config ``declaredRoles``. Declared or not, a role that can do anything dangerous is refused by
    ``dedup-identity-powers``.
    """
    identities = Identities.of(resources)
    declared = {r for r in config.get("declaredRoles") or [] if isinstance(r, str)}
    found: list[tuple[Resource | None, str]] = []
    for service in Topology.of(resources).dedup_services():
        path = _RUNTIME_ACCOUNT_PATHS.get(service.type, "serviceAccount")
        account = get(service.props, path)
        if account is None or account == "":
            default = ("App Engine default service account (PROJECT_ID@appspot.gserviceaccount.com)"
                       if service.type == APP_ENGINE_VERSION else
                       "Compute Engine default service account (PROJECT_NUMBER-compute@developer.gserviceaccount.com)")
            found.append((service, f"service {service.name} sets no runtime service account ({path}), so the handler "
                                   f"runs as the {default}, which holds roles/editor on the project unless that grant "
                                   "was removed: set a dedicated account with only the handler's grants "
                                   "(DedupScheduledJob makes one)"))
    intended = _intended_pins(resources)
    for grant in _grants(resources):
        holder = _holder(identities, grant)
        if holder is None or _made_by_component(grant.resource) or grant.role in declared:
            continue
        member, what = holder
        if (what, grant.role, _where(grant, intended)) in COMPONENT_EQUIVALENT_GRANTS:
            continue
        if grant.role is None:
            continue  # not known yet (preview); dedup-identity-powers names a role it cannot read
        pinned = ""
        if grant.scope.pins and grant.role in intended and (what, grant.role, "pinned") in COMPONENT_EQUIVALENT_GRANTS:
            pinned = (f" (its condition pins {', '.join(sorted(grant.scope.pins))}, which is not inside "
                      f"{' or '.join(intended[grant.role]) or 'a resource the handler uses'}: pin exactly that, "
                      "resource.name == NAME or resource.name.startsWith(NAME + \"/\"))")
        found.append((grant.resource, f"{grant.shown} gives {member}, the dedup job's {what} account, a grant the "
                                      f"component does not make{pinned}: remove it, or, if the job's own work needs "
                                      "it, declare the role (the component's extra roles, or this rule's "
                                      "declaredRoles) and grant it on the resource the job works on"))
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


@rule(name="dedup-cloud-build-trigger-grant", enforcement="advisory",
      description="A handler whose proxy target is a Cloud Build trigger has a grant in the stack that lets its "
                  "runtime service account run the trigger and list its builds (roles/cloudbuild.builds.editor on "
                  "the trigger's project, without an IAM condition).")
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
