"""The project a component's children are created in, when it was given an explicit ``gcp.Provider``.

Children of a component use the provider the component was given (``opts=ResourceOptions(provider=...)``,
``providers=``, or one inherited from its parent). Their ``project`` must then come from that provider, not from
the stack's ``gcp:project`` (which configures only the default provider): a provider for ``prov-proj`` with
``project=config-proj`` on every child is a silent mix. The provider's project is read with the provider's own
``gcp.organizations.get_client_config`` data source, which answers with the project the provider is configured
for (https://www.pulumi.com/registry/packages/gcp/api-docs/organizations/getclientconfig/).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.infra.errors import DedupConfigError


@dataclass(frozen=True)
class ProjectSource:
    """Where a component's project comes from when its ``project`` input is not given.

    Attributes:
        project: the project id, or None when the source has none.
        provider_name: the explicit provider's name, or None for the default provider (``gcp:project``).
    """

    project: Optional[str]
    provider_name: Optional[str] = None


def explicit_gcp_provider(opts: Optional[pulumi.ResourceOptions]) -> Optional[pulumi.ProviderResource]:
    """The ``gcp`` provider a component's children will use, when it is not the default one: ``opts.provider``,
    ``opts.providers`` (a mapping or a list) or the parent's; None for the default provider."""
    if opts is None:
        return None
    candidates: list[object] = [opts.provider]
    providers = opts.providers
    if isinstance(providers, Mapping):
        candidates.append(providers.get("gcp"))
    elif isinstance(providers, Sequence):
        candidates.extend(providers)
    if opts.parent is not None:
        candidates.append(getattr(opts.parent, "_providers", {}).get("gcp"))
    for candidate in candidates:
        if isinstance(candidate, pulumi.ProviderResource) and candidate.package == "gcp":
            return candidate
    return None


def project_source(opts: Optional[pulumi.ResourceOptions]) -> ProjectSource:
    """The project the children get when the component's ``project`` input is not given, and from where."""
    provider = explicit_gcp_provider(opts)
    if provider is None:
        return ProjectSource(gcp.config.project)
    config = gcp.organizations.get_client_config(opts=pulumi.InvokeOptions(provider=provider))
    return ProjectSource(config.project or None, provider_name=provider.pulumi_resource_name)


def child_project(args: Mapping[str, Any], default_project: str | None, provider_name: str | None) -> str:
    """The project of every child: ``project``, else the provider's (the explicit one's, or ``gcp:project``).

    Raises:
        DedupConfigError: no project anywhere, or ``project`` differs from the explicit provider's project.
    """
    given = args.get("project")
    if given is not None and (not isinstance(given, str) or not given.strip()):
        raise DedupConfigError("project", f"must be a non-empty string, got {given!r}")
    given = given.strip() if given else None
    if provider_name is not None:
        if given and default_project and given != default_project:
            raise DedupConfigError("project", f"{given!r} is not the project of the provider {provider_name!r} the "
                                              f"component was given ({default_project!r}): its children would be "
                                              f"created by that provider in another project. Remove project (the "
                                              "provider's is used), or give the component a provider for "
                                              f"{given!r}")
        if not (given or default_project):
            raise DedupConfigError("project", f"no project: the provider {provider_name!r} the component was given has "
                                              "no project; set project on it, or pass project")
        return given or str(default_project)
    if not (given or default_project):
        raise DedupConfigError("project", "no project: pass project or run `pulumi config set gcp:project <id>`")
    return given or str(default_project)
