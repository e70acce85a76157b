"""What a role lets its holder do: the permissions of predefined roles (one dated table) and of the stack's own custom
roles, and the kinds of power the IAM rules ask about.

:data:`PREDEFINED_ROLES` holds, for each predefined role that matters to a dedup job, the permissions of it the rules
ask about (not every permission of the role): acting as or minting tokens for a service account, changing an IAM
policy, administering a store or a service, or everything (``*``, which the basic roles are counted as). Source:
:data:`TABLE_SOURCE`, read on :data:`TABLE_DATE`; a role missing here and not defined in the stack is "unknown", and
the rules say so instead of guessing. A custom role of the stack (``gcp.projects.IAMCustomRole``,
``gcp.organizations.IAMCustomRole``) is read from its ``permissions``, also when a grant names it by its output
(``role=custom_role.name``, known through the grant's property dependency); IAM itself refuses a wildcard there, but
a ``*`` is read as everything rather than trusted as nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from scheduler_dedup.policies.reading.model import Resource, get, is_unknown

TABLE_DATE = "2026-12-04"
"""When :data:`PREDEFINED_ROLES` was last checked against its source pages (every entry, role by role)."""
TABLE_SOURCE = ("https://cloud.google.com/iam/docs/understanding-roles and the per-service pages "
                "https://cloud.google.com/iam/docs/roles-permissions/SERVICE (iam, resourcemanager, run, datastore, "
                "spanner, redis, secretmanager, cloudbuild, workflows, cloudscheduler, storage, artifactregistry, "
                "logging)")
"""Where :data:`PREDEFINED_ROLES` comes from.

Every entry was checked on :data:`TABLE_DATE` against each role's ``includedPermissions`` as the IAM API lists them
(``roles.get``; the same lists the pages above print), e.g.
https://cloud.google.com/iam/docs/roles-permissions/iam (Service Account User holds ``iam.serviceAccounts.actAs``,
``.get``, ``.list``; Workload Identity User ``getAccessToken`` and ``getOpenIdToken``, no signing),
https://cloud.google.com/iam/docs/roles-permissions/resourcemanager (Folder Admin holds
``resourcemanager.projects.setIamPolicy``), https://cloud.google.com/run/docs/reference/iam/roles (Cloud Run Invoker:
``run.routes.invoke`` and ``run.jobs.run``; the Jobs Executor roles: ``run.jobs.run`` (with overrides:
``run.jobs.runWithOverrides``) and ``run.executions.cancel``, and no ``run.executions.get`` or ``.list``),
https://cloud.google.com/iam/docs/roles-permissions/spanner (Database User: "read, query, write and view and change
the schema", ``spanner.databases.updateDdl``), https://cloud.google.com/iam/docs/roles-permissions/redis (Redis
Editor: no ``redis.instances.getAuthString``), https://cloud.google.com/iam/docs/roles-permissions/workflows
(Workflows Admin: ``workflows.workflows.setIamPolicy``) and
https://cloud.google.com/iam/docs/roles-permissions/datastore (Datastore Owner: ``datastore.databases.setIamPolicy``).
"""

#: Permissions that let a principal act as a service account or mint credentials for it
#: (https://cloud.google.com/iam/docs/service-account-permissions).
MINT_PERMISSIONS = frozenset({
    "iam.serviceAccounts.actAs", "iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.getOpenIdToken",
    "iam.serviceAccounts.signJwt", "iam.serviceAccounts.signBlob", "iam.serviceAccounts.implicitDelegation",
    "iam.serviceAccountKeys.create",
})
#: Permissions that administer a dedup store or service: change or delete the Cloud Run service or job, the Scheduler
#: job, the Firestore database, the Spanner instance or database, the Memorystore instance (or read its AUTH string),
#: the workflow, or add a version to a secret.
ADMIN_PERMISSIONS = frozenset({
    "run.services.create", "run.services.update", "run.services.delete", "run.jobs.update", "run.jobs.delete",
    "cloudscheduler.jobs.create", "cloudscheduler.jobs.update", "cloudscheduler.jobs.delete",
    "datastore.databases.update", "datastore.databases.delete",
    "spanner.databases.drop", "spanner.databases.updateDdl", "spanner.instances.update", "spanner.instances.delete",
    "redis.instances.update", "redis.instances.delete", "redis.instances.getAuthString",
    "workflows.workflows.update", "workflows.workflows.delete",
    "secretmanager.versions.add", "secretmanager.secrets.update", "secretmanager.secrets.delete",
})

_SA_USER = ("iam.serviceAccounts.actAs", "iam.serviceAccounts.get", "iam.serviceAccounts.list")
_TOKENS = ("iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.getOpenIdToken", "iam.serviceAccounts.signBlob",
           "iam.serviceAccounts.signJwt", "iam.serviceAccounts.implicitDelegation")
_RUN_ADMIN = ("run.services.create", "run.services.update", "run.services.delete", "run.services.get",
              "run.services.getIamPolicy", "run.services.setIamPolicy", "run.jobs.create", "run.jobs.update",
              "run.jobs.delete", "run.jobs.run", "run.jobs.runWithOverrides", "run.jobs.setIamPolicy",
              "run.routes.invoke", "run.executions.get", "run.executions.list")

#: Predefined role -> the permissions of it the rules ask about (see the module docstring; dated :data:`TABLE_DATE`).
PREDEFINED_ROLES: Mapping[str, frozenset[str]] = {role: frozenset(perms) for role, perms in {
    # basic roles: counted as everything (https://cloud.google.com/iam/docs/roles-overview#basic)
    "roles/owner": ("*",), "roles/editor": ("*",), "roles/viewer": ("*",),
    # iam
    "roles/iam.serviceAccountUser": _SA_USER,
    "roles/iam.serviceAccountTokenCreator": _TOKENS,
    "roles/iam.serviceAccountOpenIdTokenCreator": ("iam.serviceAccounts.getOpenIdToken",),
    "roles/iam.workloadIdentityUser": ("iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.getOpenIdToken"),
    "roles/iam.serviceAccountKeyAdmin": ("iam.serviceAccountKeys.create", "iam.serviceAccountKeys.delete"),
    "roles/iam.serviceAccountAdmin": ("iam.serviceAccounts.create", "iam.serviceAccounts.delete",
                                      "iam.serviceAccounts.update", "iam.serviceAccounts.setIamPolicy"),
    "roles/iam.securityAdmin": ("*.setIamPolicy", "resourcemanager.projects.setIamPolicy",
                                "resourcemanager.folders.setIamPolicy", "resourcemanager.organizations.setIamPolicy",
                                "iam.serviceAccounts.setIamPolicy"),
    "roles/iam.roleViewer": ("iam.roles.get", "iam.roles.list", "resourcemanager.projects.getIamPolicy"),
    # resourcemanager
    "roles/resourcemanager.projectIamAdmin": ("resourcemanager.projects.getIamPolicy",
                                              "resourcemanager.projects.setIamPolicy"),
    "roles/resourcemanager.folderIamAdmin": ("resourcemanager.folders.getIamPolicy",
                                             "resourcemanager.folders.setIamPolicy"),
    "roles/resourcemanager.folderAdmin": ("resourcemanager.folders.create", "resourcemanager.folders.delete",
                                          "resourcemanager.folders.move", "resourcemanager.folders.setIamPolicy",
                                          "resourcemanager.projects.move", "resourcemanager.projects.setIamPolicy"),
    "roles/resourcemanager.organizationAdmin": ("resourcemanager.organizations.setIamPolicy",
                                                "resourcemanager.folders.setIamPolicy",
                                                "resourcemanager.projects.setIamPolicy"),
    "roles/resourcemanager.projectDeleter": ("resourcemanager.projects.delete",),
    # run
    "roles/run.admin": _RUN_ADMIN,
    "roles/run.developer": tuple(p for p in _RUN_ADMIN if not p.endswith("setIamPolicy")),
    "roles/run.sourceDeveloper": ("run.services.create", "run.services.update", "run.services.delete",
                                  "run.services.get", "run.jobs.create", "run.jobs.update", "run.jobs.delete",
                                  "run.jobs.run", "run.jobs.runWithOverrides", "run.routes.invoke",
                                  "cloudbuild.builds.create"),
    "roles/run.invoker": ("run.routes.invoke", "run.jobs.run"),
    "roles/run.servicesInvoker": ("run.routes.invoke",),
    "roles/run.viewer": ("run.services.get", "run.services.getIamPolicy", "run.jobs.get", "run.executions.get"),
    "roles/run.jobsExecutor": ("run.jobs.run", "run.executions.cancel"),
    "roles/run.jobsExecutorWithOverrides": ("run.jobs.run", "run.jobs.runWithOverrides", "run.executions.cancel"),
    # datastore (Firestore)
    "roles/datastore.owner": ("datastore.databases.create", "datastore.databases.update",
                              "datastore.databases.delete", "datastore.databases.setIamPolicy",
                              "datastore.entities.create", "datastore.entities.update",
                              "datastore.entities.delete", "datastore.entities.get", "datastore.entities.list"),
    "roles/datastore.user": ("datastore.databases.get", "datastore.entities.create", "datastore.entities.update",
                             "datastore.entities.delete", "datastore.entities.get", "datastore.entities.list"),
    "roles/datastore.viewer": ("datastore.entities.get", "datastore.entities.list"),
    "roles/datastore.importExportAdmin": ("datastore.databases.export", "datastore.databases.import"),
    # spanner
    "roles/spanner.admin": ("spanner.instances.create", "spanner.instances.update", "spanner.instances.delete",
                            "spanner.instances.setIamPolicy", "spanner.databases.drop", "spanner.databases.updateDdl",
                            "spanner.databases.setIamPolicy", "spanner.databases.read", "spanner.databases.write"),
    "roles/spanner.databaseAdmin": ("spanner.databases.create", "spanner.databases.drop",
                                    "spanner.databases.updateDdl", "spanner.databases.setIamPolicy",
                                    "spanner.databases.read", "spanner.databases.write"),
    "roles/spanner.databaseUser": ("spanner.databases.read", "spanner.databases.write", "spanner.databases.updateDdl",
                                   "spanner.sessions.create"),
    "roles/spanner.databaseReader": ("spanner.databases.read", "spanner.sessions.create"),
    # redis (Memorystore)
    "roles/redis.admin": ("redis.instances.create", "redis.instances.update", "redis.instances.delete",
                          "redis.instances.getAuthString"),
    "roles/redis.editor": ("redis.instances.update", "redis.instances.failover"),
    "roles/redis.viewer": ("redis.instances.get", "redis.instances.list"),
    # secretmanager
    "roles/secretmanager.admin": ("secretmanager.secrets.update", "secretmanager.secrets.delete",
                                  "secretmanager.secrets.setIamPolicy", "secretmanager.versions.add",
                                  "secretmanager.versions.access"),
    "roles/secretmanager.secretAccessor": ("secretmanager.versions.access",),
    "roles/secretmanager.secretVersionAdder": ("secretmanager.versions.add",),
    "roles/secretmanager.secretVersionManager": ("secretmanager.versions.add", "secretmanager.versions.destroy"),
    # cloudbuild: builds.create runs code as the build's service account; the component grants it for trigger targets
    "roles/cloudbuild.builds.editor": ("cloudbuild.builds.create", "cloudbuild.builds.get", "cloudbuild.builds.list",
                                       "cloudbuild.builds.update"),
    "roles/cloudbuild.builds.viewer": ("cloudbuild.builds.get", "cloudbuild.builds.list"),
    "roles/cloudbuild.builds.builder": ("cloudbuild.builds.create", "cloudbuild.builds.get",
                                        "cloudbuild.builds.list"),
    # workflows
    "roles/workflows.admin": ("workflows.workflows.create", "workflows.workflows.update", "workflows.workflows.delete",
                              "workflows.workflows.setIamPolicy", "workflows.executions.create"),
    "roles/workflows.editor": ("workflows.workflows.create", "workflows.workflows.update",
                               "workflows.workflows.delete", "workflows.executions.create"),
    "roles/workflows.invoker": ("workflows.executions.create", "workflows.executions.get", "workflows.executions.list"),
    # cloudscheduler
    "roles/cloudscheduler.admin": ("cloudscheduler.jobs.create", "cloudscheduler.jobs.update",
                                   "cloudscheduler.jobs.delete", "cloudscheduler.jobs.pause",
                                   "cloudscheduler.jobs.enable", "cloudscheduler.jobs.run"),
    "roles/cloudscheduler.jobRunner": ("cloudscheduler.jobs.run",),
    "roles/cloudscheduler.viewer": ("cloudscheduler.jobs.get", "cloudscheduler.jobs.list"),
    # what the component's build account gets
    "roles/storage.objectViewer": ("storage.objects.get", "storage.objects.list"),
    # a job's own work, as declared in Pulumi.example-nightly-report.yaml (storage.objects.create and its multipart
    # uploads: https://cloud.google.com/iam/docs/roles-permissions/storage, Storage Object Creator)
    "roles/storage.objectCreator": ("storage.objects.create",),
    "roles/storage.admin": ("storage.buckets.setIamPolicy", "storage.objects.create", "storage.objects.delete"),
    "roles/artifactregistry.writer": ("artifactregistry.repositories.uploadArtifacts",),
    "roles/logging.logWriter": ("logging.logEntries.create",),
}.items()}

#: Permissions a store's data role carries beyond reading and writing run records, which no predefined role avoids:
#: role -> (those permissions, why). A dedup runtime identity needs its store's data role on the store's database;
#: the IAM rules do not count these against that grant (on one resource), and docs/stores.md says what they allow.
STORE_DATA_ROLE_EXTRAS: Mapping[str, tuple[frozenset[str], str]] = {
    "roles/spanner.databaseUser": (
        frozenset({"spanner.databases.updateDdl"}),
        "Spanner's only predefined role that writes data also changes the schema "
        "(https://cloud.google.com/iam/docs/roles-permissions/spanner); data without DDL needs fine-grained access "
        "control (database roles)"),
}

CUSTOM_ROLE_TYPES = ("gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:organizations/iAMCustomRole:IAMCustomRole")


@dataclass(frozen=True)
class Powers:
    """What a role lets its holder do, as the IAM rules ask it.

    Attributes:
        permissions: the role's permissions that matter (see the module docstring), patterns allowed (``*``).
        known: False when the role is neither in the table nor a custom role of the stack (or its permissions are
            not known yet): nothing can be said of it.
    """

    permissions: frozenset[str]
    known: bool = True

    def holds(self, wanted: Iterable[str]) -> list[str]:
        """The permissions of ``wanted`` this role grants, counting patterns (``*``, ``*.setIamPolicy``)."""
        return sorted(w for w in wanted if any(fnmatchcase(w, p) for p in self.permissions))

    @property
    def everything(self) -> bool:
        return "*" in self.permissions

    @property
    def changes_iam(self) -> list[str]:
        """Permissions that set an IAM policy (``*.setIamPolicy``, or a pattern that holds one)."""
        return sorted(p for p in self.permissions if p == "*" or p.endswith(".setIamPolicy"))

    @property
    def mints(self) -> list[str]:
        return self.holds(MINT_PERMISSIONS)

    @property
    def administers(self) -> list[str]:
        return self.holds(ADMIN_PERMISSIONS)

    @property
    def dangers(self) -> list[str]:
        """What the role can do of the dangerous kinds, as phrases for messages (empty: none)."""
        found = []
        if self.everything:
            return ["do anything ('*')"]
        if self.changes_iam:
            found.append(f"change IAM ({', '.join(self.changes_iam)})")
        if self.mints:
            found.append(f"act as or mint tokens for service accounts ({', '.join(self.mints)})")
        if self.administers:
            found.append(f"administer the store or the service ({', '.join(self.administers)})")
        return found


@dataclass(frozen=True)
class RoleBook:
    """The predefined table plus the stack's custom roles, by the name a grant uses."""

    custom: Mapping[str, frozenset[str] | None]

    @classmethod
    def of(cls, resources: Sequence[Resource]) -> "RoleBook":
        """The custom roles of ``resources``, each under ``projects/P/roles/ID`` / ``organizations/O/roles/ID``
        (and its ``name``/``id`` output when known); permissions None when not known yet."""
        custom: dict[str, frozenset[str] | None] = {}
        for resource in resources:
            if resource.type not in CUSTOM_ROLE_TYPES:
                continue
            raw = get(resource.props, "permissions")
            perms = frozenset(p for p in raw if isinstance(p, str)) if isinstance(raw, list) else None
            role_id = get(resource.props, "roleId")
            parent_key = "project" if resource.type.startswith("gcp:projects/") else "orgId"
            parent = get(resource.props, parent_key)
            names = [get(resource.props, "name"), get(resource.props, "id")]
            if isinstance(role_id, str) and not is_unknown(role_id):
                prefix = "projects" if parent_key == "project" else "organizations"
                names.append(f"{prefix}/{parent}/roles/{role_id}" if isinstance(parent, str) and not is_unknown(parent)
                             else f"*/roles/{role_id}")
            names.append(resource.urn)  # a grant whose role is this role's output names it by dependency
            for name in names:
                if isinstance(name, str) and not is_unknown(name):
                    custom[name] = perms
        return cls(custom)

    def powers(self, role: str | None, source: str | None = None) -> Powers:
        """What ``role`` grants: by its name, or, when the name is not known yet (an output, ``role=custom.name``), by
        ``source``, the URN of the custom role it came from. Unknown when neither table nor stack defines it."""
        if role is None and source is not None and source in self.custom:
            perms = self.custom[source]
            return Powers(perms) if perms is not None else Powers(frozenset(), known=False)
        if role is None:
            return Powers(frozenset(), known=False)
        if role in PREDEFINED_ROLES:
            return Powers(PREDEFINED_ROLES[role])
        if role in self.custom or (role.count("/") == 3 and f"*/roles/{role.rsplit('/', 1)[-1]}" in self.custom):
            perms = self.custom.get(role, self.custom.get(f"*/roles/{role.rsplit('/', 1)[-1]}"))
            return Powers(perms, known=True) if perms is not None else Powers(frozenset(), known=False)
        return Powers(frozenset(), known=False)
