"""Roles for the job's own work (``job_roles``): each granted to the runtime identity on the one resource the user
names, as a non-authoritative IAM member named ``<name>-job-role-<role>-<hash>``, so the policy pack reads each grant
as an ordinary IAM member resource and judges it by the role's permissions.

A resource is named by its full name; one IAM member resource type per kind (pulumi-gcp):
``projects/P`` (``gcp.projects.IAMMember``), ``buckets/B`` (``gcp.storage.BucketIAMMember``), ``projects/P/topics/T``
(``gcp.pubsub.TopicIAMMember``), ``projects/P/secrets/S`` (``gcp.secretmanager.SecretIamMember``),
``projects/P/datasets/D`` (``gcp.bigquery.DatasetIamMember``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.inputs import Problems

#: The part of a job role grant's Pulumi name after the component's name.
JOB_ROLE_NAME_PART = "job-role"
#: Resource kind -> its full-name pattern.
RESOURCE_KINDS = {
    "project": re.compile(r"^projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])$"),
    "bucket": re.compile(r"^buckets/(?P<bucket>[a-z0-9][-a-z0-9_.]{1,220}[a-z0-9])$"),
    "topic": re.compile(r"^projects/(?P<project>[^/]+)/topics/(?P<topic>[A-Za-z][-A-Za-z0-9_.~+%]{2,254})$"),
    "secret": re.compile(r"^projects/(?P<project>[^/]+)/secrets/(?P<secret>[A-Za-z0-9_-]{1,255})$"),
    "dataset": re.compile(r"^projects/(?P<project>[^/]+)/datasets/(?P<dataset>[A-Za-z0-9_]{1,1024})$"),
}
_ROLE_RE = re.compile(r"^(roles/[A-Za-z0-9_.]+|(projects|organizations)/[^/]+/roles/[A-Za-z0-9_.]+)$")


@dataclass(frozen=True)
class JobRole:
    """One grant: ``role`` on the resource ``resource`` of ``kind`` (:data:`RESOURCE_KINDS`)."""

    role: str
    resource: str
    kind: str

    def resource_name(self, component: str) -> str:
        """The grant's Pulumi name: readable (the role's last part) and unique (a hash of role and resource)."""
        digest = hashlib.sha256(f"{self.role} {self.resource}".encode()).hexdigest()[:8]
        tail = re.sub(r"[^a-z0-9]+", "-", self.role.rsplit("/", 1)[-1].lower()).strip("-")
        return f"{component}-{JOB_ROLE_NAME_PART}-{tail}-{digest}"


def resolve_job_roles(value: Any) -> tuple[JobRole, ...]:
    """``job_roles`` checked.

    Raises:
        DedupConfigErrors: every entry that is not ``{role, resource}`` with a role name and a resource of a kind in
            :data:`RESOURCE_KINDS`, and repeats, at once.
    """
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise DedupConfigError("job_roles", f"must be a list of {{role, resource}}, got {value!r}")
    problems = Problems()
    found: list[JobRole] = []
    for index, item in enumerate(value):
        field = f"job_roles[{index}]"
        if not isinstance(item, Mapping) or set(item) != {"role", "resource"}:
            problems.add(DedupConfigError(field, f"must be {{role, resource}}, got {item!r}"))
            continue
        role, resource = item["role"], item["resource"]
        if not isinstance(role, str) or not _ROLE_RE.match(role):
            problems.add(DedupConfigError(f"{field}.role", f"{role!r} is not a role: roles/NAME or "
                                                           "projects/P/roles/NAME, e.g. roles/storage.objectCreator"))
            continue
        kind = next((k for k, pattern in RESOURCE_KINDS.items() if isinstance(resource, str) and pattern.match(resource)),
                    None)
        if kind is None:
            problems.add(DedupConfigError(f"{field}.resource", f"{resource!r} is not a resource a role can be granted "
                                                               "on here: use projects/P, buckets/B, projects/P/topics/T, "
                                                               "projects/P/secrets/S or projects/P/datasets/D"))
            continue
        grant = JobRole(role, resource, kind)
        if grant in found:
            problems.add(DedupConfigError(field, f"{role} on {resource} is given twice: remove one"))
            continue
        found.append(grant)
    problems.raise_any()
    return tuple(found)


def grant_job_roles(component: str, roles: tuple[JobRole, ...], member: pulumi.Input[str],
                    opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """One IAM member resource per grant (:func:`JobRole.resource_name`), on that resource only."""
    import pulumi_gcp as gcp

    grants: list[pulumi.Resource] = []
    for grant in roles:
        parts = RESOURCE_KINDS[grant.kind].match(grant.resource)
        assert parts is not None
        name = grant.resource_name(component)
        if grant.kind == "project":
            grants.append(gcp.projects.IAMMember(name, gcp.projects.IAMMemberArgs(
                project=parts["project"], role=grant.role, member=member), opts=opts))
        elif grant.kind == "bucket":
            grants.append(gcp.storage.BucketIAMMember(name, gcp.storage.BucketIAMMemberArgs(
                bucket=parts["bucket"], role=grant.role, member=member), opts=opts))
        elif grant.kind == "topic":
            grants.append(gcp.pubsub.TopicIAMMember(name, gcp.pubsub.TopicIAMMemberArgs(
                project=parts["project"], topic=parts["topic"], role=grant.role, member=member), opts=opts))
        elif grant.kind == "secret":
            grants.append(gcp.secretmanager.SecretIamMember(name, gcp.secretmanager.SecretIamMemberArgs(
                project=parts["project"], secret_id=parts["secret"], role=grant.role, member=member), opts=opts))
        else:
            grants.append(gcp.bigquery.DatasetIamMember(name, gcp.bigquery.DatasetIamMemberArgs(
                project=parts["project"], dataset_id=parts["dataset"], role=grant.role, member=member), opts=opts))
    return grants
