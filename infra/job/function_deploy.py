"""The source deploy: the deploy archive uploaded to a private bucket and built into the handler's image by Cloud Run
functions (``gcp.cloudfunctionsv2.Function``), which serves the image as a Cloud Run service of the same name.

Deploying a function "automatically coordinates underlying Google Cloud services, including Cloud Storage, Cloud
Build, and Artifact Registry, to package and run your code" (https://cloud.google.com/run/docs/functions/overview):
Cloud Build builds the archive with the Python buildpack and pushes the image to the repository given as
``docker_repository``, and the function's revision runs that image. Why not Cloud Run's ``build_config`` (it starts no
build) or the other paths: docs/deploying.md, "What builds my code". What the Functions API cannot set
(:data:`FUNCTION_REFUSED`) is refused at preview by :func:`function_path_problems`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.handler.service.server import FUNCTION_TARGET, SERVER_THREADS
from scheduler_dedup.infra.errors import DedupConfigError
from scheduler_dedup.infra.job.container_limits import DEFAULT_CPU, DEFAULT_MEMORY
from scheduler_dedup.infra.job.archive import APP_ENGINE_RUNTIME, DeployArchive
from scheduler_dedup.infra.job.function_sources import FUNCTION_SOURCES_CONDITION, FUNCTION_SOURCES_ROLE
from scheduler_dedup.infra.job.job_config import JobConfig
from scheduler_dedup.infra.job.resolved import DedupSettings
from scheduler_dedup.infra.stores.base import StoreWiring

#: The Functions API's runtime id of the build (https://cloud.google.com/functions/docs/runtime-support): the same
#: Python as the App Engine path and the handler's tests.
FUNCTION_RUNTIME = APP_ENGINE_RUNTIME
#: Ingress of the function's service: Scheduler calls over the internet, Cloud Run IAM (run.invoker) is the gate.
FUNCTION_INGRESS = "ALLOW_ALL"
#: Inputs of the Cloud Run service path the Functions API has no field for, and why each is refused with
#: ``job_source`` (or a proxy target), naming the fix.
FUNCTION_REFUSED = {
    "cpu_always_allocated": (
        "true needs CPU always allocated (instance-based billing), which a function built from source cannot have: "
        "the Cloud Functions API's ServiceConfig has no CPU-allocation field "
        "(https://cloud.google.com/functions/docs/reference/rest/v2/projects.locations.functions#serviceconfig). "
        "Remove it (the source deploy bills per request: the advisory dedup-cpu-always-allocated says when a job "
        "may run twice), or build the handler's image yourself and give image instead of job_source"),
    "oidc_audience": (
        "a function built from source takes no Cloud Run custom audience; its OIDC audience is its function URL "
        "https://REGION-PROJECT.cloudfunctions.net/NAME (https://cloud.google.com/functions/docs/securing/"
        "authenticating). Remove oidc_audience, or give image instead of job_source"),
    "base_image": (
        "the Functions API picks the base image from the runtime (python312, "
        "https://cloud.google.com/functions/docs/runtime-support): remove base_image, or give image instead"),
}


def function_url(project: str, region: str, name: str) -> str:
    """The function's URL ``https://REGION-PROJECT.cloudfunctions.net/NAME``: the audience Google documents for a
    function's ID token ("For Cloud Functions, endpoint and audience are the same",
    https://cloud.google.com/functions/docs/samples/functions-bearer-token), known from the inputs alone. The
    component's default OIDC audience on the source deploy (Scheduler's ``oidc_token.audience`` and the handler's
    ``DEDUP_OIDC_AUDIENCE``) and the URL the Scheduler job calls."""
    return f"https://{region}-{project}.cloudfunctions.net/{name}"


#: "For a single function, the total bytes used by runtime environment variable names and values is limited to 32 KiB"
#: (https://cloud.google.com/run/docs/configuring/services/overview-environment-variables, variable size limits).
FUNCTION_ENV_BYTES_MAX = 32 * 1024


def function_env_problem(env: Mapping[str, Any]) -> str | None:
    """Why ``env`` (name -> value; values not known yet count as empty) is too large for a function, or None."""
    size = sum(len(name.encode()) + (len(value.encode()) if isinstance(value, str) else 0) for name, value in env.items())
    if size <= FUNCTION_ENV_BYTES_MAX:
        return None
    return (f"the function's environment variables take {size} bytes (names and values, the handler's included); a "
            f"function takes at most {FUNCTION_ENV_BYTES_MAX} (32 KiB, https://cloud.google.com/run/docs/configuring/"
            "services/overview-environment-variables): move large values into a mounted file (secret_files)")


def function_path_problems(args: Mapping[str, Any]) -> list[DedupConfigError]:
    """Each input in ``args`` the source deploy cannot honour (:data:`FUNCTION_REFUSED`), as an error naming the fix.

    ``cpu_always_allocated: false`` is what the function does anyway, so only true is refused."""
    return [DedupConfigError(key, why) for key, why in FUNCTION_REFUSED.items()
            if args.get(key) is not None and not (key == "cpu_always_allocated" and args[key] is False)]


@dataclass(frozen=True)
class BuiltFunction:
    """The function, its URL, and the name of the Cloud Run service it runs as (the function's own name)."""

    function: gcp.cloudfunctionsv2.Function
    url: pulumi.Output[str]
    service_name: pulumi.Output[str]


def _secret_env(config: JobConfig) -> list[gcp.cloudfunctionsv2.FunctionServiceConfigSecretEnvironmentVariableArgs]:
    return [gcp.cloudfunctionsv2.FunctionServiceConfigSecretEnvironmentVariableArgs(
        key=name, project_id=ref.project, secret=ref.secret_id, version=ref.version)
        for name, ref in config.secret_env.items()]


def _secret_volumes(config: JobConfig, wiring: Optional[StoreWiring],
                    project: str) -> list[gcp.cloudfunctionsv2.FunctionServiceConfigSecretVolumeArgs]:
    """``secret_files`` and the store's secret volumes (Memorystore's AUTH and CA) as the function's secret volumes."""
    volumes = []
    if wiring is not None:
        mounts = {pulumi.get(m, "name"): pulumi.get(m, "mount_path") for m in wiring.mounts}
        for volume in wiring.volumes:
            secret = pulumi.get(volume, "secret")
            volumes.append(gcp.cloudfunctionsv2.FunctionServiceConfigSecretVolumeArgs(
                mount_path=mounts[pulumi.get(volume, "name")], project_id=project,
                secret=pulumi.get(secret, "secret"),
                versions=[gcp.cloudfunctionsv2.FunctionServiceConfigSecretVolumeVersionArgs(
                    path=pulumi.get(item, "path"), version=pulumi.get(item, "version"))
                    for item in pulumi.get(secret, "items") or []]))
    volumes += [gcp.cloudfunctionsv2.FunctionServiceConfigSecretVolumeArgs(
        mount_path=f.folder, project_id=f.ref.project, secret=f.ref.secret_id,
        versions=[gcp.cloudfunctionsv2.FunctionServiceConfigSecretVolumeVersionArgs(path=f.file_name,
                                                                                   version=f.ref.version)])
        for f in config.secret_files]
    return volumes


def _vpc(config: JobConfig, wiring: Optional[StoreWiring]) -> dict[str, Any]:
    """The function's VPC egress: the store's network (Memorystore) or the job's ``vpc``, Direct VPC egress or a
    connector (https://cloud.google.com/functions/docs/running/direct-vpc,
    https://cloud.google.com/functions/docs/networking/connecting-vpc)."""
    vpc = config.vpc
    egress = vpc.egress if vpc is not None else "PRIVATE_RANGES_ONLY"
    if wiring is not None:
        interfaces = pulumi.get(wiring.vpc_access, "network_interfaces") or []
        return {"direct_vpc_egress": f"VPC_EGRESS_{egress}", "direct_vpc_network_interfaces": [
            gcp.cloudfunctionsv2.FunctionServiceConfigDirectVpcNetworkInterfaceArgs(
                network=pulumi.get(i, "network"), subnetwork=pulumi.get(i, "subnetwork")) for i in interfaces]}
    if vpc is None:
        return {}
    if vpc.connector is not None:
        return {"vpc_connector": vpc.connector, "vpc_connector_egress_settings": egress}
    return {"direct_vpc_egress": f"VPC_EGRESS_{egress}", "direct_vpc_network_interfaces": [
        gcp.cloudfunctionsv2.FunctionServiceConfigDirectVpcNetworkInterfaceArgs(
            network=vpc.network, subnetwork=vpc.subnetwork)]}


def upload_archive(parent: pulumi.Resource, name: str, s: DedupSettings, archive: DeployArchive,
                   opts: pulumi.ResourceOptions, labels: dict[str, str]) -> tuple[gcp.storage.Bucket, gcp.storage.BucketObject]:
    """The private source bucket and the deploy archive in it, named after its SHA-256 (the function's and App
    Engine's source)."""
    bucket = gcp.storage.Bucket(
        f"{name}-source",
        gcp.storage.BucketArgs(
            name=s.names.bucket, project=s.project, location=s.region.upper(), uniform_bucket_level_access=True,
            public_access_prevention="enforced", force_destroy=True, labels=labels,
        ),
        opts=opts,
    )
    source_object = gcp.storage.BucketObject(
        f"{name}-archive",
        gcp.storage.BucketObjectArgs(
            bucket=bucket.name, name=f"{s.resource_prefix}-{archive.sha256[:16]}.zip",
            source=pulumi.FileAsset(str(archive.write())), content_type="application/zip",
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return bucket, source_object


def deploy_function(parent: pulumi.Resource, name: str, s: DedupSettings, archive: DeployArchive, *,
                    environment: Mapping[str, pulumi.Input[str]], runtime_email: pulumi.Input[str],
                    build_email: pulumi.Input[str], build_member: pulumi.Input[str],
                    after_apis: pulumi.ResourceOptions, labels: dict[str, str],
                    store_wiring: Optional[StoreWiring], depends_on: list[pulumi.Resource],
                    service_account_name: Callable[[str], str]) -> BuiltFunction:
    """The source bucket, the archive in it (named after its SHA-256), the image repository, the build identity's
    grants on them, and the function that builds the archive and serves it.

    A new archive is a new object name, so a new ``storage_source.object``: the function rebuilds and rolls a new
    revision; nothing else changes the build. A failed build fails the function's create or update operation, and so
    ``pulumi up``, at this resource, with the operation's "Build failed: ..." error; the operation's BUILD stage names
    the Cloud Build build and its console URL, where its log is (https://cloud.google.com/functions/docs/troubleshooting;
    public reports: hashicorp/terraform-provider-google#14456, firebase/firebase-tools#3125 and #7369).
    """
    child = pulumi.ResourceOptions(parent=parent)
    bucket, source_object = upload_archive(parent, name, s, archive, after_apis, labels)
    repository = gcp.artifactregistry.Repository(
        f"{name}-images",
        gcp.artifactregistry.RepositoryArgs(
            project=s.project, location=s.region, repository_id=s.names.repository,
            format="DOCKER", description=f"scheduler-dedup {name}: built handler images", labels=labels,
        ),
        opts=after_apis,
    )
    grants: list[pulumi.Resource] = [
        gcp.storage.BucketIAMMember(
            f"{name}-build-source-reader",
            gcp.storage.BucketIAMMemberArgs(bucket=bucket.name, role="roles/storage.objectViewer", member=build_member),
            opts=child,
        ),
        gcp.artifactregistry.RepositoryIamMember(
            f"{name}-build-image-writer",
            gcp.artifactregistry.RepositoryIamMemberArgs(
                project=s.project, location=s.region, repository=repository.repository_id,
                role="roles/artifactregistry.writer", member=build_member,
            ),
            opts=child,
        ),
    ]
    if s.build_service_account_email is None:  # a shared account's project roles are its owner's
        grants.append(gcp.projects.IAMMember(
            f"{name}-build-log-writer",
            gcp.projects.IAMMemberArgs(project=s.project, role="roles/logging.logWriter", member=build_member),
            opts=child,
        ))
        # Without it the build fails with "Access to bucket gcf-v2-sources-... denied. You must grant Storage Object
        # Viewer permission to" the build's account (GoogleCloudPlatform/marketing-analytics-jumpstart#153,
        # GoogleCloudPlatform/terraform-google-cloud-functions#129).
        grants.append(gcp.projects.IAMMember(
            f"{name}-build-function-source-reader",
            gcp.projects.IAMMemberArgs(
                project=s.project, role=FUNCTION_SOURCES_ROLE, member=build_member,
                condition=gcp.projects.IAMMemberConditionArgs(
                    title="Cloud Run functions source copies only", expression=FUNCTION_SOURCES_CONDITION,
                    description="the gcf-v2-sources-PROJECT_NUMBER-REGION buckets the function's build fetches from"),
            ),
            opts=child,
        ))
    config = s.job_config
    function = gcp.cloudfunctionsv2.Function(
        f"{name}-function",
        gcp.cloudfunctionsv2.FunctionArgs(
            name=s.service_name, project=s.project, location=s.region, labels=labels,
            description=f"scheduler-dedup {name}: the dedup handler, built from the deploy archive",
            build_config=gcp.cloudfunctionsv2.FunctionBuildConfigArgs(
                runtime=FUNCTION_RUNTIME, entry_point=FUNCTION_TARGET,
                source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceArgs(
                    storage_source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceStorageSourceArgs(
                        bucket=bucket.name, object=source_object.output_name)),
                docker_repository=pulumi.Output.concat("projects/", s.project, "/locations/", s.region,
                                                       "/repositories/", repository.repository_id),
                service_account=pulumi.Output.from_input(build_email).apply(service_account_name),
                automatic_update_policy=gcp.cloudfunctionsv2.FunctionBuildConfigAutomaticUpdatePolicyArgs(),
            ),
            service_config=gcp.cloudfunctionsv2.FunctionServiceConfigArgs(
                service_account_email=runtime_email,
                environment_variables={**environment, **config.env},
                secret_environment_variables=_secret_env(config) or None,
                secret_volumes=_secret_volumes(config, store_wiring, s.project) or None,
                timeout_seconds=s.request_timeout_seconds,
                # As many requests per instance as the handler's server has threads (component.py's service path).
                max_instance_request_concurrency=SERVER_THREADS,
                min_instance_count=s.min_instance_count, max_instance_count=s.max_instance_count,
                available_cpu=config.limits.cpu or DEFAULT_CPU, available_memory=config.limits.memory or DEFAULT_MEMORY,
                ingress_settings=FUNCTION_INGRESS, all_traffic_on_latest_revision=True,
                **_vpc(config, store_wiring),
            ),
        ),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*depends_on, *grants]),
    )
    return BuiltFunction(function=function, url=function.url, service_name=function.name)
