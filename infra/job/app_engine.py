"""App Engine as the Scheduler target: the ``app_engine`` input's rules, and the version and Scheduler target it makes.

:func:`resolve_app_engine` is pure (the component's settings call it before any child exists);
:func:`app_engine_version` and :func:`app_engine_http_target` create the children.

What the component deploys, and why:

* an App Engine **standard** version of ``service`` from the same deploy archive Cloud Run builds from
  (:mod:`scheduler_dedup.infra.job.archive`): runtime :data:`~scheduler_dedup.infra.job.archive.APP_ENGINE_RUNTIME`,
  the archive's ``app.yaml`` entrypoint (gunicorn serving ``main:app``), automatic scaling up to
  ``max_instance_count`` instances (at least ``min_instance_count``), the job's runtime identity as the version's service account, and the
  handler's environment with ``DEDUP_APP_ENGINE_CALLER=true``
  (https://cloud.google.com/appengine/docs/admin-api/reference/rest/v1/apps.services.versions);
* a Scheduler job with ``appEngineHttpTarget``: POST to ``relative_uri`` of ``service`` (and ``version``), the
  ``X-Dedup-Project`` / ``X-Dedup-Location`` headers the handler keys runs on, the job's retry config
  (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#AppEngineHttpTarget).
  It carries no OIDC token, so the Scheduler needs no identity of its own and the version no invoker grant.

Not created: the App Engine application itself (one per project, its region fixed for good; ``gcloud app
create``). The service URL the component exports reads the application's ``defaultHostname``, so a project
without one fails at ``pulumi preview``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from scheduler_dedup.handler.core.paths import APP_ENGINE_RESERVED_PREFIX, CHECK_PATH

from scheduler_dedup.infra.args import AppEngineArgs, input_keys
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.handler.schedule.retry_windows import APP_ENGINE_AUTOMATIC_SCALING_DEADLINE_SECONDS
from scheduler_dedup.infra.stores.store import STORE_KINDS, piece

#: App Engine service and version ids: lower-case letters, digits and hyphens, at most 63, starting with a letter
#: (https://cloud.google.com/appengine/docs/admin-api/reference/rest/v1/apps.services.versions#Version.FIELDS.id:
#: "May only contain lowercase letters, digits, and hyphens. Must begin with a letter" for services; versions
#: "Must not begin with 'ah-' and 'default' and 'latest' are reserved").
_ID_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_RESERVED_VERSIONS = ("default", "latest")
#: AppEngineHttpTarget.relativeUri: "must begin with '/' ... No spaces are allowed, and the maximum length allowed
#: is 2083 characters" (Scheduler REST reference).
RELATIVE_URI_MAX = 2083
#: The longest request deadline of an App Engine standard service, seconds (basic and manual scaling).
APP_ENGINE_MAX_DEADLINE_SECONDS = 86400
_KEYS = frozenset(input_keys(AppEngineArgs))
#: App Engine location ids that are not the region's name: "Two locations, which are called europe-west and
#: us-central in App Engine commands and in the Google Cloud console, are called europe-west1 and us-central1,
#: respectively, elsewhere in Google documentation" (https://cloud.google.com/appengine/docs/standard/locations).
APP_ENGINE_LOCATION_REGIONS = {"us-central": "us-central1", "europe-west": "europe-west1"}
#: Component inputs that only a Cloud Run deployment uses, refused beside ``app_engine``, and why.
CLOUD_RUN_ONLY_INPUTS: dict[str, str] = {
    "image": "App Engine standard deploys the archive, not an image: use job_source and job",
    "base_image": "the Cloud Run functions base image; App Engine's runtime is python312",
    "request_timeout_seconds": "Cloud Run's request timeout: set app_engine.request_timeout_seconds (deploy false) "
                               "or leave it to the deployed version's 600 s",
    "cpu_always_allocated": "false is Cloud Run's request-based billing: App Engine keeps CPU for a request until it "
                            "ends, as true asks",
    "oidc_audience": "an App Engine target sends no OIDC token (the handler checks App Engine's cron headers)",
    "scheduler_service_account_email": "an App Engine target sends no OIDC token, so Scheduler needs no identity",
    "build_service_account_email": "the Cloud Run source build's identity; App Engine builds its versions itself",
    "secret_env": "App Engine standard has no Secret Manager references: read the secret in your job with the "
                  "Secret Manager client, and grant its role with job_roles",
    "secret_files": "App Engine standard mounts no secret volumes",
    "cpu": "App Engine standard sizes instances by instance class",
    "memory": "App Engine standard sizes instances by instance class",
    "vpc": "App Engine standard reaches a VPC through a connector of its own configuration",
    "alerts": "alerting reads Cloud Run's request logs and its watchdog calls with OIDC; it is not available on "
              "App Engine yet",
}


def app_engine_region_problem(location_id: str, region: str) -> str | None:
    """Why a Scheduler job in ``region`` cannot deliver to an App Engine application in ``location_id`` (as
    ``gcloud app describe`` shows it), or None when it can: Scheduler creates App Engine jobs only in the
    application's region (https://cloud.google.com/scheduler/docs/locations), and ``us-central``/``europe-west``
    are the regions ``us-central1``/``europe-west1`` (:data:`APP_ENGINE_LOCATION_REGIONS`)."""
    app_region = APP_ENGINE_LOCATION_REGIONS.get(location_id, location_id)
    if app_region == region:
        return None
    return (f"the App Engine application is in {location_id!r} (region {app_region}), the job in {region!r}: "
            f"Scheduler creates App Engine jobs only in the application's region; set region to {app_region} "
            "(an application's region cannot change)")


@dataclass(frozen=True)
class AppEngineSettings:
    """The resolved ``app_engine`` input.

    Attributes:
        service: the App Engine service id.
        version: the version the job routes to; None: deployed ``dedup-<archive hash>``, or (not deploying) the
            versions serving traffic.
        relative_uri: the path and query the deliveries are POSTed to.
        deploy: the component deploys the handler as a version of ``service``.
        request_timeout_seconds: the service's request deadline, seconds (600: automatic scaling).
        location: the application's location id as given (``us-central``), checked against the region; None: checked
            once the application is read (at preview, :func:`app_engine_url`).
    """

    service: str
    version: str | None
    relative_uri: str
    deploy: bool
    request_timeout_seconds: int
    location: str | None = None


def _check_id(value: Any, field: str, what: str) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value) or value.endswith("-"):
        raise DedupConfigError(field, f"{value!r} is not an App Engine {what} id: use 1-63 lower-case letters, digits "
                                      "and hyphens, starting with a letter, e.g. 'dedup'")
    return value


def check_relative_uri(uri: Any, field: str) -> str:
    """``uri`` if it is a relative URI a Scheduler App Engine target can deliver to the handler.

    Raises:
        DedupConfigError: not starting with ``/``, a space, longer than :data:`RELATIVE_URI_MAX`, under App Engine's
            ``/_ah/`` (where the handler answers 404), or the run check's path (where deliveries are not claimed).
    """
    if not isinstance(uri, str) or not uri.startswith("/") or any(c.isspace() for c in uri) or len(uri) > RELATIVE_URI_MAX:
        raise DedupConfigError(field, f"{uri!r} is not a relative URI: start it with '/', without spaces, at most "
                                      f"{RELATIVE_URI_MAX} characters (AppEngineHttpTarget.relativeUri), e.g. '/run'")
    path = uri.split("?", 1)[0].split("#", 1)[0]
    if path.startswith(APP_ENGINE_RESERVED_PREFIX):
        raise DedupConfigError(field, f"{uri!r} is under App Engine's reserved {APP_ENGINE_RESERVED_PREFIX} (the handler "
                                      "answers 404 there): use another path, e.g. '/run'")
    if path.rstrip("/") == CHECK_PATH:
        raise DedupConfigError(field, f"{uri!r} is the watchdog's run check path, where deliveries are never claimed or "
                                      "run: use another path, e.g. '/run'")
    return uri


def resolve_app_engine(value: Any, args: Mapping[str, Any]) -> AppEngineSettings:
    """Check the ``app_engine`` input (and that no Cloud Run-only input is beside it) and apply its defaults.

    Raises:
        DedupConfigError: the first invalid field, named ``app_engine.<field>`` or the Cloud Run input to remove.
    """
    if not isinstance(value, Mapping):
        raise DedupConfigError("app_engine", f"must be a mapping with at least 'service', got {value!r}")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise DedupConfigError(f"app_engine.{unknown[0]}", f"unknown key; valid keys are {', '.join(sorted(_KEYS))}")
    for key, why in CLOUD_RUN_ONLY_INPUTS.items():
        # cpu_always_allocated true is what App Engine does (its default there)
        if args.get(key) is not None and not (key == "cpu_always_allocated" and args[key] is True):
            raise DedupConfigError(key, f"cannot be used with app_engine ({why}): remove it, or remove app_engine")
    store = args.get("store")
    kind = store.get("kind") if isinstance(store, Mapping) else None
    refusal = piece(kind).APP_ENGINE_REFUSAL if isinstance(kind, str) and kind in STORE_KINDS else None
    if refusal is not None:
        raise DedupConfigError("app_engine", refusal)
    if value.get("service") is None:
        raise DedupConfigError("app_engine.service", "is required: the App Engine service to deliver to, e.g. 'default'")
    service = _check_id(value["service"], "app_engine.service", "service")
    version = value.get("version")
    if version is not None:
        _check_id(version, "app_engine.version", "version")
        if version in _RESERVED_VERSIONS or version.startswith("ah-"):
            raise DedupConfigError("app_engine.version", f"{version!r} is reserved by App Engine ('default', 'latest' "
                                                         "and ids starting with 'ah-'): choose another id")
    relative_uri = check_relative_uri(value.get("relative_uri", "/"), "app_engine.relative_uri")
    deploy = value.get("deploy", True)
    if not isinstance(deploy, bool):
        raise DedupConfigError("app_engine.deploy", f"must be true or false, got {deploy!r}")
    timeout = value.get("request_timeout_seconds")
    if deploy and timeout is not None and timeout != APP_ENGINE_AUTOMATIC_SCALING_DEADLINE_SECONDS:
        raise DedupConfigError("app_engine.request_timeout_seconds",
                               f"the deployed version scales automatically, so its request deadline is "
                               f"{APP_ENGINE_AUTOMATIC_SCALING_DEADLINE_SECONDS} s: remove it, or set deploy false "
                               "for a service of your own with basic or manual scaling")
    if timeout is None:
        timeout = APP_ENGINE_AUTOMATIC_SCALING_DEADLINE_SECONDS
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= APP_ENGINE_MAX_DEADLINE_SECONDS:
        raise DedupConfigError("app_engine.request_timeout_seconds",
                               f"{timeout!r} is not a request deadline App Engine has: use whole seconds, 1 to "
                               f"{APP_ENGINE_MAX_DEADLINE_SECONDS} (600 with automatic scaling)")
    location = value.get("location")
    if location is not None:
        if not isinstance(location, str) or not re.fullmatch(r"[a-z]+-[a-z]+[0-9]*", location):
            raise DedupConfigError("app_engine.location", f"{location!r} is not an App Engine location id: use what "
                                                          "gcloud app describe shows as locationId, e.g. us-central")
        region = args.get("region")
        problem = app_engine_region_problem(location, region) if isinstance(region, str) else None
        if problem:
            raise DedupConfigError("region", problem)
    return AppEngineSettings(service, version, relative_uri, deploy, timeout, location)


def default_version_id(archive_sha256: str) -> str:
    """The deployed version's id when none is given: ``dedup-`` and 16 hex digits of the archive's SHA-256."""
    return f"dedup-{archive_sha256[:16]}"


def app_engine_version(name: str, *, project: str, app_engine: AppEngineSettings, version_id: str,
                       source_url: pulumi.Input[str], environment: Mapping[str, pulumi.Input[str]],
                       service_account: pulumi.Input[str], max_instances: int, min_instances: int,
                       opts: pulumi.ResourceOptions) -> Any:
    """The ``gcp.appengine.StandardAppVersion`` serving the handler (see the module docstring).

    Args:
        name: the component's name; the child is ``<name>-app-engine-version``.
        source_url: ``https://storage.googleapis.com/BUCKET/OBJECT`` of the deploy archive.
        environment: the handler's environment (:func:`~scheduler_dedup.infra.job.settings.handler_environment`).
        service_account: the runtime identity's email.
    """
    import pulumi_gcp as gcp

    from scheduler_dedup.infra.job.archive import APP_ENGINE_ENTRYPOINT, APP_ENGINE_RUNTIME

    return gcp.appengine.StandardAppVersion(
        f"{name}-app-engine-version",
        gcp.appengine.StandardAppVersionArgs(
            project=project, service=app_engine.service, version_id=version_id, runtime=APP_ENGINE_RUNTIME,
            entrypoint=gcp.appengine.StandardAppVersionEntrypointArgs(shell=APP_ENGINE_ENTRYPOINT),
            deployment=gcp.appengine.StandardAppVersionDeploymentArgs(
                zip=gcp.appengine.StandardAppVersionDeploymentZipArgs(source_url=source_url)),
            env_variables=dict(environment),
            automatic_scaling=gcp.appengine.StandardAppVersionAutomaticScalingArgs(
                standard_scheduler_settings=gcp.appengine.StandardAppVersionAutomaticScalingStandardSchedulerSettingsArgs(
                    max_instances=max_instances, min_instances=min_instances)),
            service_account=service_account,
            # A new archive is a new version: the old one is deleted once the job routes to the new one. The
            # service may hold other versions (or be 'default', which App Engine never deletes): keep it.
            delete_service_on_destroy=False, noop_on_destroy=False,
        ),
        opts=opts,
    )


def app_engine_http_target(app_engine: AppEngineSettings, version: pulumi.Input[str] | None,
                           headers: Mapping[str, str]) -> Any:
    """The Scheduler job's ``appEngineHttpTarget``: POST to ``relative_uri`` of ``service`` (``version`` if any)."""
    import pulumi_gcp as gcp

    return gcp.cloudscheduler.JobAppEngineHttpTargetArgs(
        relative_uri=app_engine.relative_uri, http_method="POST", headers=dict(headers),
        app_engine_routing=gcp.cloudscheduler.JobAppEngineHttpTargetAppEngineRoutingArgs(
            service=app_engine.service, version=version),
    )


def app_engine_url(name: str, project: str, service: str, version: pulumi.Input[str] | None,
                   opts: pulumi.ResourceOptions, region: str | None = None) -> pulumi.Output[str]:
    """``https://[VERSION-dot-]SERVICE-dot-`` + the application's ``defaultHostname`` (``PROJECT.REGION_ID.r.appspot.com``,
    https://cloud.google.com/appengine/docs/standard/how-requests-are-routed#targeted_routing), read from the project's
    existing App Engine application (``<name>-app-engine-application``; a project without one fails at preview)."""
    import pulumi_gcp as gcp

    application = gcp.appengine.Application.get(f"{name}-app-engine-application", project, opts=opts)
    prefix = pulumi.Output.concat(version, "-dot-") if version is not None else ""

    def same_region(values: list[Any]) -> str:
        """Raises (inside the output, so preview fails): DedupConfigError: the application is in another region."""
        hostname, location_id = values
        problem = app_engine_region_problem(location_id, region) if location_id and region else None
        if problem:
            raise DedupConfigError("region", problem)
        return str(hostname)

    hostname = pulumi.Output.all(application.default_hostname, application.location_id).apply(same_region)
    return pulumi.Output.concat("https://", prefix, service, "-dot-", hostname)
