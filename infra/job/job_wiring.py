"""The job's own configuration (:class:`~scheduler_dedup.infra.job.job_config.JobConfig`) as Cloud Run service
arguments and grants: environment entries, secret volumes and mounts, VPC access, and the runtime identity's
``roles/secretmanager.secretAccessor`` on exactly the secrets the job reads."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.infra.job.job_config import JobConfig

SECRET_ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"


def job_envs(config: JobConfig) -> list[gcp.cloudrunv2.ServiceTemplateContainerEnvArgs]:
    """``env`` as plain entries and ``secret_env`` as ``valueSource.secretKeyRef`` entries."""
    envs = [gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(name=name, value=value) for name, value in config.env.items()]
    envs += [gcp.cloudrunv2.ServiceTemplateContainerEnvArgs(
        name=name, value_source=gcp.cloudrunv2.ServiceTemplateContainerEnvValueSourceArgs(
            secret_key_ref=gcp.cloudrunv2.ServiceTemplateContainerEnvValueSourceSecretKeyRefArgs(
                secret=ref.secret_id, version=ref.version)))
        for name, ref in config.secret_env.items()]
    return envs


def secret_volumes(config: JobConfig) -> tuple[list[Any], list[Any]]:
    """``(volumes, mounts)`` of ``secret_files``: one secret volume per folder, named ``secret-<n>``."""
    volumes, mounts = [], []
    for index, secret_file in enumerate(config.secret_files):
        volumes.append(gcp.cloudrunv2.ServiceTemplateVolumeArgs(
            name=f"secret-{index}", secret=gcp.cloudrunv2.ServiceTemplateVolumeSecretArgs(
                secret=secret_file.ref.secret_id, items=[gcp.cloudrunv2.ServiceTemplateVolumeSecretItemArgs(
                    path=secret_file.file_name, version=secret_file.ref.version)])))
        mounts.append(gcp.cloudrunv2.ServiceTemplateContainerVolumeMountArgs(name=f"secret-{index}",
                                                                            mount_path=secret_file.folder))
    return volumes, mounts


def vpc_access(config: JobConfig, store_vpc: Any) -> Any:
    """The service's ``vpc_access``: the store's (Memorystore) with the job's egress setting, or the job's own."""
    vpc = config.vpc
    if store_vpc is not None:
        if vpc is None:
            return store_vpc
        return gcp.cloudrunv2.ServiceTemplateVpcAccessArgs(egress=vpc.egress,
                                                           network_interfaces=store_vpc.network_interfaces)
    if vpc is None:
        return None
    if vpc.connector is not None:
        return gcp.cloudrunv2.ServiceTemplateVpcAccessArgs(connector=vpc.connector, egress=vpc.egress)
    return gcp.cloudrunv2.ServiceTemplateVpcAccessArgs(
        egress=vpc.egress, network_interfaces=[gcp.cloudrunv2.ServiceTemplateVpcAccessNetworkInterfaceArgs(
            network=vpc.network, subnetwork=vpc.subnetwork)])


def grant_secret_access(component: str, config: JobConfig, member: pulumi.Input[str],
                        opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """``roles/secretmanager.secretAccessor`` for ``member`` on each secret the job reads, and on no other."""
    return [gcp.secretmanager.SecretIamMember(
        f"{component}-runtime-secret-{ref.secret_id}-reader",
        gcp.secretmanager.SecretIamMemberArgs(project=ref.project, secret_id=ref.secret_id, role=SECRET_ACCESSOR_ROLE,
                                              member=member),
        opts=opts) for ref in config.secrets]
