"""``DedupScheduledJob`` (type ``scheduler-dedup:index:DedupScheduledJob``): one Pulumi component that deploys a
deduplicated Cloud Scheduler job, its handler (a Cloud Run function built from the deploy archive
(:mod:`.function_deploy`), a Cloud Run service of a prebuilt ``image``, or an App Engine version with ``app_engine``),
their service accounts, the job's own store unless ``store`` is given, and non-authoritative grants only
(:data:`GRANTS_DOC`). Children are ``parent=self`` and named ``<name>-<part>``; docs/deploying.md lists them. The
store's part (its own store, the runtime identity's grant on it, its wiring) is the store's component piece's
(:mod:`scheduler_dedup.infra.stores.base`).

The OIDC audience is derived from the inputs alone (the service URL would be an output of the service whose
environment needs it, a cycle): a function's URL ``https://R-P.cloudfunctions.net/NAME``, or for an image a custom
audience ``https://scheduler-dedup.invalid/projects/P/locations/R/services/S`` set on the service; the same value is
the Scheduler job's ``oidc_token`` audience and ``DEDUP_OIDC_AUDIENCE``.
"""

from collections.abc import Callable, Mapping
from functools import partial
from typing import Optional

import pulumi
import pulumi_gcp as gcp
import pulumiverse_time


from scheduler_dedup.infra.job.alerts import resolve_alerts, provision_alerts
from scheduler_dedup.infra.project.apis import ALERT_APIS, BASE_APIS, PLATFORM_APIS, SOURCE_DEPLOY_APIS, TARGET_APIS, for_store
from scheduler_dedup.infra.job.app_engine import app_engine_http_target, app_engine_url, app_engine_version, default_version_id
from scheduler_dedup.infra.job.archive import DeployArchive, build_deploy_archive
from scheduler_dedup.infra.job.function_deploy import deploy_function, upload_archive
from scheduler_dedup.infra.args import DedupScheduledJobArgs
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.handler.service.server import SERVER_THREADS

from scheduler_dedup.infra.project.enable import enable_apis
from scheduler_dedup.infra.project.providers import project_source
from scheduler_dedup.infra.job.environment import handler_environment
from scheduler_dedup.infra.job.job_roles import grant_job_roles
from scheduler_dedup.infra.job.job_wiring import grant_secret_access, job_envs, secret_volumes, vpc_access
from scheduler_dedup.infra.job.resolved import DedupSettings
from scheduler_dedup.infra.job.settings import resolve_settings
from scheduler_dedup.infra.stores.base import StoreWiring
from scheduler_dedup.infra.stores.store import HANDLER_STORE, kind_apis, piece

TYPE_TOKEN = "scheduler-dedup:index:DedupScheduledJob"

#: Role granted to the runtime identity on a proxy target, per target type.
TARGET_ROLES = {
    # workflows.executions.create/get/list on the workflow; Workflows has no per-workflow IAM resource
    # in pulumi-gcp, so it is a project member with an IAM condition on the workflow's resource name.
    "workflows": "roles/workflows.invoker",
    # run.jobs.runWithOverrides (needed to pass DEDUP_RUN_ID as an env override), granted on that one job with
    # gcp.cloudrunv2.JobIamMember (https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs/run).
    # It holds run.jobs.run, run.jobs.runWithOverrides and run.executions.cancel only
    # (https://cloud.google.com/run/docs/reference/iam/roles): the existence check's executions.list needs
    # JOB_VIEWER_ROLE on the job too.
    "cloud_run_job": "roles/run.jobsExecutorWithOverrides",
    # cloudbuild.builds.create (triggers.run: "Authorization requires ... cloudbuild.builds.create"),
    # cloudbuild.builds.get (triggers.get) and cloudbuild.builds.list (builds.list): the least predefined Cloud Build
    # role holding all three (https://cloud.google.com/build/docs/iam-roles-permissions; Viewer lacks create).
    # Cloud Build grants roles on projects only, and its resources take no IAM condition
    # (cloudbuild.googleapis.com is not among https://cloud.google.com/iam/docs/conditions-resource-attributes),
    # so the grant is on the trigger's project, without a condition.
    "cloud_build_trigger": "roles/cloudbuild.builds.editor",
    # run.routes.invoke on the named Cloud Run service only.
    "http": "roles/run.invoker",
}

#: Cloud Run CPU settings the handler depends on, set on purpose rather than left to defaults.
#:
#: CPU always allocated (``cpu_idle=false``, instance-based billing) unless the ``cpu_always_allocated`` input
#: turns it off: the lease is renewed by a background thread while the job runs, and a job may run past the
#: attempt deadline after Scheduler has hung up. With request-based billing Cloud Run throttles CPU outside
#: request processing (https://cloud.google.com/run/docs/configuring/billing-settings,
#: https://cloud.google.com/run/docs/tips/general#avoid_background_activities), which would stall the renewals;
#: the lease would then expire under a live job and a retry would take the run over and run it a second time.
#: ``STARTUP_CPU_BOOST = True``: a cold start (import of the job, Firestore client) takes seconds out of the
#: attempt deadline; the boost shortens it (https://cloud.google.com/run/docs/configuring/services/cpu#startup-boost).
#: The setting is written explicitly because pulumi-gcp's ``cpu_idle`` defaults to true once ``resources`` is set.
STARTUP_CPU_BOOST = True

#: Role the runtime identity also gets on a Cloud Run job target: the existence check lists the job's executions
#: (run.executions.list, also run.executions.get), which roles/run.jobsExecutorWithOverrides lacks; roles/run.viewer is
#: the narrowest predefined role with them that can be granted on one job (https://cloud.google.com/run/docs/reference/iam/roles).
JOB_VIEWER_ROLE = "roles/run.viewer"

#: Role the runtime identity gets on its own service only: trust mode reads the service's IAM policy and
#: ``invokerIamDisabled`` (run.services.getIamPolicy, run.services.get). roles/run.viewer is the narrowest
#: predefined role with both and can be granted on one service (https://cloud.google.com/run/docs/reference/iam/roles);
#: a custom role would be narrower still (on one service, run.viewer's other permissions only read that service,
#: its revisions' and its IAM policy) but is a project-level resource the component would have to own.
SELF_CHECK_ROLE = "roles/run.viewer"

GRANTS_DOC = """\
scheduler SA : roles/run.invoker on this Cloud Run service only (Scheduler's OIDC call passes Cloud Run IAM); with a
               source deploy, on the service the function runs as (it has the function's name).
runtime SA   : roles/run.viewer on that same service only (the handler reads its own IAM policy and
               invokerIamDisabled to prove that Cloud Run IAM guards it before trusting verified tokens).
               roles/datastore.user on the project, with an IAM condition resource.name == the dedup database
               (Firestore has no per-database IAM resource; the condition is Firestore's documented way to
               limit a role to one database:
               https://cloud.google.com/firestore/docs/manage-databases#configure_per-database_access_permissions).
               Firestore IAM stops at the database: no condition narrows it to one collection.
               On a Spanner store instead: roles/spanner.databaseUser on that one database (a database-level
               IAM member: data read/write, and schema change, which no predefined Spanner role leaves out), never
               on the instance or the project.
               On a Memorystore store instead: roles/secretmanager.secretAccessor on its AUTH and CA secrets only.
               Plus the role of the proxy target, on that target only (TARGET_ROLES), and on a Cloud Run job target
               roles/run.viewer on that job too (listing its executions); a Cloud Build trigger's role is
               on its project (Cloud Build has no narrower IAM resource), plus roles/iam.serviceAccountUser on the
               trigger's own service account when one is named (running a trigger needs iam.serviceAccounts.actAs
               on the account its builds run as).
App Engine   : no scheduler SA (its target sends no token) and no invoker grant; the runtime SA is the version's
               service account.
build SA     : (source deploys: the function's Cloud Build identity) roles/storage.objectViewer on the source
               bucket, roles/artifactregistry.writer on the image repository, roles/logging.logWriter on the project
               (Cloud Build writes build logs), roles/storage.objectViewer on the project pinned by an IAM condition
               to the Functions API's gcf-v2-sources-* buckets (the build fetches its copy of the archive there).
A shared scheduler or build SA (given by email) gets the same grants on this job's resources; its project-level
grants are its owner's to make, once (one grant per binding, so no job's destroy removes it).
"""


class DedupScheduledJob(pulumi.ComponentResource):
    """A Cloud Scheduler job whose every scheduled run executes exactly once: Scheduler -> (OIDC) -> the dedup handler (a Cloud Run function built from source, or a Cloud Run service of an image) -> store claim -> your job or proxy target."""

    service_url: pulumi.Output[str]
    """URL the Scheduler job calls: a source deploy's function URL ``https://REGION-PROJECT.cloudfunctions.net/NAME``, the Cloud Run service URL of an ``image`` (with ``app_engine``: of its App Engine version, ``https://VERSION-dot-SERVICE-dot-PROJECT.REGION_ID.r.appspot.com``)."""
    job_name: pulumi.Output[str]
    """Full name of the Cloud Scheduler job, projects/P/locations/R/jobs/J."""
    scheduler_service_account_email: pulumi.Output[str]
    """Email of the identity whose OIDC token Scheduler sends (the only allowed caller); empty with ``app_engine``, whose target sends no token."""
    runtime_service_account_email: pulumi.Output[str]
    """Email of the handler's runtime identity (the function's or the Cloud Run service's)."""
    database_name: pulumi.Output[str]
    """Firestore database id holding the run records."""
    oidc_audience: pulumi.Output[str]
    """Audience of the Scheduler's OIDC token, also DEDUP_OIDC_AUDIENCE: the function URL of a source deploy, a Cloud Run custom audience with ``image``; empty with ``app_engine``."""

    def __init__(self, name: str, args: DedupScheduledJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """Validate ``args`` and create the children.

        Args:
            name: Pulumi name; lowercase letters, digits and hyphens, starting with a letter
                (GCP resource ids are derived from it).
            args: see :class:`~scheduler_dedup.infra.args.DedupScheduledJobArgs`.
            opts: resource options of the component.

        Raises:
            DedupConfigError: an invalid input, before any child is created (so ``pulumi preview`` fails).
        """
        source = project_source(opts)
        settings = resolve_settings(name, args, default_project=source.project, provider_name=source.provider_name)
        # The store's piece decides what of the store is the job's: its own store's TTL claimed before any child.
        store_piece = piece(settings.store_kind)
        own_store = store_piece.claim_own(settings, f"DedupScheduledJob {name}")
        alerts = resolve_alerts(args.get("alerts"), settings)
        app_engine = settings.app_engine
        archive = None
        if settings.image is None and (app_engine is None or app_engine.deploy):
            archive = build_deploy_archive(settings.job_source, store=HANDLER_STORE[settings.store_kind])
        super().__init__(TYPE_TOKEN, name, None, opts)
        self.settings = settings
        for advisory in settings.advisories:  # the pack's advisory rules say the same of the deployed resources
            pulumi.log.warn(advisory, resource=self)
        child = pulumi.ResourceOptions(parent=self)
        s = settings

        # --- APIs -------------------------------------------------------------------------------
        # A shared store enables every API its jobs need, alerting's included (store.store_apis()).
        apis = [] if s.store else [*for_store(BASE_APIS, kind_apis(s.store_kind)), *PLATFORM_APIS[s.scheduler_target],
                                   *TARGET_APIS.get(s.target_type, ()), *(SOURCE_DEPLOY_APIS if archive is not None else ())]
        apis += list(ALERT_APIS) if alerts is not None and not s.store else []
        apis += list(s.job_config.apis)  # the job's own secrets and VPC egress: a store enables none of these
        # Enabled is not yet usable: resources wait until the APIs this component enables are (enable_apis); APIs a
        # store enabled in another stack were enabled long before.
        enabled = enable_apis(name, s.project, apis, self)
        if s.store is not None and s.store.component is not None:
            enabled.append(s.store.component)
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=list(enabled))

        # --- identities -------------------------------------------------------------------------
        def service_account(suffix: str, role: str, description: str) -> gcp.serviceaccount.Account:
            return gcp.serviceaccount.Account(
                f"{name}-{suffix}",
                gcp.serviceaccount.AccountArgs(
                    account_id=s.names.accounts[suffix], project=s.project,
                    display_name=f"scheduler-dedup {name}: {role}", description=description,
                ),
                opts=after_apis,
            )

        scheduler_email: pulumi.Input[str] = ""
        scheduler_member: pulumi.Input[str] = ""
        scheduler_id: pulumi.Input[str] | None = None
        if app_engine is None:  # an App Engine target sends no OIDC token: Scheduler needs no identity there
            scheduler_email, scheduler_member, scheduler_id = self._identity(
                s.scheduler_service_account_email, lambda: service_account(
                    "sched", "Cloud Scheduler caller",
                    "OIDC identity of the Cloud Scheduler job; may only invoke its dedup service."))
        runtime_sa = service_account(
            "runtime", "handler runtime",
            "Runtime identity of the dedup handler: its store's database, its proxy target.")

        # --- the store: the job's own, or only the grants on the shared one -----------------------
        store = store_piece.job_children(self, name, s, own_store, member=runtime_sa.member, enabled=enabled,
                                         after_apis=after_apis, labels=s.job_config.labels)
        database, database_id, store_wiring = store.database, store.database_id, store.wiring

        # --- proxy target grants, the job's own roles and secrets ---------------------------------
        self._grant_target(name, s, runtime_sa)
        grant_job_roles(name, s.job_config.roles, runtime_sa.member, pulumi.ResourceOptions(parent=self))
        secret_grants = grant_secret_access(name, s.job_config, runtime_sa.member, after_apis)

        # When the job got its schedule: created with the job, replaced (a new time) when the schedule, its time
        # zone or the job's name changes. Run history expects no fire time before it, so a fresh deploy reports
        # nothing missed (DEDUP_SCHEDULE_SINCE). A pause does not move it: a run missed before the pause stays missed.
        schedule_since = pulumiverse_time.Static(
            f"{name}-schedule-since",
            pulumiverse_time.StaticArgs(triggers={"schedule": s.schedule, "time_zone": s.time_zone,
                                                  "job": s.scheduler_job_name}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # The pause, recorded beside the schedule's start: when `paused` last changed (replaced at each change), and
        # when the last pause began: taken from it while the job is paused, kept as it was while the job runs
        # (ignore_changes), so after a resume the pause is [paused-since, pause-state), its fire times paused, not
        # missed (DEDUP_PAUSED_SINCE, DEDUP_RESUMED_AT). For a job never paused both are its creation: no pause.
        pause_state = pulumiverse_time.Static(
            f"{name}-pause-state",
            pulumiverse_time.StaticArgs(triggers={"paused": "true" if s.paused else "false"}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        paused_since = pulumiverse_time.Static(
            f"{name}-paused-since",
            pulumiverse_time.StaticArgs(rfc3339=pause_state.rfc3339),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=[] if s.paused else ["rfc3339"]),
        )
        # The location run keys are made with: the region of the job's first deploy, kept when `region` moves
        # (ignore_changes keeps the triggers Pulumi stored, https://www.pulumi.com/docs/iac/concepts/options/ignorechanges/),
        # so while `up` moves the job the old and the new Scheduler job key a fire time to one run (docs/renaming.md).
        key_location = pulumiverse_time.Static(
            f"{name}-key-location",
            pulumiverse_time.StaticArgs(triggers={"region": s.region}),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["triggers"]),
        )
        environment = {**handler_environment(s), store_piece.DATABASE_ENV: database_id,
                       "DEDUP_RUN_KEY_LOCATION": key_location.triggers.apply(partial(_kept_region, s.region)),
                       "DEDUP_SCHEDULE_SINCE": schedule_since.rfc3339, "DEDUP_PAUSED_SINCE": paused_since.rfc3339,
                       **({} if s.paused else {"DEDUP_RESUMED_AT": pause_state.rfc3339}),
                       # the handler pins the caller by the unique id of the account the component made (a shared
                       # account's is not known here)
                       **({} if scheduler_id is None else {"DEDUP_ALLOWED_CALLER_IDS": scheduler_id})}
        labels = dict(s.job_config.labels)
        self.archive_sha256: Optional[str] = archive.sha256 if archive is not None else None
        retry = s.retry
        retry_config = gcp.cloudscheduler.JobRetryConfigArgs(
            retry_count=retry.retry_count,
            max_retry_duration=f"{retry.max_retry_duration_seconds}s",
            min_backoff_duration=f"{retry.min_backoff_seconds}s",
            max_backoff_duration=f"{retry.max_backoff_seconds}s",
            max_doublings=retry.max_doublings,
        )
        job_args = dict(
            name=s.scheduler_job_name, project=s.project, region=s.region,
            description=f"scheduler-dedup {name}: exactly one execution per scheduled run",
            schedule=s.schedule, time_zone=s.time_zone,
            attempt_deadline=f"{s.attempt_deadline_seconds}s", retry_config=retry_config, paused=s.paused,
        )

        if app_engine is not None:
            # --- App Engine: the handler as a standard version, Scheduler's App Engine target ----------
            version_id: Optional[pulumi.Input[str]] = app_engine.version
            job_depends: list[pulumi.Resource] = [*enabled]
            if archive is not None:
                bucket, source_object = upload_archive(self, name, s, archive, after_apis, labels)
                version = app_engine_version(
                    name, project=s.project, app_engine=app_engine,
                    version_id=app_engine.version or default_version_id(archive.sha256),
                    source_url=pulumi.Output.concat("https://storage.googleapis.com/", bucket.name, "/",
                                                    source_object.output_name),
                    environment={**s.job_config.env, **environment}, service_account=runtime_sa.email, max_instances=s.max_instance_count,
                    min_instances=s.min_instance_count,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[*enabled, *([database] if database else [])]),
                )
                version_id = version.version_id
                job_depends.append(version)
            job = gcp.cloudscheduler.Job(
                f"{name}-job",
                gcp.cloudscheduler.JobArgs(
                    **job_args,  # type: ignore[arg-type]
                    app_engine_http_target=app_engine_http_target(app_engine, version_id, scheduler_headers(s)),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=job_depends),
            )
            service_url = app_engine_url(name, s.project, app_engine.service, version_id, child, s.region)
        else:
            service_url, invoker = self._cloud_run(name, s, archive, environment, runtime_sa, scheduler_email,
                                                   scheduler_member, enabled, database, after_apis, service_account,
                                                   store_wiring, labels, secret_grants)
            job = gcp.cloudscheduler.Job(
                f"{name}-job",
                gcp.cloudscheduler.JobArgs(
                    **job_args,  # type: ignore[arg-type]
                    http_target=gcp.cloudscheduler.JobHttpTargetArgs(
                        uri=service_url, http_method="POST",
                        headers=scheduler_headers(s),
                        oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                            service_account_email=scheduler_email, audience=s.oidc_audience,
                        ),
                    ),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*enabled, invoker]),
            )
            if alerts is not None:
                provision_alerts(name, s, alerts, parent=self, service_uri=service_url,
                                 scheduler_sa_email=scheduler_email, depends_on=[*enabled, invoker])

        self.service_url = pulumi.Output.from_input(service_url)
        self.job_name = job.id
        self.scheduler_service_account_email = pulumi.Output.from_input(scheduler_email)
        self.runtime_service_account_email = runtime_sa.email
        self.database_name = store.database_name
        self.oidc_audience = pulumi.Output.from_input(s.oidc_audience if app_engine is None else "")
        self.register_outputs(
            {
                "service_url": self.service_url,
                "job_name": self.job_name,
                "scheduler_service_account_email": self.scheduler_service_account_email,
                "runtime_service_account_email": self.runtime_service_account_email,
                "database_name": self.database_name,
                "oidc_audience": self.oidc_audience,
            }
        )

    def _cloud_run(self, name: str, s: DedupSettings, archive: Optional[DeployArchive],
                   environment: dict[str, pulumi.Input[str]], runtime_sa: gcp.serviceaccount.Account,
                   scheduler_email: pulumi.Input[str], scheduler_member: pulumi.Input[str],
                   enabled: list[pulumi.Resource], database: Optional[pulumi.Resource],
                   after_apis: pulumi.ResourceOptions,
                   service_account: Callable[[str, str, str], gcp.serviceaccount.Account],
                   store_wiring: Optional[StoreWiring] = None, labels: Optional[dict[str, str]] = None,
                   secret_grants: Optional[list[pulumi.Resource]] = None,
                   ) -> tuple[pulumi.Output[str], gcp.cloudrunv2.ServiceIamMember]:
        """The Cloud Run service (built from the archive, or the prebuilt image) and the Scheduler identity's
        invoker grant on it; returns ``(service URL, invoker grant)``."""
        child = pulumi.ResourceOptions(parent=self)
        depends: list[pulumi.Resource] = [*enabled, *([database] if database else []),
                                          *(store_wiring.grants if store_wiring else []), *(secret_grants or [])]
        service_name: pulumi.Input[str]
        if archive is not None:  # the source deploy: Cloud Run functions builds the archive and serves the image
            build_email, build_member, _ = self._identity(
                s.build_service_account_email, lambda: service_account(
                    "build", "source build",
                    "Cloud Build identity of the source deploy: reads the archive, pushes the image."))
            built = deploy_function(
                self, name, s, archive, environment={**environment, "DEDUP_ALLOWED_CALLERS": scheduler_email},
                runtime_email=runtime_sa.email, build_email=build_email, build_member=build_member,
                after_apis=after_apis, labels=labels or {}, store_wiring=store_wiring, depends_on=depends,
                service_account_name=_service_account_name)
            url, service_name = built.url, built.service_name
        else:
            url, service_name = self._prebuilt_service(name, s, environment, runtime_sa, scheduler_email, store_wiring,
                                                       labels, depends)
        # The Cloud Run service the handler runs in (a function's service has the function's name): the invoker and
        # trust mode's self-check are granted on it; a gen2 function's invoker is run.invoker "assigned on the Cloud
        # Run service resource" (https://cloud.google.com/functions/docs/securing/authenticating).
        gcp.cloudrunv2.ServiceIamMember(
            f"{name}-runtime-self-viewer",
            gcp.cloudrunv2.ServiceIamMemberArgs(
                project=s.project, location=s.region, name=service_name,
                role=SELF_CHECK_ROLE, member=runtime_sa.member,
            ),
            opts=child,
        )
        invoker = gcp.cloudrunv2.ServiceIamMember(
            f"{name}-scheduler-invoker",
            gcp.cloudrunv2.ServiceIamMemberArgs(
                project=s.project, location=s.region, name=service_name,
                role="roles/run.invoker", member=scheduler_member,
            ),
            opts=child,
        )
        return url, invoker

    def _prebuilt_service(self, name: str, s: DedupSettings, environment: dict[str, pulumi.Input[str]],
                          runtime_sa: gcp.serviceaccount.Account, scheduler_email: pulumi.Input[str],
                          store_wiring: Optional[StoreWiring], labels: Optional[dict[str, str]],
                          depends: list[pulumi.Resource]) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """The Cloud Run service of the prebuilt ``image``; returns ``(URL, service name)``."""
        assert s.image is not None
        image = s.image
        envs = [
            gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(name=key, value=value)
            for key, value in environment.items()
        ]
        envs.append(gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(name="DEDUP_ALLOWED_CALLERS", value=scheduler_email))
        envs += job_envs(s.job_config)
        volumes, mounts = secret_volumes(s.job_config)
        if store_wiring:
            volumes, mounts = [*store_wiring.volumes, *volumes], [*store_wiring.mounts, *mounts]
        service = gcp.cloudrunv2.Service(
            f"{name}-service",
            gcp.cloudrunv2.ServiceArgs(
                name=s.service_name, project=s.project, location=s.region,
                deletion_protection=s.deletion_protection,
                # Scheduler calls over the internet; Cloud Run IAM (run.invoker) is the gate, not ingress.
                ingress="INGRESS_TRAFFIC_ALL",
                invoker_iam_disabled=False,
                custom_audiences=[s.oidc_audience],
                labels=labels,
                template=gcp.cloudrunv2.ServiceTemplateArgs(
                    labels=labels,
                    service_account=runtime_sa.email,
                    timeout=f"{s.request_timeout_seconds}s",
                    # As many requests per instance as the handler's server has threads (THREADS): none waits
                    # unseen inside the container (https://cloud.google.com/run/docs/about-concurrency).
                    max_instance_request_concurrency=SERVER_THREADS,
                    scaling=gcp.cloudrunv2.ServiceTemplateScalingArgs(
                        min_instance_count=s.min_instance_count, max_instance_count=s.max_instance_count),
                    containers=[gcp.cloudrunv2.ServiceTemplateContainerArgs(
                        image=image, envs=envs,
                        resources=gcp.cloudrunv2.ServiceTemplateContainerResourcesArgs(
                            cpu_idle=not s.cpu_always_allocated, startup_cpu_boost=STARTUP_CPU_BOOST,
                            limits=s.job_config.limits.limits()),
                        volume_mounts=mounts or None,
                    )],
                    volumes=volumes or None,
                    vpc_access=vpc_access(s.job_config, store_wiring.vpc_access if store_wiring else None),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        return service.uri, service.name

    @staticmethod
    def _identity(
        shared_email: Optional[pulumi.Input[str]], create: "Callable[[], gcp.serviceaccount.Account]"
    ) -> tuple[pulumi.Input[str], pulumi.Input[str], pulumi.Input[str] | None]:
        """``(email, IAM member, unique id)`` of a shared account given by email (unique id None: unknown here), or
        of a dedicated one ``create`` makes."""
        if shared_email is not None:
            return shared_email, pulumi.Output.concat("serviceAccount:", shared_email), None
        account = create()
        return account.email, account.member, account.unique_id

    def _grant_target(self, name: str, s: DedupSettings, runtime_sa: gcp.serviceaccount.Account) -> None:
        """Grant the runtime identity the one role its proxy target needs, on that target only."""
        child = pulumi.ResourceOptions(parent=self)
        if s.target_type == "workflows" and s.workflow is not None:
            workflow = pulumi.Output.from_input(s.workflow)
            gcp.projects.IAMMember(
                f"{name}-runtime-workflow-invoker",
                gcp.projects.IAMMemberArgs(
                    project=s.project, role=TARGET_ROLES["workflows"], member=runtime_sa.member,
                    # No per-workflow IAM exists; the condition limits the grant to this workflow and its executions.
                    condition=gcp.projects.IAMMemberConditionArgs(
                        title="only the target workflow",
                        description="scheduler-dedup: start and read executions of one workflow",
                        expression=workflow.apply(
                            lambda w: f'resource.name == "{w}" || resource.name.startsWith("{w}/executions/")'
                        ),
                    ),
                ),
                opts=child,
            )
        elif s.target_type == "cloud_run_job" and s.cloud_run_job is not None:
            for part, role in (("executor", TARGET_ROLES["cloud_run_job"]), ("viewer", JOB_VIEWER_ROLE)):
                gcp.cloudrunv2.JobIamMember(
                    f"{name}-runtime-job-{part}",
                    gcp.cloudrunv2.JobIamMemberArgs(name=s.cloud_run_job, role=role, member=runtime_sa.member),
                    opts=child,
                )
        elif s.target_type == "cloud_build_trigger" and s.cloud_build_trigger is not None:
            trigger_project = pulumi.Output.from_input(s.cloud_build_trigger).apply(lambda t: t.split("/")[1])
            gcp.projects.IAMMember(
                f"{name}-runtime-build-trigger-runner",
                gcp.projects.IAMMemberArgs(project=trigger_project, role=TARGET_ROLES["cloud_build_trigger"],
                                           member=runtime_sa.member),
                opts=child,
            )
            if s.cloud_build_service_account_email is not None:
                # https://cloud.google.com/build/docs/cloud-build-service-account#user_access_to_triggers: running a
                # trigger whose builds run as a user-specified service account needs actAs on that account.
                email = pulumi.Output.from_input(s.cloud_build_service_account_email)
                gcp.serviceaccount.IAMMember(
                    f"{name}-runtime-build-act-as",
                    gcp.serviceaccount.IAMMemberArgs(
                        service_account_id=email.apply(_service_account_name), role="roles/iam.serviceAccountUser",
                        member=runtime_sa.member),
                    opts=child,
                )
        elif s.target_type == "http" and s.http_cloud_run_service is not None:
            gcp.cloudrunv2.ServiceIamMember(
                f"{name}-runtime-target-invoker",
                gcp.cloudrunv2.ServiceIamMemberArgs(
                    name=s.http_cloud_run_service, role=TARGET_ROLES["http"], member=runtime_sa.member,
                ),
                opts=child,
            )


def _kept_region(region: str, kept: Optional[Mapping[str, str]]) -> str:
    """The region the key-location ``time.Static`` keeps (its first deploy's), else ``region``."""
    return (kept or {}).get("region") or region


def _service_account_name(email: str) -> str:
    """``projects/P/serviceAccounts/EMAIL`` (Cloud Run's BuildConfig.serviceAccount format); P from the email's domain."""
    domain = email.split("@", 1)[1]
    project = domain.split(".", 1)[0] if domain.endswith(".iam.gserviceaccount.com") else "-"
    return f"projects/{project}/serviceAccounts/{email}"


def scheduler_headers(s: DedupSettings) -> dict[str, str]:
    """Headers the Scheduler job sends; the handler keys runs on project and Scheduler location."""
    return {"X-Dedup-Project": s.project, "X-Dedup-Location": s.region}
