"""A stack written by hand with raw pulumi-gcp resources (no DedupScheduledJob), with one mistake per rule area.

The offline tests run :func:`program` under Pulumi mocks (``scheduler_dedup.policies.offline.check.check_program``)
and expect every rule to catch its mistake, proving the pack protects stacks that do not use our component.
:func:`good_program` is the same stack done right.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_gcp as gcp

REGION = "europe-west1"


#: The handler's runtime service account in :func:`good_program` (without one, Cloud Run runs it as the default
#: compute account, Editor on the project by default).
RUNTIME_ACCOUNT = "run@p.iam.gserviceaccount.com"


def _env_var(name: str, value: Any) -> gcp.cloudrunv2.ServiceTemplateContainerEnvArgs:
    """A plain variable, or (``value`` a :class:`SecretEnv`) one whose value comes from a Secret Manager secret."""
    if isinstance(value, SecretEnv):
        return gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(
            name=name, value_source=gcp.cloudrunv2.ServiceTemplateContainerEnvValueSourceArgs(
                secret_key_ref=gcp.cloudrunv2.ServiceTemplateContainerEnvValueSourceSecretKeyRefArgs(
                    secret=value.secret, version="latest")))
    return gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(name=name, value=value)


class SecretEnv:
    """A variable of :func:`good_program`'s ``env`` whose value is Secret Manager secret ``secret``'s."""

    def __init__(self, secret: str):
        self.secret = secret


def _service(name: str, *, env: dict[str, Any], timeout: str, public: bool = False,
             cpu_always_allocated: bool = False, min_instances: int | None = None,
             service_account: str | None = None) -> gcp.cloudrunv2.Service:
    return gcp.cloudrunv2.Service(
        name, location=REGION, deletion_protection=False, invoker_iam_disabled=public or None,
        template=gcp.cloudrunv2.ServiceTemplateArgs(
            timeout=timeout, service_account=service_account,
            scaling=gcp.cloudrunv2.ServiceTemplateScalingArgs(min_instance_count=min_instances)
            if min_instances is not None else None,
            containers=[gcp.cloudrunv2.ServiceTemplateContainerArgs(
                image="europe-west1-docker.pkg.dev/p/images/dedup-handler:1.0",
                envs=[_env_var(k, v) for k, v in env.items()],
                resources=gcp.cloudrunv2.ServiceTemplateContainerResourcesArgs(cpu_idle=False)
                if cpu_always_allocated else None,
            )],
        ),
    )


def program() -> None:
    """Every mistake: groc schedule, bad time zone, 10 s deadline, 9 retries, wrong audience, a direct Google
    API target, public invoker, a basic role, broad grants to the dedup identities, no TTL policy, lease < timeout,
    retention < retry window, a variable name Cloud Run refuses."""
    service = _service("handler", env={"DEDUP_LEASE_SECONDS": "60", "DEDUP_RETENTION_SECONDS": "600", "1BAD": "x"},
                       timeout="300s", public=True)
    gcp.cloudscheduler.Job(
        "job", region=REGION, schedule="every 5 minutes", time_zone="Mars/Olympus", attempt_deadline="10s",
        retry_config=gcp.cloudscheduler.JobRetryConfigArgs(retry_count=9, max_backoff_duration="3600s"),
        http_target=gcp.cloudscheduler.JobHttpTargetArgs(
            uri=service.uri, http_method="POST",
            oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                service_account_email="sched@p.iam.gserviceaccount.com", audience="https://wrong.example.com"),
        ),
    )
    gcp.cloudscheduler.Job(
        "direct", region=REGION, schedule="0 3 * * *",
        http_target=gcp.cloudscheduler.JobHttpTargetArgs(
            uri="https://workflowexecutions.googleapis.com/v1/projects/p/locations/europe-west1/workflows/w/executions",
            oauth_token=gcp.cloudscheduler.JobHttpTargetOauthTokenArgs(service_account_email="sched@p.iam.gserviceaccount.com"),
        ),
    )
    gcp.cloudrunv2.ServiceIamMember("public", name=service.name, location=REGION, role="roles/run.invoker",
                                    member="allUsers")
    gcp.projects.IAMMember("editor", project="p", role="roles/editor", member="serviceAccount:run@p.iam.gserviceaccount.com")
    gcp.projects.IAMPolicy("policy", project="p", policy_data=json.dumps(
        {"bindings": [{"role": "roles/owner", "members": ["user:admin@example.com"]}]}))
    # the dedup identities' own broad grants: the Scheduler account may act as any account of the project, and
    # a group may mint the Scheduler account's OIDC tokens (and so call the handler as Scheduler)
    gcp.projects.IAMMember("sched-acts-as-all", project="p", role="roles/iam.serviceAccountUser",
                           member="serviceAccount:sched@p.iam.gserviceaccount.com")
    gcp.serviceaccount.IAMMember("ops-mint-sched-tokens", service_account_id="projects/p/serviceAccounts/"
                                 "sched@p.iam.gserviceaccount.com", role="roles/iam.serviceAccountOpenIdTokenCreator",
                                 member="group:ops@example.com")


#: The handler's environment in :func:`good_program`: Cloud Run sets none of it, so the project and the job's entry
#: point are given too (the handler refuses to start without them).
GOOD_ENV = {"GOOGLE_CLOUD_PROJECT": "p", "DEDUP_JOB": "jobs:run", "DEDUP_COLLECTION": "scheduler_runs",
            "DEDUP_LEASE_SECONDS": "600", "DEDUP_RETENTION_SECONDS": "604800"}


def good_program(env: dict[str, str | None] | None = None, redis_url: "pulumi.Output[str] | None" = None) -> None:
    """The same stack done right: every rule passes, advisory ones included.

    ``env`` changes the handler's environment (a None value removes the variable), for tests of one change;
    ``redis_url`` is a Memorystore store's ``DEDUP_REDIS_URL`` (:func:`good_redis_program`).
    """
    changed: dict[str, Any] = {**GOOD_ENV, **(env or {})}
    if redis_url is not None:
        changed["DEDUP_REDIS_URL"] = redis_url
    # one instance kept, so a job that outlives its attempt deadline is not scaled in (the advisory dedup-scale-in)
    service = _service("handler", env={k: v for k, v in changed.items() if v is not None}, timeout="600s",
                       cpu_always_allocated=True, min_instances=1, service_account=RUNTIME_ACCOUNT)
    # hourly: the retry window (6 x 300 s + 750 s) ends before the next fire time (the advisory scheduler-runs-overlap)
    gcp.cloudscheduler.Job(
        "job", region=REGION, schedule="0 * * * *", time_zone="Etc/UTC", attempt_deadline="300s",
        # the retries (30, 60, 120, 240, 300 s apart: 750 s) outlast the 600 s lease of a crashed attempt
        retry_config=gcp.cloudscheduler.JobRetryConfigArgs(retry_count=5, min_backoff_duration="30s",
                                                           max_backoff_duration="300s", max_doublings=3),
        http_target=gcp.cloudscheduler.JobHttpTargetArgs(
            uri=service.uri, http_method="POST",
            oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                service_account_email="sched@p.iam.gserviceaccount.com", audience=service.uri),
        ),
    )
    gcp.cloudrunv2.ServiceIamMember("invoker", name=service.name, location=REGION, role="roles/run.invoker",
                                    member="serviceAccount:sched@p.iam.gserviceaccount.com")
    if changed.get("DEDUP_STORE") != "redis":  # Redis expires each record itself, and has no index
        gcp.firestore.Field("ttl", collection="scheduler_runs", field="expire_at", database="(default)",
                            ttl_config=gcp.firestore.FieldTtlConfigArgs(), index_config=gcp.firestore.FieldIndexConfigArgs())
        # the composite index the watchdog's run check queries with (dedup-run-check-index)
        gcp.firestore.Index("history", collection="scheduler_runs", database="(default)", query_scope="COLLECTION",
                            fields=[gcp.firestore.IndexFieldArgs(field_path="job_name", order="ASCENDING"),
                                    gcp.firestore.IndexFieldArgs(field_path="schedule_time", order="DESCENDING")])
    # alerting (the advisory dedup-job-alerting): an hourly watchdog calling the handler's run check, and an alert
    # policy on the missed_run lines it logs for this service
    gcp.cloudscheduler.Job(
        "watchdog", region=REGION, schedule="7 * * * *", time_zone="Etc/UTC", attempt_deadline="300s",
        retry_config=gcp.cloudscheduler.JobRetryConfigArgs(retry_count=5, min_backoff_duration="30s",
                                                           max_backoff_duration="300s", max_doublings=3),
        http_target=gcp.cloudscheduler.JobHttpTargetArgs(
            uri=service.uri.apply(lambda uri: f"{uri}/dedup/run-check"), http_method="POST",
            oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                service_account_email="sched@p.iam.gserviceaccount.com", audience=service.uri),
        ),
    )
    gcp.monitoring.AlertPolicy(
        "missed-runs", display_name="scheduled runs missed", combiner="OR",
        conditions=[gcp.monitoring.AlertPolicyConditionArgs(
            display_name="missed_run logged",
            condition_matched_log=gcp.monitoring.AlertPolicyConditionConditionMatchedLogArgs(
                filter=service.name.apply(lambda name: f'resource.type="cloud_run_revision" '
                                                       f'resource.labels.service_name="{name}" '
                                                       'jsonPayload.event="missed_run"')),
        )],
        alert_strategy=gcp.monitoring.AlertPolicyAlertStrategyArgs(
            notification_rate_limit=gcp.monitoring.AlertPolicyAlertStrategyNotificationRateLimitArgs(period="3600s")),
    )


def _redis_instance(name: str, **settings: Any) -> gcp.redis.Instance:
    return gcp.redis.Instance(name, region=REGION, memory_size_gb=1, labels={"scheduler-dedup": "run-store"},
                              **settings)


def redis_program() -> None:
    """A hand-written Memorystore run store with every mistake: Basic Tier (the default), the default
    maxmemory-policy (volatile-lru evicts every record, since each has a TTL), no AUTH, no TLS, no persistence,
    and the handler not waiting for a replica."""
    store = _redis_instance("runs-redis")
    env = {**GOOD_ENV, "DEDUP_STORE": "redis", "DEDUP_REDIS_WAIT_TIMEOUT_MS": "0"}
    service = _service("handler", env=env, timeout="600s", cpu_always_allocated=True, service_account=RUNTIME_ACCOUNT)
    del store
    gcp.cloudrunv2.ServiceIamMember("invoker", name=service.name, location=REGION, role="roles/run.invoker",
                                    member="serviceAccount:sched@p.iam.gserviceaccount.com")


def good_redis_program() -> None:
    """:func:`good_program` on a Memorystore run store done right: STANDARD_HA, noeviction, AUTH and TLS on, RDB
    snapshots, the AUTH string and server CA mounted from Secret Manager, WAIT on."""
    store = _redis_instance(
        "runs-redis", tier="STANDARD_HA", redis_version="REDIS_7_2", auth_enabled=True,
        transit_encryption_mode="SERVER_AUTHENTICATION", redis_configs={"maxmemory-policy": "noeviction"},
        persistence_config=gcp.redis.InstancePersistenceConfigArgs(persistence_mode="RDB",
                                                                   rdb_snapshot_period="ONE_HOUR"))
    url = store.host.apply(lambda host: f"rediss://{host}:6378/0")
    good_program({"DEDUP_STORE": "redis", "DEDUP_REDIS_AUTH_FILE": "/secrets/redis-auth/auth",
                  "DEDUP_REDIS_CA_FILE": "/secrets/redis-ca/ca.pem", "DEDUP_REDIS_WAIT_TIMEOUT_MS": "500"},
                 redis_url=url)
