"""The job's own configuration: its environment and secrets (:mod:`.job_env`), CPU and memory
(:mod:`.container_limits`), labels (:mod:`.labels`), VPC egress (:mod:`.vpc_egress`) and the roles of its own work
(:mod:`.job_roles`), resolved together so every mistake is reported at once; :mod:`.job_wiring` applies them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler_dedup.infra.job.container_limits import ContainerLimits, resolve_limits
from scheduler_dedup.infra.job.inputs import Problems
from scheduler_dedup.infra.job.job_env import (
    SecretFile,
    SecretRef,
    credential_advisory,
    resolve_env,
    resolve_secret_env,
    resolve_secret_files,
)
from scheduler_dedup.infra.job.job_roles import JobRole, resolve_job_roles
from scheduler_dedup.infra.job.labels import MANAGED_BY, resolve_labels
from scheduler_dedup.infra.job.vpc_egress import VpcEgress, resolve_vpc

SECRET_MANAGER_API = "secretmanager.googleapis.com"


@dataclass(frozen=True)
class JobConfig:
    """The resolved ``env``, ``secret_env``, ``secret_files``, ``cpu``/``memory``, ``labels``, ``vpc`` and
    ``job_roles`` of a job (each empty or None when not given)."""

    env: Mapping[str, Any] = field(default_factory=dict)
    secret_env: Mapping[str, SecretRef] = field(default_factory=dict)
    secret_files: tuple[SecretFile, ...] = ()
    limits: ContainerLimits = ContainerLimits()
    labels: Mapping[str, str] = field(default_factory=lambda: dict(MANAGED_BY))
    vpc: VpcEgress | None = None
    roles: tuple[JobRole, ...] = ()

    @property
    def secrets(self) -> tuple[SecretRef, ...]:
        """Each secret the job reads, once (the runtime identity's ``secretAccessor`` grants), in input order."""
        refs = [*self.secret_env.values(), *(f.ref for f in self.secret_files)]
        return tuple(dict.fromkeys(SecretRef(r.project, r.secret_id, "") for r in refs))

    @property
    def apis(self) -> tuple[str, ...]:
        """The APIs this configuration uses: Secret Manager for secrets, Compute Engine or Serverless VPC Access."""
        return (*((SECRET_MANAGER_API,) if self.secrets else ()), *((self.vpc.api,) if self.vpc else ()))

    def advisories(self) -> tuple[str, ...]:
        """A credential-looking plain variable (:func:`~scheduler_dedup.infra.job.job_env.credential_advisory`)."""
        return tuple(a for a in (credential_advisory(n, v) for n, v in self.env.items()) if a)


def resolve_job_config(args: Mapping[str, Any], project: str | None, region: str | None, *,
                       store_network: bool) -> JobConfig:
    """Check the job's own configuration inputs of ``args``.

    Args:
        project: the job's project (secrets must be in it); None while invalid (secret checks are then skipped).
        store_network: the store gives the job Direct VPC egress already (into the store's network).

    Raises:
        DedupConfigErrors: every problem at once, each naming its field (``env.NAME``, ``secret_files[0].path``).
    """
    problems = Problems()
    no_env: dict[str, Any] = {}
    env = problems.run(lambda: resolve_env(args.get("env")), no_env)
    secret_env: dict[str, SecretRef] = {}
    secret_files: tuple[SecretFile, ...] = ()
    if project is not None:
        secret_env = problems.run(lambda: resolve_secret_env(args.get("secret_env"), project, env), {})
        secret_files = problems.run(lambda: resolve_secret_files(args.get("secret_files"), project), ())
    limits = problems.run(lambda: resolve_limits(args.get("cpu"), args.get("memory")), ContainerLimits())
    labels = problems.run(lambda: resolve_labels(args.get("labels")), dict(MANAGED_BY))
    vpc = problems.run(lambda: resolve_vpc(args.get("vpc"), region, store_network=store_network), None)
    no_roles: tuple[JobRole, ...] = ()
    roles = problems.run(lambda: resolve_job_roles(args.get("job_roles")), no_roles)
    problems.raise_any()
    return JobConfig(env, secret_env, secret_files, limits, labels, vpc, roles)
