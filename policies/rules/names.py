"""Rules on the names of GCP resources: each name the stack gives (or Pulumi's autonaming would give) a resource is
one Google accepts for it, by the one table of naming rules
(:data:`~scheduler_dedup.infra.project.resource_names.NAME_RULES`) the component derives its names by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler_dedup.infra.project.resource_names import NAMED_FIELDS, name_problem
from scheduler_dedup.policies.reading.model import Resource, get, is_unknown
from scheduler_dedup.policies.rules.base import rule

#: What Pulumi's autonaming appends to a logical name when the name input is left out: '-' and 7 random hex digits
#: (https://www.pulumi.com/docs/iac/concepts/resources/names/#autonaming).
AUTONAME_TAIL = "-0000000"
#: Types whose name a rule of their own checks (by the same rule as the table's): not reported twice.
OWN_RULE = {"gcp:cloudscheduler/job:Job": "scheduler-job-name"}


@rule(name="gcp-resource-names", enforcement="mandatory",
      description="Every bucket, service account, service, repository, Scheduler job, secret, metric, alert policy, "
                  "database and instance has a name Google accepts for it.")
def gcp_resource_names(resource: Resource, config: Mapping[str, Any]) -> list[str]:
    """The resource's name (its input of :data:`~scheduler_dedup.infra.project.resource_names.NAMED_FIELDS`) breaks no
    rule of its kind, such as a bucket name containing "google", which ``pulumi up`` would only learn from Google
    halfway through. A name left to Pulumi's autonaming is checked as the logical name plus :data:`AUTONAME_TAIL`."""
    named = NAMED_FIELDS.get(resource.type)
    if named is None or resource.type in OWN_RULE:
        return []
    key, kind = named
    value: Any = get(resource.props, key)
    if is_unknown(value):
        return []
    if value is None:
        value = f"{resource.name}{AUTONAME_TAIL}"
        problem = name_problem(kind, value)
        return [f"{key} (left to autonaming, {resource.name}-<7 random hex digits>): {problem}: set {key}"] if problem else []
    if not isinstance(value, str):
        return []
    problem = name_problem(kind, value)
    return [f"{key}: {problem}: choose another"] if problem else []
