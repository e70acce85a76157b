"""A Memorystore for Redis run store: what ``DedupStore(kind="memorystore")`` creates, and how a job reaches it.

The instance (``gcp:redis:Instance``) is made for deduplication, each setting on purpose:

* ``STANDARD_HA`` (a replica in another zone, automatic failover): a Basic Tier instance loses every record on a
  restart or maintenance, and the next delivery of every run in the retry window runs the job again
  (https://cloud.google.com/memorystore/docs/redis/redis-tiers);
* Redis 7 (the store's scripts need 7.0: ``PEXPIRETIME``, effects replication);
* ``maxmemory-policy noeviction``: Memorystore's default, ``volatile-lru``, evicts keys that have a TTL, and every
  run record has one (https://cloud.google.com/memorystore/docs/redis/supported-redis-configurations); a full
  instance then refuses claims (answered 500, retried) instead of forgetting runs;
* AUTH on; the AUTH string goes into Secret Manager and the job mounts it as a file (``DEDUP_REDIS_AUTH_FILE``);
* in-transit encryption ``SERVER_AUTHENTICATION`` (TLS on port 6378); the server CA goes into Secret Manager too,
  mounted beside it (``DEDUP_REDIS_CA_FILE``);
* RDB snapshots every hour, so a restart of both nodes keeps what the last snapshot had;
* the authorized network: an input, default the project's ``default`` VPC network. Cloud Run reaches the instance
  by Direct VPC egress on that network (a subnetwork of the job's region, default ``default``), private ranges
  only (https://cloud.google.com/run/docs/configuring/vpc-direct-vpc).

What it still cannot promise, and what the pack checks, is in ``docs/stores.md``. The Redis store's registration
names this module (``component``); the piece's interface is :mod:`.base`'s.
"""

# No `from __future__ import annotations`: Pulumi's component analyzer reads the real annotation types.
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION, Settings
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.record import TTL_FIELD
from scheduler_dedup.infra.project.resource_names import name_problem
from scheduler_dedup.handler.stores.redis.config import DEFAULT_WAIT_TIMEOUT_MS, MAX_WAIT_TIMEOUT_MS

from scheduler_dedup.infra.args import DedupStoreRefArgs
from scheduler_dedup.infra.errors import DedupConfigError, bool_input
from scheduler_dedup.infra.project.providers import ProjectSource
from scheduler_dedup.infra.stores.base import (JobKey, JobSettings, JobStore, JobStoreChildren, StoreRef, StoreWiring,
                                               checked_database, collections_of)

if TYPE_CHECKING:
    from scheduler_dedup.infra.stores.store import DedupStore

TIER = "STANDARD_HA"
REDIS_VERSION = "REDIS_7_2"
#: The instance's Redis configuration: never evict a run record.
REDIS_CONFIGS = {"maxmemory-policy": "noeviction"}
TRANSIT_ENCRYPTION = "SERVER_AUTHENTICATION"
#: The label that tells the policy pack this instance holds run records (policies/rules/stores/memorystore.py reads it).
RUN_STORE_LABEL = ("scheduler-dedup", "run-store")
#: Where a job's container finds the AUTH string and the server CA (each a secret volume of its own).
AUTH_MOUNT, AUTH_FILE_NAME = "/secrets/redis-auth", "auth"
CA_MOUNT, CA_FILE_NAME = "/secrets/redis-ca", "ca.pem"
#: Inputs of a Memorystore ``DedupStore``.
KEYS = MEMORYSTORE_KEYS = frozenset({"kind", "location", "project", "collections", "memory_size_gb",
                                     "authorized_network", "subnetwork", "wait_timeout_ms", "instance_id",
                                     "deletion_protection", "protect_database"})
#: What a Memorystore store needs: Memorystore for Redis, Secret Manager (its AUTH string and server CA) and Compute
#: Engine (its authorized network, the jobs' Direct VPC egress).
APIS = ("redis.googleapis.com", "secretmanager.googleapis.com", "compute.googleapis.com")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]$")


@dataclass(frozen=True)
class MemorystoreSettings:
    """A Memorystore store's resolved inputs (see :class:`~scheduler_dedup.infra.args.DedupStoreArgs`)."""

    project: str
    region: str
    instance_id: str
    memory_size_gb: int
    authorized_network: str
    subnetwork: str
    wait_timeout_ms: int
    collections: tuple[str, ...]
    deletion_protection: bool
    protect_database: bool = True
    """Pulumi ``protect`` on the instance: it holds every job's run records
    (:data:`~scheduler_dedup.infra.stores.base.PROTECT_DATABASE_DOC`)."""


def resolve_memorystore_settings(name: str, args: Mapping[str, Any], *,
                                 default_project: Optional[str] = None) -> MemorystoreSettings:
    """Validate the inputs of ``DedupStore(kind="memorystore")`` (their keys are checked by ``DedupStore``) and apply
    the defaults.

    Raises:
        DedupConfigError: the first invalid input, naming it and the fix.
    """
    region = args.get("location")
    if not isinstance(region, str) or not _REGION_RE.match(region):
        raise DedupConfigError("location", f"{region!r} is not a region: a Memorystore instance lives in one region, "
                                           "the jobs' (e.g. us-central1)")
    project = args.get("project") or default_project
    if not isinstance(project, str) or not project:
        raise DedupConfigError("project", "no project: pass project or run `pulumi config set gcp:project <id>`")
    size = args.get("memory_size_gb", 1)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 300:
        raise DedupConfigError("memory_size_gb", f"must be a whole number of GB from 1 to 300, got {size!r}")
    wait = args.get("wait_timeout_ms", DEFAULT_WAIT_TIMEOUT_MS)
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= MAX_WAIT_TIMEOUT_MS:
        raise DedupConfigError("wait_timeout_ms", f"must be 0 (no WAIT) to {MAX_WAIT_TIMEOUT_MS} ms, got {wait!r}")
    instance_id = args.get("instance_id") or f"{name[:33].rstrip('-')}-dedup"
    problem = (name_problem("memorystore_instance", instance_id) if isinstance(instance_id, str)
               else f"must be a string, got {instance_id!r}")
    if problem:
        raise DedupConfigError("instance_id", problem)
    network = args.get("authorized_network") or f"projects/{project}/global/networks/default"
    subnetwork = args.get("subnetwork") or "default"
    for key, value in (("authorized_network", network), ("subnetwork", subnetwork)):
        if not isinstance(value, str):
            raise DedupConfigError(key, f"must be a name, got {value!r}")
    protection = bool_input(args, "deletion_protection", False)
    protect = bool_input(args, "protect_database", True)
    collections = args.get("collections", [DEFAULT_COLLECTION])
    if isinstance(collections, str) or not isinstance(collections, Sequence) or not collections \
            or len(set(collections)) != len(collections):
        raise DedupConfigError("collections", f"must be a non-empty list of distinct collection ids, got {collections!r}")
    for collection in collections:
        try:
            Settings(project=project, collection=collection)
        except ConfigError as exc:
            raise DedupConfigError("collections", f"the handler would refuse it: {exc}") from None
    return MemorystoreSettings(project=project, region=region, instance_id=instance_id, memory_size_gb=size,
                               authorized_network=network, subnetwork=subnetwork, wait_timeout_ms=wait,
                               collections=tuple(collections), deletion_protection=protection,
                               protect_database=protect)


@dataclass(frozen=True)
class RedisStoreRef:
    """What a job needs to reach a Memorystore store: its endpoint, its secrets and its network (outputs allowed).

    Attributes:
        host, port: the instance's primary endpoint (TLS, port 6378).
        auth_secret, ca_secret: Secret Manager secret ids of the AUTH string and of the server CA.
        network, subnetwork: where the job's Direct VPC egress goes (the instance's authorized network).
        wait_timeout_ms: ``DEDUP_REDIS_WAIT_TIMEOUT_MS``.
    """

    host: pulumi.Input[str]
    port: pulumi.Input[int]
    auth_secret: pulumi.Input[str]
    ca_secret: pulumi.Input[str]
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    wait_timeout_ms: pulumi.Input[int] = DEFAULT_WAIT_TIMEOUT_MS

    @property
    def url(self) -> pulumi.Output[str]:
        """``DEDUP_REDIS_URL``: ``rediss://HOST:PORT/0`` (no password: it is mounted)."""
        # A number read from another stack's outputs comes back as a float (6378.0): the port is a whole number.
        port = pulumi.Output.from_input(self.port).apply(lambda p: str(int(float(p))))
        return pulumi.Output.concat("rediss://", self.host, ":", port, "/0")


#: Keys of a job's ``store`` input for a Memorystore store (its stack's outputs).
REF_KEYS = frozenset({"kind", "project", "collections", "redis_host", "redis_port", "auth_secret", "ca_secret",
                      "network", "subnetwork", "wait_timeout_ms"})


def redis_ref_from(store: Mapping[str, Any]) -> RedisStoreRef:
    """A :class:`RedisStoreRef` from a job's ``store`` mapping (``kind: memorystore`` and the store's outputs; its
    keys are checked by ``DedupStore``'s reader).

    Raises:
        DedupConfigError: field ``store.<key>``: a missing key.
    """
    for key in ("redis_host", "redis_port", "auth_secret", "ca_secret", "network", "subnetwork"):
        if store.get(key) is None:
            raise DedupConfigError(f"store.{key}", "is required: pass the DedupStore itself, or its stack's outputs")
    wait = store.get("wait_timeout_ms", DEFAULT_WAIT_TIMEOUT_MS)
    if not isinstance(wait, pulumi.Output) and (isinstance(wait, bool) or not isinstance(wait, int)):
        raise DedupConfigError("store.wait_timeout_ms", f"must be a whole number of ms, got {wait!r}")
    return RedisStoreRef(host=store["redis_host"], port=store["redis_port"], auth_secret=store["auth_secret"],
                         ca_secret=store["ca_secret"], network=store["network"], subnetwork=store["subnetwork"],
                         wait_timeout_ms=wait)


def _ca_bundle(certs: Any) -> str:
    """Every server CA the instance lists, one PEM bundle: during a CA rotation the instance lists the current and
    the next CA, and a client must trust both to keep connecting once it switches
    (https://cloud.google.com/memorystore/docs/redis/manage-in-transit-encryption: "Download All")."""
    texts = []
    for cert in certs or []:
        text = cert.get("cert") if isinstance(cert, Mapping) else getattr(cert, "cert", None)
        if text:
            texts.append(str(text).strip() + "\n")
    return "".join(texts)


@dataclass(frozen=True)
class MemorystoreChildren:
    """What :func:`memorystore_children` created."""

    instance: gcp.redis.Instance
    ref: RedisStoreRef
    ready: list[pulumi.Resource]


def memorystore_children(name: str, s: MemorystoreSettings, *, opts: pulumi.ResourceOptions) -> MemorystoreChildren:
    """Create the instance, and the two secrets (AUTH string, server CA) with their first versions."""
    instance = gcp.redis.Instance(
        f"{name}-redis",
        gcp.redis.InstanceArgs(
            name=s.instance_id, project=s.project, region=s.region, display_name=f"scheduler-dedup {name}: run records",
            tier=TIER, memory_size_gb=s.memory_size_gb, redis_version=REDIS_VERSION,
            authorized_network=s.authorized_network, connect_mode="DIRECT_PEERING",
            auth_enabled=True, transit_encryption_mode=TRANSIT_ENCRYPTION, redis_configs=dict(REDIS_CONFIGS),
            persistence_config=gcp.redis.InstancePersistenceConfigArgs(persistence_mode="RDB",
                                                                       rdb_snapshot_period="ONE_HOUR"),
            deletion_protection=s.deletion_protection, labels={RUN_STORE_LABEL[0]: RUN_STORE_LABEL[1]},
        ),
        # Pulumi `protect`, as on a Firestore or Spanner store's database: the instance holds the run records.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=s.protect_database)),
    )
    after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[instance]))
    secrets: dict[str, gcp.secretmanager.Secret] = {}
    versions: list[pulumi.Resource] = []
    for part, data in (("auth", instance.auth_string), ("ca", instance.server_ca_certs.apply(_ca_bundle))):
        secret = gcp.secretmanager.Secret(
            f"{name}-redis-{part}",
            gcp.secretmanager.SecretArgs(
                secret_id=f"{s.instance_id}-{part}", project=s.project,
                replication=gcp.secretmanager.SecretReplicationArgs(auto=gcp.secretmanager.SecretReplicationAutoArgs()),
            ),
            opts=opts,
        )
        versions.append(gcp.secretmanager.SecretVersion(
            f"{name}-redis-{part}-version",
            gcp.secretmanager.SecretVersionArgs(secret=secret.id, secret_data=pulumi.Output.secret(data)),
            opts=after,
        ))
        secrets[part] = secret
    ready = [instance, *versions]
    waited = pulumi.Output.all(*[r.urn for r in ready])
    ref = RedisStoreRef(
        host=pulumi.Output.all(instance.host, waited).apply(lambda v: str(v[0])), port=instance.port,
        auth_secret=secrets["auth"].secret_id, ca_secret=secrets["ca"].secret_id,
        network=s.authorized_network, subnetwork=s.subnetwork, wait_timeout_ms=s.wait_timeout_ms,
    )
    return MemorystoreChildren(instance=instance, ref=ref, ready=ready)


def redis_environment(ref: RedisStoreRef) -> dict[str, pulumi.Input[str]]:
    """The handler's ``DEDUP_STORE=redis`` environment for a job on ``ref`` (the files are the mounted secrets)."""
    return {
        "DEDUP_STORE": "redis",
        "DEDUP_REDIS_URL": ref.url,
        "DEDUP_REDIS_AUTH_FILE": f"{AUTH_MOUNT}/{AUTH_FILE_NAME}",
        "DEDUP_REDIS_CA_FILE": f"{CA_MOUNT}/{CA_FILE_NAME}",
        "DEDUP_REDIS_WAIT_TIMEOUT_MS": (str(ref.wait_timeout_ms) if isinstance(ref.wait_timeout_ms, int)
                                        else pulumi.Output.from_input(ref.wait_timeout_ms).apply(  # type: ignore[arg-type]
                                            lambda v: str(int(float(v))))),
    }


def redis_job_wiring(name: str, project: str, ref: RedisStoreRef, runtime_member: pulumi.Input[str],
                     opts: pulumi.ResourceOptions) -> StoreWiring:
    """Grant the runtime identity ``roles/secretmanager.secretAccessor`` on the two secrets only, mount them, and
    route private traffic into the instance's network (Direct VPC egress, ``PRIVATE_RANGES_ONLY``)."""
    grants: list[pulumi.Resource] = []
    volumes, mounts = [], []
    for part, secret, mount, file_name in (("auth", ref.auth_secret, AUTH_MOUNT, AUTH_FILE_NAME),
                                           ("ca", ref.ca_secret, CA_MOUNT, CA_FILE_NAME)):
        grants.append(gcp.secretmanager.SecretIamMember(
            f"{name}-runtime-redis-{part}-reader",
            gcp.secretmanager.SecretIamMemberArgs(project=project, secret_id=secret,
                                                  role="roles/secretmanager.secretAccessor", member=runtime_member),
            opts=opts,
        ))
        volumes.append(gcp.cloudrunv2.ServiceTemplateVolumeArgs(
            name=f"redis-{part}",
            secret=gcp.cloudrunv2.ServiceTemplateVolumeSecretArgs(
                secret=secret, items=[gcp.cloudrunv2.ServiceTemplateVolumeSecretItemArgs(path=file_name,
                                                                                         version="latest")]),
        ))
        mounts.append(gcp.cloudrunv2.ServiceTemplateContainerVolumeMountArgs(name=f"redis-{part}", mount_path=mount))
    vpc = gcp.cloudrunv2.ServiceTemplateVpcAccessArgs(
        egress="PRIVATE_RANGES_ONLY",
        network_interfaces=[gcp.cloudrunv2.ServiceTemplateVpcAccessNetworkInterfaceArgs(
            network=ref.network, subnetwork=ref.subnetwork)],
    )
    return StoreWiring(volumes=volumes, mounts=mounts, vpc_access=vpc, grants=grants)


# --------------------------------------------------------------------------- the piece's interface (.base)

@dataclass(frozen=True)
class BuiltMemorystore:
    """A Memorystore ``DedupStore``'s settings and how a job reaches it (``DedupStore.resolved``)."""

    settings: MemorystoreSettings
    ref: RedisStoreRef


def build(store: "DedupStore", name: str, args: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions],
          source: ProjectSource) -> BuiltMemorystore:
    """A Memorystore ``DedupStore``: the instance and its two secrets, and the outputs a job on it reads.

    Raises:
        DedupConfigError: an invalid input.
    """
    s = resolve_memorystore_settings(name, args, default_project=source.project)
    store.begin(opts)
    apis = store.enable_apis(s.project)
    children = memorystore_children(name, s, opts=pulumi.ResourceOptions(parent=store, depends_on=list(apis)))
    store.project = pulumi.Output.from_input(s.project)
    store.location = pulumi.Output.from_input(s.region)
    store.collections = pulumi.Output.from_input(list(s.collections))
    store.ttl_field = pulumi.Output.from_input(TTL_FIELD)
    own = {"redis_host": children.ref.host,
           "redis_port": children.instance.port, "redis_url": children.ref.url,
           "auth_secret": children.ref.auth_secret, "ca_secret": children.ref.ca_secret,
           "network": pulumi.Output.from_input(s.authorized_network),
           "subnetwork": pulumi.Output.from_input(s.subnetwork),
           "wait_timeout_ms": pulumi.Output.from_input(s.wait_timeout_ms)}
    for key, value in own.items():
        setattr(store, key, value)
    store.register_outputs({"kind": store.kind, "project": store.project, "location": store.location,
                            "collections": store.collections, "ttl_field": store.ttl_field, **own})
    return BuiltMemorystore(s, children.ref)


def outputs(store: "DedupStore") -> DedupStoreRefArgs:
    """The store's plain values known at preview; its endpoint and secrets are outputs (of ``DedupStore``)."""
    s = store.resolved.settings
    return {"kind": "memorystore", "project": s.project,  # type: ignore[typeddict-item]
            "collections": list(s.collections)}


def ref_from(store: Mapping[str, Any]) -> StoreRef:
    """A job's view of a Memorystore store from its outputs (its keys are checked by ``DedupStore``'s reader).

    Raises:
        DedupConfigError: field ``store.<key>``: a missing or invalid output.
    """
    ref = redis_ref_from(store)
    if store.get("project") is None or store.get("collections") is None:
        raise DedupConfigError("store.project" if store.get("project") is None else "store.collections",
                               "is required: pass the DedupStore itself, or its stack's outputs")
    return StoreRef(project=store["project"], database_id="(default)", collections=collections_of(store),
                    ttl_owner=None, kind="memorystore", redis=ref)


def ref_of(store: "DedupStore") -> StoreRef:
    """A job's view of a Memorystore ``DedupStore`` of this program."""
    built: BuiltMemorystore = store.resolved
    return StoreRef(project=built.settings.project, database_id="(default)", collections=list(built.settings.collections),
                    ttl_owner=None, component=store, kind="memorystore", redis=built.ref)


# --------------------------------------------------------------------------- a job on a Memorystore store (.base)

JOB_KEYS: Mapping[str, JobKey] = {}
OWN_REFUSAL: Optional[str] = ("a job has no Memorystore instance of its own: create a DedupStore(kind='memorystore') "
                              "and pass it (or its stack's outputs) as store")
APP_ENGINE_REFUSAL: Optional[str] = (
    "a Memorystore store is reached over Cloud Run's Direct VPC egress, with its secrets mounted into the container: "
    "not available on App Engine yet; use a Firestore store, or remove app_engine")
#: A job reaches the instance by Direct VPC egress into its authorized network (the job's ``vpc`` takes no network).
STORE_NETWORK = True
DATABASE_ENV = "DEDUP_DATABASE"
ENV_FIELDS: Mapping[str, str] = {}


def resolve_own(args: Mapping[str, Any], *, prefix: str, project: Optional[str], region: Optional[str],
                collection: str, keys: Mapping[str, str]) -> JobStore:
    """Never: a job has no Memorystore instance of its own (:data:`OWN_REFUSAL`).

    Raises:
        DedupConfigError: field ``store_kind``, always.
    """
    raise DedupConfigError("store_kind", str(OWN_REFUSAL))


def location_problem(store: JobStore) -> Optional[str]:
    """None: a Memorystore store is always shared, its location checked by its own ``DedupStore``."""
    return None


def check_job_ids(project: Optional[str], instance_id: Any, database_id: Any, collection: Any) -> None:
    """Nothing to check: Redis keys take any collection id the handler accepts (checked by its settings)."""


def job_environment(s: JobSettings) -> dict[str, pulumi.Input[str]]:
    """``DEDUP_STORE=redis`` with the endpoint, the mounted secrets and ``WAIT`` (:func:`redis_environment`)."""
    assert s.store is not None and s.store.redis is not None
    return {"DEDUP_DATABASE": s.database_id, **redis_environment(s.store.redis)}


def claim_own(s: JobSettings, owner: str) -> None:
    """None: a job on Memorystore owns no store, and each record expires by itself (no TTL policy)."""
    return None


def job_children(job: pulumi.Resource, name: str, s: JobSettings, own: None, *, member: pulumi.Input[str],
                 enabled: Sequence[pulumi.Resource], after_apis: pulumi.ResourceOptions,
                 labels: Mapping[str, str]) -> JobStoreChildren:
    """The shared store checked; ``member`` reads its two secrets (mounted), and Direct VPC egress to its network
    (:func:`redis_job_wiring`)."""
    database_id = checked_database(s, lambda db: None)
    assert s.store is not None and s.store.redis is not None
    db_opts = pulumi.ResourceOptions(parent=job, depends_on=[*enabled])
    wiring = redis_job_wiring(name, s.project, s.store.redis, member, db_opts)
    return JobStoreChildren(None, database_id, pulumi.Output.from_input(database_id), wiring)
