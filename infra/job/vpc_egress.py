"""VPC egress of the job (``vpc``): Direct VPC egress (https://cloud.google.com/run/docs/configuring/vpc-direct-vpc)
or a Serverless VPC Access connector (https://cloud.google.com/run/docs/configuring/vpc-connectors), and the egress
setting (``PRIVATE_RANGES_ONLY`` or ``ALL_TRAFFIC``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler_dedup.infra.args import VpcEgressArgs, input_keys
from scheduler_dedup.infra.errors import DedupConfigError

EGRESS_SETTINGS = ("PRIVATE_RANGES_ONLY", "ALL_TRAFFIC")
DIRECT_VPC_API = "compute.googleapis.com"
CONNECTOR_API = "vpcaccess.googleapis.com"
_KEYS = input_keys(VpcEgressArgs)
_NETWORK_RE = re.compile(r"^(projects/[^/]+/global/networks/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_SUBNETWORK_RE = re.compile(r"^(projects/[^/]+/regions/([^/]+)/subnetworks/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_CONNECTOR_RE = re.compile(r"^projects/[^/]+/locations/([^/]+)/connectors/[a-z][-a-z0-9]{0,23}$")


@dataclass(frozen=True)
class VpcEgress:
    """The resolved ``vpc``: ``connector``, or ``network``/``subnetwork`` (Direct VPC egress); ``egress`` always."""

    egress: str
    network: str | None = None
    subnetwork: str | None = None
    connector: str | None = None

    @property
    def api(self) -> str:
        """The API this egress needs enabled."""
        return CONNECTOR_API if self.connector else DIRECT_VPC_API


def resolve_vpc(value: Any, region: str | None, *, store_network: bool) -> VpcEgress | None:
    """``vpc`` checked against the job's region.

    Args:
        store_network: the job's store already gives it Direct VPC egress (Memorystore): only ``egress`` may be set.

    Raises:
        DedupConfigError: an unknown key, both a connector and Direct VPC egress, neither, a name in another region,
            an egress setting Cloud Run does not have.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DedupConfigError("vpc", f"must be a mapping with network/subnetwork or connector, got {value!r}")
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise DedupConfigError(f"vpc.{unknown[0]}", f"unknown key; valid keys are {', '.join(_KEYS)}")
    egress = value.get("egress", "PRIVATE_RANGES_ONLY")
    if egress not in EGRESS_SETTINGS:
        raise DedupConfigError("vpc.egress", f"{egress!r} is not a Cloud Run egress setting: use {' or '.join(EGRESS_SETTINGS)}")
    network, subnetwork, connector = value.get("network"), value.get("subnetwork"), value.get("connector")
    if store_network:
        given = next((k for k in ("network", "subnetwork", "connector") if value.get(k) is not None), None)
        if given:
            raise DedupConfigError(f"vpc.{given}", "the Memorystore store's network is the job's (Direct VPC egress, "
                                                   "one network per service): remove it, and keep only vpc.egress")
        return VpcEgress(egress)
    if connector is not None and (network is not None or subnetwork is not None):
        raise DedupConfigError("vpc.connector", "give a connector or Direct VPC egress (network, subnetwork), not both")
    if connector is not None:
        match = _CONNECTOR_RE.match(connector) if isinstance(connector, str) else None
        if not match:
            raise DedupConfigError("vpc.connector", f"{connector!r} is not projects/P/locations/R/connectors/C")
        if region is not None and match.group(1) != region:
            raise DedupConfigError("vpc.connector", f"the connector is in {match.group(1)}, the job in {region}: a "
                                                    "service uses a connector of its own region")
        return VpcEgress(egress, connector=connector)
    if network is None and subnetwork is None:
        raise DedupConfigError("vpc", "give network and/or subnetwork (Direct VPC egress) or connector")
    if network is not None and not (isinstance(network, str) and _NETWORK_RE.match(network)):
        raise DedupConfigError("vpc.network", f"{network!r} is not a network: N or projects/P/global/networks/N")
    if subnetwork is not None:
        match = _SUBNETWORK_RE.match(subnetwork) if isinstance(subnetwork, str) else None
        if not match:
            raise DedupConfigError("vpc.subnetwork", f"{subnetwork!r} is not a subnetwork: S or "
                                                     "projects/P/regions/R/subnetworks/S")
        if match.group(2) and region is not None and match.group(2) != region:
            raise DedupConfigError("vpc.subnetwork", f"the subnetwork is in {match.group(2)}, the job in {region}: "
                                                     "Direct VPC egress uses a subnetwork of the service's region")
    return VpcEgress(egress, network=network, subnetwork=subnetwork)
