"""The naming rules of every GCP resource the component or a store names, in ONE table (:data:`NAME_RULES`), each
with the Google page that states it, and :func:`name_problem`, the one check of a name against its rule.

:data:`NAMED_FIELDS` says which input of which pulumi-gcp resource type is that resource's name, so a test (and the
offline check) can hold every name in a program against the table. docs/deploying.md lists the derived names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from scheduler_dedup.handler.schedule.run_key import JOB_ID_RE
from scheduler_dedup.handler.stores.firestore.config import DATABASE_ID_RE as FIRESTORE_DATABASE_RE
from scheduler_dedup.handler.stores.spanner.schema import DATABASE_ID_RE as SPANNER_DATABASE_RE, INSTANCE_ID_RE


@dataclass(frozen=True)
class NameRule:
    """How Google names one kind of resource.

    Attributes:
        resource: the resource, as Google's page calls it.
        pattern: the whole name matches it (the length bounds included).
        says: the rule in words, for the message.
        source: the Google page (or API reference) that states the rule.
        refused: what the name must not contain or start with although the pattern matches (regexes searched).
    """

    resource: str
    pattern: re.Pattern[str]
    says: str
    source: str
    refused: tuple[tuple[re.Pattern[str], str], ...] = ()


_LOWER_ID = r"[a-z](?:[-a-z0-9]{%d,%d}[a-z0-9])"


def _whole(anchored: re.Pattern[str]) -> re.Pattern[str]:
    """A rule the handler checks too (its ``^...$`` regex), as the table's full-match pattern: one rule, one regex."""
    return re.compile(anchored.pattern.removeprefix("^").removesuffix("$"))


NAME_RULES: Mapping[str, NameRule] = {
    "bucket": NameRule(
        "Cloud Storage bucket", re.compile(r"[a-z0-9][-_a-z0-9]{1,61}[a-z0-9]"),
        "3-63 lower-case letters, digits, '-' and '_', starting and ending with a letter or digit",
        "https://cloud.google.com/storage/docs/buckets#naming",
        # "Bucket names cannot begin with the goog prefix" and "cannot contain google or close misspellings, such
        # as g00gle": the misspellings are read as google with any of its o's a zero.
        ((re.compile(r"^goog"), "begins with 'goog'"), (re.compile(r"g[o0][o0]gle"), "contains 'google'"))),
    "service_account_id": NameRule(
        "IAM service account id", re.compile(_LOWER_ID % (4, 28)),
        "6-30 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit",
        "https://cloud.google.com/iam/docs/service-accounts-create#creating"),
    # Cloud Run functions are Cloud Run services: a function's name is its service's, so the stricter rule holds.
    "service": NameRule(
        "Cloud Run service or Cloud Run function", re.compile(_LOWER_ID % (0, 47) + "?"),
        "1-49 lower-case letters, digits and '-', starting with a letter and not ending with '-'",
        "https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.services/create (serviceId); "
        "https://cloud.google.com/functions/docs/reference/rest/v2/projects.locations.functions/create"),
    "repository": NameRule(
        "Artifact Registry repository", re.compile(_LOWER_ID % (0, 61) + "?"),
        "1-63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit",
        "https://cloud.google.com/artifact-registry/docs/repositories/create-repos#create"),
    "scheduler_job": NameRule(
        "Cloud Scheduler job id", _whole(JOB_ID_RE),
        "1-500 letters, digits, '-' and '_'",
        "https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#Job (name)"),
    "secret": NameRule(
        "Secret Manager secret id", re.compile(r"[A-Za-z0-9_-]{1,255}"),
        "1-255 letters, digits, '-' and '_'",
        "https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/create (secretId)"),
    "log_metric": NameRule(
        "log-based metric name", re.compile(r"[A-Za-z0-9_.,+!*'()%-][A-Za-z0-9_.,+!*'()%/-]{0,99}"),
        "1-100 characters of A-Z a-z 0-9 _-.,+!*',()%/, not starting with '/'",
        "https://cloud.google.com/logging/docs/reference/v2/rest/v2/projects.metrics#LogMetric (name)"),
    "alert_policy": NameRule(
        "alert policy display name", re.compile(r"(?s).{1,512}"),
        "1-512 characters",
        "https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies#AlertPolicy (displayName)"),
    "firestore_database": NameRule(
        "Firestore database id", _whole(FIRESTORE_DATABASE_RE),
        "(default), or 4-63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit",
        "https://cloud.google.com/firestore/docs/manage-databases#database_id"),
    "spanner_instance": NameRule(
        "Spanner instance id", _whole(INSTANCE_ID_RE),
        "2-64 lower-case letters, digits and '-', starting with a letter and not ending with '-'",
        "https://cloud.google.com/spanner/docs/reference/rest/v1/projects.instances/create (instanceId)"),
    "spanner_database": NameRule(
        "Spanner database id", _whole(SPANNER_DATABASE_RE),
        "2-30 lower-case letters, digits, '_' and '-', starting with a letter and not ending with '_' or '-'",
        "https://cloud.google.com/spanner/docs/reference/rest/v1/projects.instances.databases/create"),
    "memorystore_instance": NameRule(
        "Memorystore for Redis instance id", re.compile(_LOWER_ID % (0, 38)),
        "2-40 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit",
        "https://cloud.google.com/memorystore/docs/redis/reference/rest/v1/projects.locations.instances/create"),
    "app_engine_version": NameRule(
        "App Engine version id", re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"),
        "1-63 lower-case letters, digits and '-', not starting or ending with '-', not starting with 'ah-'",
        "https://cloud.google.com/appengine/docs/admin-api/reference/rest/v1/apps.services.versions#Version (id)",
        ((re.compile(r"^ah-"), "begins with 'ah-'"), (re.compile(r"^(default|latest)$"), "is reserved"))),
}

#: pulumi-gcp resource type -> (the input that is the resource's name, its rule in :data:`NAME_RULES`).
NAMED_FIELDS: Mapping[str, tuple[str, str]] = {
    "gcp:storage/bucket:Bucket": ("name", "bucket"),
    "gcp:serviceaccount/account:Account": ("accountId", "service_account_id"),
    "gcp:cloudrunv2/service:Service": ("name", "service"),
    "gcp:cloudfunctionsv2/function:Function": ("name", "service"),
    "gcp:artifactregistry/repository:Repository": ("repositoryId", "repository"),
    "gcp:cloudscheduler/job:Job": ("name", "scheduler_job"),
    "gcp:secretmanager/secret:Secret": ("secretId", "secret"),
    "gcp:logging/metric:Metric": ("name", "log_metric"),
    "gcp:monitoring/alertPolicy:AlertPolicy": ("displayName", "alert_policy"),
    "gcp:firestore/database:Database": ("name", "firestore_database"),
    "gcp:spanner/instance:Instance": ("name", "spanner_instance"),
    "gcp:spanner/database:Database": ("name", "spanner_database"),
    "gcp:redis/instance:Instance": ("name", "memorystore_instance"),
    "gcp:appengine/standardAppVersion:StandardAppVersion": ("versionId", "app_engine_version"),
}


def name_problem(kind: str, name: str) -> str | None:
    """Why Google would refuse ``name`` for a resource of ``kind`` (a key of :data:`NAME_RULES`), or None.

    The message names the resource, the rule and its source page.

    Raises:
        KeyError: ``kind`` is not in :data:`NAME_RULES`.
    """
    rule = NAME_RULES[kind]
    if not rule.pattern.fullmatch(name):
        return f"{name!r} is no {rule.resource}: {rule.says} ({rule.source})"
    for refused, why in rule.refused:
        if refused.search(name):
            return f"{name!r} {why}, which Google refuses in a {rule.resource} ({rule.source})"
    return None


def short_hash(*parts: str, digits: int = 8) -> str:
    """``digits`` hex digits of the SHA-256 of ``parts`` joined by '/': a derived name's stable, distinct tail."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:digits]

