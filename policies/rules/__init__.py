"""The policy pack's rules: one function per rule, in one module per domain, registered in :data:`RULES`.

- :mod:`.scheduler`: the Cloud Scheduler job (schedule, OIDC token, attempt deadline, retry config, direct
  Google API targets);
- :mod:`.handler_service`: the service running the dedup handler (its settings, proxy audience, lease, crash
  recovery, CPU allocation), and any Cloud Run service's location and variable names;
- :mod:`.iam`: IAM grants (public invoker, basic roles);
- :mod:`.store`: the run-record store (Firestore: TTL policy and its owner, run-check index, location; Memorystore:
  tier, eviction, AUTH, transit encryption, persistence, replica; every store: record retention);
- :mod:`.spanner`: a run-record store in Spanner (row deletion policy, its retention from the DDL, database-scoped
  data role, drop protection);
- :mod:`.alerting`: the missed-run watchdog and its alert;
- :mod:`.base`: what they share (:class:`Rule`, its types, readings several domains compare).

Each rule reads resource properties in the Pulumi engine's names (camelCase inputs of pulumi-gcp, e.g.
``httpTarget.oidcToken.serviceAccountEmail``), treats missing values as the provider/API default and
unknown values (:data:`~scheduler_dedup.policies.reading.model.UNKNOWN`, during preview) as "cannot tell yet,
no violation", and returns messages that say what to change.

Resource rules have the signature ``(resource: Resource, config: Mapping[str, Any]) -> list[str]``;
stack rules ``(resources: Sequence[Resource], config) -> list[tuple[Resource | None, str]]``. ``config``
is the rule's configuration with its schema defaults filled in (see :meth:`Rule.resolve_config`).

This package imports neither pulumi nor pulumi_policy: the offline check and the tests call the rule
functions directly, and :mod:`scheduler_dedup.policies.pack` adapts them to CrossGuard policies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.handler.schedule.retry_windows import REQUEST_TIMEOUT_MARGIN_SECONDS

from scheduler_dedup.policies import limits
from scheduler_dedup.policies.reading.model import Resource
from scheduler_dedup.policies.rules.alerting import dedup_job_alerting
from scheduler_dedup.policies.rules.base import Check, Level, ResourceCheck, Rule, StackCheck  # re-exported
from scheduler_dedup.policies.rules.handler_service import (
    cloud_run_env_names,
    cloud_run_service_location,
    dedup_cpu_always_allocated,
    dedup_handler_settings,
    dedup_lease_covers_deadline,
    dedup_retries_outlast_lease,
    dedup_scale_in,
    dedup_shared_collection_job_bound,
    dedup_target_audience,
)
from scheduler_dedup.policies.rules.iam import (
    cloud_run_no_public_invoker,
    dedup_cloud_build_trigger_grant,
    dedup_identity_expected_grants,
    dedup_identity_powers,
    no_primitive_roles,
)
from scheduler_dedup.policies.rules.scheduler import (
    scheduler_attempt_deadline,
    scheduler_attempt_deadline_margin,
    scheduler_job_location,
    scheduler_job_name,
    scheduler_job_oidc_auth,
    scheduler_job_unix_cron,
    scheduler_oidc_account_project,
    scheduler_retry_config,
    scheduler_runs_overlap,
    scheduler_schedule_step,
    scheduler_schedule_unsettled,
    scheduler_target_not_google_api,
    scheduler_time_zone_canonical,
    scheduler_time_zone_fixed_offset,
)
from scheduler_dedup.policies.rules.store import (
    dedup_firestore_ttl,
    dedup_retention_covers_retries,
    dedup_run_check_index,
    firestore_database_location,
    dedup_ttl_owner_declared,
    firestore_ttl_single_owner,
    job_retry_window_seconds,  # re-exported
    memorystore_dedup_auth,
    memorystore_dedup_noeviction,
    memorystore_dedup_persistence,
    memorystore_dedup_replica,
    memorystore_dedup_standard_tier,
    memorystore_dedup_transit_encryption,
)
from scheduler_dedup.policies.rules.spanner import (
    spanner_data_role_database_scoped,
    spanner_retention_covers_retries,
    spanner_row_deletion_policy,
    spanner_store_drop_protection,
)


# ---------------------------------------------------------------- the list
# Each rule function of the domain modules, registered once, in report order.

RULES: list[Rule] = [
    Rule("scheduler-job-unix-cron",
         "A Cloud Scheduler job's schedule is a 5-field unix-cron expression (not groc) and its timeZone an IANA name.",
         "mandatory", scheduler_job_unix_cron, "resource"),
    Rule("scheduler-time-zone-fixed-offset",
         "A job's timeZone is not a fixed-offset abbreviation such as EST (UTC-5 all year, no daylight saving time); "
         "name the place's zone (America/New_York) or the offset (Etc/GMT+5).",
         "mandatory", scheduler_time_zone_fixed_offset, "resource"),
    Rule("scheduler-time-zone-canonical",
         "A job's timeZone is the canonical tz database name, not an alias of it (UTC -> Etc/UTC, US/Eastern -> "
         "America/New_York).",
         "advisory", scheduler_time_zone_canonical, "resource"),
    Rule("scheduler-schedule-unsettled",
         "A job's schedule uses no form Cloud Scheduler's cron page leaves open (a backwards range, a day-of-week a/n, "
         "a '*'-step in one day field while the other is restricted).",
         "advisory", scheduler_schedule_unsettled, "resource"),
    Rule("scheduler-schedule-step",
         "A job's schedule has no step at least as large as the range it skips through (*/61 minutes runs hourly, "
         "*/25 hours daily, */45 days monthly): the message says what the schedule really does.",
         "advisory", scheduler_schedule_step, "resource"),
    Rule("scheduler-runs-overlap",
         "A job's retry window (and one slow attempt) ends before its next fire time: Scheduler never runs two "
         "executions of a job at once, so it delays or skips the fire times a run still occupies.",
         "advisory", scheduler_runs_overlap, "resource"),
    Rule("scheduler-job-name",
         "A job's name is a Scheduler job id: letters, digits, '-' or '_', at most 500 characters.",
         "mandatory", scheduler_job_name, "resource"),
    Rule("scheduler-job-location",
         "A job's region is one Cloud Scheduler is offered in.",
         "mandatory", scheduler_job_location, "resource"),
    Rule("scheduler-oidc-account-project",
         "The service account of a job's OIDC token is in the job's project (OidcToken).",
         "mandatory", scheduler_oidc_account_project, "resource"),
    Rule("scheduler-job-oidc-auth",
         "An HTTP target that is not a *.googleapis.com API carries an OIDC token with a service account email, and "
         "its audience (or the URI it defaults to) passes Google's gate in front of the target and the handler's exact "
         "DEDUP_OIDC_AUDIENCE / DEDUP_ALLOWED_CALLERS check.",
         "mandatory", scheduler_job_oidc_auth, "stack",
         {"allowedAudiences": {"type": "array", "items": {"type": "string"}, "default": [],
                               "description": "extra audiences to accept (e.g. for a non-Cloud-Run receiver)"}}),
    Rule("dedup-target-audience",
         "The ID-token audience the handler sends to its HTTP proxy target (DEDUP_TARGET_AUDIENCE or its default) is "
         "one the target's host accepts (the full function URL on *.cloudfunctions.net).",
         "mandatory", dedup_target_audience, "stack"),
    Rule("scheduler-attempt-deadline",
         "A job with an HTTP target has an attemptDeadline within 15 s to 30 min, one with an App Engine target within "
         "15 s to 24 h (Cloud Scheduler's limits).",
         "mandatory", scheduler_attempt_deadline, "resource",
         {"minSeconds": {"type": "number", "default": limits.SCHEDULER_HTTP_DEADLINE_MIN_S, "minimum": 0,
                         "maximum": limits.SCHEDULER_HTTP_DEADLINE_MAX_S,
                         "description": "lowest accepted attempt deadline in seconds (not below 15)"},
          "maxSeconds": {"type": "number", "default": limits.SCHEDULER_HTTP_DEADLINE_MAX_S,
                         "minimum": limits.SCHEDULER_HTTP_DEADLINE_MIN_S,
                         "description": "highest accepted attempt deadline in seconds (not above 1800)"},
          "appEngineMaxSeconds": {"type": "number", "default": limits.SCHEDULER_APP_ENGINE_DEADLINE_MAX_S,
                                  "minimum": limits.SCHEDULER_HTTP_DEADLINE_MIN_S,
                                  "maximum": limits.SCHEDULER_APP_ENGINE_DEADLINE_MAX_S,
                                  "description": "highest accepted attempt deadline of an App Engine target in seconds "
                                                 "(not above 86400)"}},
         ordered_settings=(("minSeconds", "maxSeconds"), ("minSeconds", "appEngineMaxSeconds"))),
    Rule("scheduler-attempt-deadline-margin",
         "Advisory part of scheduler-attempt-deadline: the attempt deadline is not within a margin of the Cloud Run "
         "request timeout of the service the job calls.",
         "advisory", scheduler_attempt_deadline_margin, "stack",
         {"minMarginSeconds": {"type": "number", "default": REQUEST_TIMEOUT_MARGIN_SECONDS, "minimum": 0,
                               "description": "least seconds between attempt deadline and request timeout"}}),
    Rule("scheduler-retry-config",
         "A job's retryConfig has retryCount within 0 to 5 and consistent backoff values.",
         "advisory", scheduler_retry_config, "resource",
         {"maxRetryCount": {"type": "integer", "default": limits.SCHEDULER_RETRY_COUNT_MAX, "minimum": 0,
                            "description": "highest accepted retryCount (not above 5)"}}),
    Rule("scheduler-target-not-google-api",
         "A job that calls a *.googleapis.com endpoint directly is not deduplicated; route it through the handler's proxy.",
         "advisory", scheduler_target_not_google_api, "resource",
         {"allowedHosts": {"type": "array", "items": {"type": "string"}, "default": [],
                           "description": "googleapis.com hosts a job may call directly"}}),
    Rule("cloud-run-no-public-invoker",
         "No allUsers or allAuthenticatedUsers on a Cloud Run service or its IAM resources, and no disabled invoker check.",
         "mandatory", cloud_run_no_public_invoker, "resource"),
    Rule("no-primitive-roles",
         "No roles/owner, roles/editor or roles/viewer granted to any member by the stack.",
         "mandatory", no_primitive_roles, "resource",
         {"forbiddenRoles": {"type": "array", "items": {"type": "string"}, "default": list(limits.PRIMITIVE_ROLES),
                             "description": "roles no IAM resource of the stack may grant"}}),
    Rule("dedup-identity-powers",
         "Judged by the permissions a role carries (a dated table of predefined roles, the stack's custom roles), at "
         "every level: nobody may act as or mint tokens for a dedup job's runtime, build or Scheduler account (only "
         "Cloud Scheduler's service agent, the Scheduler account's OIDC tokens), and no dedup identity may change IAM, "
         "administer the store or the service, or do anything ('*', a basic role).",
         "mandatory", dedup_identity_powers, "stack"),
    Rule("dedup-identity-expected-grants",
         "Each dedup identity holds exactly the grants the component makes plus the roles declared for the job's own "
         "work; any other grant to one is named. A dedup service without a runtime account (the default compute "
         "account, Editor by default) is refused.",
         "mandatory", dedup_identity_expected_grants, "stack",
         {"declaredRoles": {"type": "array", "items": {"type": "string"}, "default": [],
                            "description": "roles a stack written without the component grants its runtime "
                                           "account for the job's own work (still refused when dedup-identity-powers "
                                           "finds them dangerous)"}}),
    Rule("dedup-cloud-build-trigger-grant",
         "A handler whose proxy target is a Cloud Build trigger has a grant in the stack that lets its runtime service "
         "account run the trigger and list its builds (roles/cloudbuild.builds.editor on the trigger's project, "
         "without an IAM condition).",
         "advisory", dedup_cloud_build_trigger_grant, "stack"),
    Rule("dedup-firestore-ttl",
         "Every dedup collection (DEDUP_COLLECTION/DEDUP_DATABASE of a dedup Cloud Run service) has a Firestore TTL "
         "policy on its expiry field.",
         "mandatory", dedup_firestore_ttl, "stack",
         {"expiryField": {"type": "string", "default": limits.EXPIRY_FIELD,
                          "description": "the run records' expiry timestamp field"}}),
    Rule("firestore-ttl-single-owner",
         "At most one Firestore TTL Field per project, database and collection group in a stack, whatever its field: "
         "Firestore allows one TTL field per collection group, and two owners remove it for each other on destroy.",
         "mandatory", firestore_ttl_single_owner, "stack"),
    Rule("dedup-run-check-index",
         "Where a watchdog calls the handler's run check, its collection has the composite index the check's query "
         "needs (job_name ascending, schedule_time descending).",
         "mandatory", dedup_run_check_index, "stack"),
    Rule("firestore-database-location",
         "A Firestore database's locationId is one Firestore is offered in.",
         "mandatory", firestore_database_location, "resource"),
    Rule("dedup-ttl-owner-declared",
         "A dedup service whose TTL policy lives in another stack (env DEDUP_TTL_OWNER) names a known owner and is not "
         "also given a TTL Field in this stack.",
         "advisory", dedup_ttl_owner_declared, "stack",
         {"expiryField": {"type": "string", "default": limits.EXPIRY_FIELD,
                          "description": "the run records' expiry timestamp field"},
          "knownOwners": {"type": "array", "items": {"type": "string"}, "default": [],
                          "description": "accepted DEDUP_TTL_OWNER values, e.g. the store stacks' names (empty: any)"}}),
    Rule("memorystore-dedup-standard-tier",
         "A Memorystore instance holding run records is STANDARD_HA: a Basic Tier instance loses every record on a "
         "restart or maintenance, and each run of the retry window runs again.",
         "mandatory", memorystore_dedup_standard_tier, "stack"),
    Rule("memorystore-dedup-noeviction",
         "A Memorystore instance holding run records has maxmemory-policy noeviction: the default volatile-lru evicts "
         "keys with a TTL, and every run record has one.",
         "mandatory", memorystore_dedup_noeviction, "stack"),
    Rule("memorystore-dedup-auth",
         "A Memorystore instance holding run records has AUTH on.",
         "mandatory", memorystore_dedup_auth, "stack"),
    Rule("memorystore-dedup-transit-encryption",
         "A Memorystore instance holding run records encrypts in transit (SERVER_AUTHENTICATION).",
         "mandatory", memorystore_dedup_transit_encryption, "stack"),
    Rule("memorystore-dedup-persistence",
         "A Memorystore instance holding run records takes RDB snapshots.",
         "advisory", memorystore_dedup_persistence, "stack"),
    Rule("memorystore-dedup-replica",
         "A Memorystore instance holding run records has a replica, and the handler waits for it on the writes that "
         "decide a run (DEDUP_REDIS_WAIT_TIMEOUT_MS not 0).",
         "advisory", memorystore_dedup_replica, "stack"),
    Rule("spanner-row-deletion-policy",
         "Every Spanner table of run records (in a Spanner database of the stack, or named by a dedup service with "
         "DEDUP_STORE=spanner) has a ROW DELETION POLICY, so records are deleted.",
         "mandatory", spanner_row_deletion_policy, "stack"),
    Rule("spanner-retention-covers-retries",
         "A Spanner run records' table keeps records, by its row deletion policy's column and interval (read from the "
         "DDL), for longer than the job's retry window.",
         "mandatory", spanner_retention_covers_retries, "stack",
         {"marginSeconds": {"type": "number", "default": 0, "minimum": 0,
                            "description": "extra seconds retention must exceed the retry window by"}}),
    Rule("spanner-data-role-database-scoped",
         "A dedup job's accounts hold Spanner roles on the store's database only, never on an instance or a whole "
         "project without a condition.",
         "mandatory", spanner_data_role_database_scoped, "stack"),
    Rule("spanner-store-drop-protection",
         "A Spanner database holding run records has drop protection (enableDropProtection).",
         "advisory", spanner_store_drop_protection, "stack"),
    Rule("dedup-handler-settings",
         "A service running the dedup handler sets a DEDUP_* / GOOGLE_CLOUD_PROJECT environment that passes the "
         "handler's own start-up checks (the ones the DedupScheduledJob component runs), so it does not refuse to start.",
         "mandatory", dedup_handler_settings, "stack"),
    Rule("dedup-shared-collection-job-bound",
         "Handlers sharing one run-record collection each name the one Scheduler job they serve "
         "(DEDUP_SCHEDULER_JOB), so a delivery to one cannot claim a run of another's job.",
         "mandatory", dedup_shared_collection_job_bound, "stack"),
    Rule("dedup-lease-covers-deadline",
         "The handler's lease (DEDUP_LEASE_SECONDS) is at least the service request timeout, which is at least the "
         "job's attempt deadline.",
         "mandatory", dedup_lease_covers_deadline, "stack",
         {"leaseMarginSeconds": {"type": "number", "default": 0, "minimum": 0,
                                 "description": "extra seconds the lease must exceed the request timeout by"}}),
    Rule("dedup-retries-outlast-lease",
         "A crashed attempt's run is retried after its lease expires: the waits before the job's retries add up to at "
         "least DEDUP_LEASE_SECONDS.",
         "mandatory", dedup_retries_outlast_lease, "stack"),
    Rule("dedup-retention-covers-retries",
         "Run record retention (DEDUP_RETENTION_SECONDS) outlasts the job's retry window.",
         "mandatory", dedup_retention_covers_retries, "stack",
         {"marginSeconds": {"type": "number", "default": 0, "minimum": 0,
                            "description": "extra seconds retention must exceed the retry window by"}}),
    Rule("dedup-job-alerting",
         "A job calling the dedup handler has a watchdog job calling the handler's run check and an alert policy on "
         "its missed_run log lines, so a paused job or a broken handler does not go unnoticed.",
         "advisory", dedup_job_alerting, "stack"),
    Rule("dedup-scale-in",
         "A service whose handler runs a Python job keeps an instance (minimum instances 1), so a job outliving its "
         "attempt deadline is not scaled in mid-run; or run long jobs as a Cloud Run job.",
         "advisory", dedup_scale_in, "stack"),
    Rule("cloud-run-service-location",
         "A Cloud Run service's location is one Cloud Run is offered in.",
         "mandatory", cloud_run_service_location, "resource"),
    Rule("cloud-run-env-names",
         "Every environment variable of a Cloud Run service or job has a name Cloud Run takes: a letter or '_' first, "
         "then letters, digits and '_'; no X_GOOGLE_ prefix; not a name Cloud Run sets itself (PORT, K_SERVICE...).",
         "mandatory", cloud_run_env_names, "resource"),
    Rule("dedup-cpu-always-allocated",
         "A Cloud Run service running the dedup handler has CPU always allocated (cpuIdle: false), so lease renewals "
         "keep running after Scheduler hangs up.",
         "advisory", dedup_cpu_always_allocated, "stack"),
]
"""Every rule of the pack, in report order."""

RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}


# ---------------------------------------------------------------- evaluation without the engine

@dataclass(frozen=True)
class Finding:
    """One violation: which rule, at which level, on which resource (None: the stack), and what to change."""

    rule: str
    level: Level
    resource: Resource | None
    message: str

    @property
    def resource_label(self) -> str:
        """``name (type)`` of the resource, or ``(stack)``."""
        return f"{self.resource.name} ({self.resource.type})" if self.resource else "(stack)"


def enforcement_levels(policy_config: Mapping[str, Any] | None) -> dict[str, Level]:
    """Each rule's level after a Pulumi policy config (``{"all": "advisory", "rule": {"enforcementLevel": ...}}``)."""
    config = policy_config or {}
    levels: dict[str, Level] = {}
    for rule in RULES:
        level: Any = rule.enforcement_level
        for key in ("all", rule.name):
            value = config.get(key)
            candidate = value.get("enforcementLevel") if isinstance(value, Mapping) else value
            if candidate in ("mandatory", "advisory", "disabled", "remediate"):
                level = "mandatory" if candidate == "remediate" else candidate
        levels[rule.name] = level
    return levels


def evaluate(resources: Sequence[Resource], policy_config: Mapping[str, Any] | None = None,
             rules: Iterable[Rule] = RULES) -> list[Finding]:
    """Run ``rules`` over ``resources`` the way the policy engine would and return every violation.

    ``policy_config`` has the format of ``pulumi preview --policy-pack-config`` files: rule name (or
    ``all``) -> enforcement level string, or -> object with ``enforcementLevel`` and config properties.
    """
    levels = enforcement_levels(policy_config)
    findings: list[Finding] = []
    for rule in rules:
        level = levels.get(rule.name, rule.enforcement_level)
        if level == "disabled":
            continue
        given = (policy_config or {}).get(rule.name)
        config = rule.resolve_config(given if isinstance(given, Mapping) else None)
        if rule.scope == "resource":
            for resource in resources:
                for message in rule.check(resource, config):
                    findings.append(Finding(rule.name, level, resource, str(message)))
        else:
            for subject, message in rule.check(resources, config):
                findings.append(Finding(rule.name, level, subject, message))
    return findings
