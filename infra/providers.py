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
from typing import Optional

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True)
class ProjectSource:
    """Where a component's project comes from when its ``project`` input is not given.

    Attributes:
        project: the project id, or None when the source has none.
        provider_name: the explicit provider's name, or None for the default provider (``gcp:project``).
    """

    project: Optional[str]
    provider_name: Optional[str] = None

    @property
    def described(self) -> str:
        return f"the provider {self.provider_name!r} the component was given" if self.provider_name else \
            "the stack config gcp:project"


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
