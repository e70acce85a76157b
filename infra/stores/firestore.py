"""The Firestore store's component piece: what ``DedupStore`` (the default kind) creates, and the job's own store.

Children (``parent`` the store or the job):

* the Firestore database (native mode) unless an existing one is adopted (``create_database=False``);
* per owned collection, the one ``gcp:firestore:Field`` with the TTL policy on ``expire_at`` and the
  composite indexes run history needs (:data:`~scheduler_dedup.handler.stores.firestore.schema.RUN_HISTORY_INDEXES`).

A job without ``store=`` keeps a store of its own, created by :func:`firestore_children` under the job with
the names it always had (``<job>-db``, ``<job>-ttl``), so existing stacks see no replacement; a job on Firestore gets
``roles/datastore.user`` limited to its database by an IAM condition. The Firestore store's registration names this
module (``component``); the piece's interface is :mod:`.base`'s.
"""

# No `from __future__ import annotations`: Pulumi's component analyzer reads the real annotation types.
import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import pulumi
import pulumi_gcp as gcp

from scheduler_dedup.handler.config.settings import DEFAULT_COLLECTION, Settings
from scheduler_dedup.handler.core.errors import ConfigError
from scheduler_dedup.handler.core.record import TTL_FIELD
from scheduler_dedup.handler.stores.firestore.config import FirestoreConfig
from scheduler_dedup.handler.stores.firestore.schema import RUN_HISTORY_INDEXES, UNINDEXED_FIELDS

from scheduler_dedup.infra.args import DedupStoreRefArgs
from scheduler_dedup.infra.errors import DedupConfigError, bool_input, read_str
from scheduler_dedup.infra.project.apis import FIRESTORE_API
from scheduler_dedup.infra.project.locations import region_problem
from scheduler_dedup.infra.project.providers import ProjectSource, child_project
from scheduler_dedup.infra.stores.ownership import default_database_problem
from scheduler_dedup.infra.stores.base import (JobKey, JobSettings, JobStore, JobStoreChildren, StoreRef,
                                               checked_database, claim_ttl_policy, database_ref)

if TYPE_CHECKING:
    from scheduler_dedup.infra.stores.store import DedupStore

DEFAULT_STORE_DATABASE = "scheduler-dedup"
#: Single-field index configurations (exemptions) a Firestore database holds at most
#: (https://cloud.google.com/firestore/quotas, Indexes).
MAX_FIELD_CONFIGS = 200
#: Inputs of a Firestore ``DedupStore``.
KEYS = frozenset({"kind", "location", "project", "database_id", "create_database", "collections",
                  "deletion_protection", "protect_database"})
#: Keys of a job's ``store`` input for a Firestore store (its stack's outputs).
REF_KEYS = frozenset({"kind", "project", "database_id", "collections", "ttl_owner"})
APIS = (FIRESTORE_API,)
_LOCATION_RE = re.compile(r"^[a-z][a-z0-9-]{1,40}$")


@dataclass(frozen=True)
class FirestoreStoreSettings:
    """A Firestore store's resolved inputs: where the database is and which collections' TTL policies it owns."""

    project: str
    location: str
    database_id: str
    create_database: bool
    collections: tuple[str, ...]
    deletion_protection: bool
    protect_database: bool = True


def resolve_store_settings(args: Mapping[str, Any], *, default_project: Optional[str] = None,
                           provider_name: Optional[str] = None) -> FirestoreStoreSettings:
    """Validate the inputs of a Firestore :class:`~scheduler_dedup.infra.args.DedupStoreArgs` (their keys are
    checked by ``DedupStore``) and apply the defaults.

    Database and collection ids are checked by the handler's own rules
    (:class:`scheduler_dedup.handler.config.settings.Settings`), so a store no handler could use fails at preview.

    Raises:
        DedupConfigError: the first invalid input, naming it and the fix.
    """
    location = args.get("location")
    if not isinstance(location, str) or not _LOCATION_RE.match(location):
        raise DedupConfigError("location", f"{location!r} is not a Firestore location id: use e.g. 'nam5', 'eur3' or "
                                           "'us-central1' (https://cloud.google.com/firestore/docs/locations)")
    if args.get("create_database", True) is True:
        offered = region_problem(location, ("Firestore",))
        if offered:
            raise DedupConfigError("location", offered)

    project = child_project(args, default_project, provider_name)
    create_database = bool_input(args, "create_database", True)
    deletion_protection = bool_input(args, "deletion_protection", False)
    protect_database = bool_input(args, "protect_database", True)
    database_id = args.get("database_id") or (DEFAULT_STORE_DATABASE if create_database else "(default)")
    adopt = default_database_problem(database_id, create_database)
    if adopt:
        raise DedupConfigError("create_database", adopt)
    collections = args.get("collections", [DEFAULT_COLLECTION])
    if isinstance(collections, str) or not isinstance(collections, Sequence) or not collections:
        raise DedupConfigError("collections", f"must be a non-empty list of collection ids, got {collections!r}")
    if len(set(collections)) != len(collections):
        raise DedupConfigError("collections", f"lists a collection twice: {list(collections)!r}; one TTL policy each")
    if len(collections) * len(UNINDEXED_FIELDS) > MAX_FIELD_CONFIGS:
        raise DedupConfigError("collections", f"{len(collections)} collections need {len(UNINDEXED_FIELDS)} single-field "
                                              f"index exemptions each, and a database holds at most {MAX_FIELD_CONFIGS} "
                                              "(https://cloud.google.com/firestore/quotas, Indexes): split them into "
                                              f"stores of at most {MAX_FIELD_CONFIGS // len(UNINDEXED_FIELDS)}")
    for collection in collections:
        if not isinstance(collection, str):
            raise DedupConfigError("collections", f"{collection!r} is not a collection id (a string)")
        try:
            check_firestore_ids(project, database_id, collection)
        except DedupConfigError as exc:
            field = "collections" if exc.field == "collection" else exc.field
            raise DedupConfigError(field, str(exc).split(": ", 1)[-1]) from None
    return FirestoreStoreSettings(project=project, location=location, database_id=database_id,
                                  create_database=create_database, collections=tuple(collections),
                                  deletion_protection=deletion_protection, protect_database=protect_database)


def check_firestore_ids(project: str, database_id: Any, collection: Any) -> None:
    """Check plain database and collection ids with the handler's rules; outputs are checked where they resolve.

    Raises:
        DedupConfigError: field ``database_id`` or ``collection``; the handler's message says the fix.
    """
    if not isinstance(database_id, str) or not isinstance(collection, str):
        return
    try:
        Settings(project=project, collection=collection, store_config=FirestoreConfig(database=database_id))
    except ConfigError as exc:
        field = "database_id" if str(exc).startswith("DEDUP_DATABASE") else (
            "collection" if str(exc).startswith("DEDUP_COLLECTION") else "project")
        raise DedupConfigError(field, f"the handler would refuse it: {exc}") from None


@dataclass(frozen=True)
class FirestoreChildren:
    """What :func:`firestore_children` created: the database (None when adopted) and the resources to wait for."""

    database: Optional[gcp.firestore.Database]
    ready: list[pulumi.Resource]


def firestore_children(
    s: FirestoreStoreSettings, *, opts: pulumi.ResourceOptions,
    database_name: str, ttl_name: Callable[[str], str], index_name: Callable[[str, int], str],
) -> FirestoreChildren:
    """Create the database (unless adopted), and per collection its TTL policy, its single-field index exemptions
    (:data:`~scheduler_dedup.handler.stores.firestore.schema.UNINDEXED_FIELDS`) and run history indexes.

    Args:
        s: the store's settings.
        opts: options of every child (parent, API dependencies).
        database_name, ttl_name, index_name: logical names of the database, of a collection's TTL field (its other
            exempt fields are ``<ttl name>-<field>``) and of a collection's ``n``-th history index.

    The caller claims the TTL policies with :func:`~.base.claim_ttl_policy` first, before it creates any child.
    """
    database: Optional[gcp.firestore.Database] = None
    if s.create_database:
        database = gcp.firestore.Database(
            database_name,
            gcp.firestore.DatabaseArgs(
                name=s.database_id, project=s.project, location_id=s.location,
                type="FIRESTORE_NATIVE", concurrency_mode="OPTIMISTIC",
                delete_protection_state=(
                    "DELETE_PROTECTION_ENABLED" if s.deletion_protection else "DELETE_PROTECTION_DISABLED"
                ),
                # pulumi-gcp's firestore.Database.deletion_policy: ABANDON (its default) would leave the database
                # behind on `destroy`; DELETE deletes what the stack made once Pulumi `protect` (below) is lifted.
                # PREVENT, which pulumi-gcp 10.x documents, is not used: older releases in range may lack it, and
                # `protect` refuses first.
                deletion_policy="DELETE",
            ),
            # Pulumi `protect` (base.PROTECT_DATABASE_DOC): a plan that would delete or replace the database, and with
            # it the run records late retries are deduplicated against, fails instead of running.
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=s.protect_database)),
        )
    after_db = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[database] if database else []))
    ready: list[pulumi.Resource] = [*([database] if database else [])]
    for collection in s.collections:
        # TTL policy on expire_at: https://cloud.google.com/firestore/docs/ttl ; an empty index_config
        # turns the field's single-field indexes off (a timestamp that only grows would hotspot them), and so on
        # every other field of UNINDEXED_FIELDS. One after another: two index exemptions of one collection written
        # at once fail (hashicorp/terraform-provider-google#14997, #16329).
        previous: Optional[pulumi.Resource] = None
        for field in UNINDEXED_FIELDS:
            previous = gcp.firestore.Field(
                ttl_name(collection) if field == TTL_FIELD else f"{ttl_name(collection)}-{field.replace('_', '-')}",
                gcp.firestore.FieldArgs(
                    project=s.project, database=s.database_id, collection=collection, field=field,
                    ttl_config=gcp.firestore.FieldTtlConfigArgs() if field == TTL_FIELD else None,
                    index_config=gcp.firestore.FieldIndexConfigArgs(),
                ),
                opts=pulumi.ResourceOptions.merge(after_db, pulumi.ResourceOptions(
                    depends_on=[previous] if previous is not None else [])),
            )
            ready.append(previous)
        for n, fields in enumerate(RUN_HISTORY_INDEXES):
            ready.append(gcp.firestore.Index(
                index_name(collection, n),
                gcp.firestore.IndexArgs(
                    project=s.project, database=s.database_id, collection=collection, query_scope="COLLECTION",
                    fields=[gcp.firestore.IndexFieldArgs(field_path=path, order=order) for path, order in fields],
                ),
                opts=after_db,
            ))
    return FirestoreChildren(database=database, ready=ready)


# --------------------------------------------------------------------------- the piece's interface (.base)

def build(store: "DedupStore", name: str, args: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions],
          source: ProjectSource) -> FirestoreStoreSettings:
    """A Firestore ``DedupStore``: the database (created or adopted), and per collection its TTL policy and indexes;
    returns its settings (``DedupStore.resolved``).

    Raises:
        DedupConfigError: an invalid input, or a TTL policy another component of this program owns.
    """
    s = resolve_store_settings({k: v for k, v in args.items() if k != "kind"}, default_project=source.project,
                               provider_name=source.provider_name)
    for collection in s.collections:  # before any child exists, so a second owner fails cleanly
        claim_ttl_policy(s.project, s.database_id, collection, f"DedupStore {name}")
    store.begin(opts)
    apis = store.enable_apis(s.project)
    children = firestore_children(
        s, opts=pulumi.ResourceOptions(parent=store, depends_on=list(apis)),
        database_name=f"{name}-db", ttl_name=lambda c: f"{name}-ttl-{c}",
        index_name=lambda c, n: f"{name}-history-{c}-{n}",
    )
    database_id = children.database.name if children.database else pulumi.Output.from_input(s.database_id)
    # Readers of database_id (jobs in this program) wait until the TTL policies and indexes exist.
    store.finish(project=s.project, instance_id="",
                 database_id=pulumi.Output.all(database_id, *[r.urn for r in children.ready]).apply(lambda v: str(v[0])),
                 resource_prefix=pulumi.Output.concat("projects/", s.project, "/databases/"),
                 location=s.location, collections=s.collections)
    return s


def outputs(store: "DedupStore") -> DedupStoreRefArgs:
    """The store as plain values known at preview (what its stack exports)."""
    s = store.resolved
    return {"kind": "firestore", "project": s.project, "database_id": s.database_id,
            "collections": list(s.collections)}


def ref_from(store: Mapping[str, Any]) -> StoreRef:
    """A job's view of a Firestore store from its outputs (its keys are checked by ``DedupStore``'s reader).

    Raises:
        DedupConfigError: field ``store.<key>``: a missing output.
    """
    return database_ref(store, "firestore", ("project", "database_id", "collections"))


def ref_of(store: "DedupStore") -> StoreRef:
    """A job's view of a Firestore ``DedupStore`` of this program (the job waits for it; its TTL policy is here)."""
    return dataclasses.replace(ref_from(outputs(store)), ttl_owner=None, component=store)



# --------------------------------------------------------------------------- a job on a Firestore store (.base)

JOB_KEYS: Mapping[str, JobKey] = {}
OWN_REFUSAL: Optional[str] = None
APP_ENGINE_REFUSAL: Optional[str] = None
STORE_NETWORK = False
DATABASE_ENV = "DEDUP_DATABASE"
ENV_FIELDS: Mapping[str, str] = {}


def resolve_own(args: Mapping[str, Any], *, prefix: str, project: Optional[str], region: Optional[str],
                collection: str, keys: Mapping[str, str]) -> JobStore:
    """The job's own Firestore database: ``database_id`` (default ``<prefix>-dedup``, or ``(default)`` when adopted)
    in ``database_location`` (default the region); its ids are checked by ``check_handler_settings``.

    Raises:
        DedupConfigError: ``create_database``, ``database_id`` or ``database_location`` of the wrong type, or
            ``create_database`` true for ``(default)`` (:func:`default_database_problem`).
    """
    create_database = bool_input(args, "create_database", True)
    default_db = f"{prefix[:55].rstrip('-')}-dedup" if create_database else "(default)"
    database_id = read_str(args, "database_id") or default_db
    adopt = default_database_problem(database_id, create_database)
    if adopt:
        raise DedupConfigError("create_database", adopt)
    return JobStore(None, "firestore", collection, create_database, database_id,
                    read_str(args, "database_location") or region or "")


def location_problem(store: JobStore) -> Optional[str]:
    """Why Firestore offers no database in the location of the job's own database (one it creates), or None."""
    return region_problem(store.database_location, ("Firestore",)) if store.create_database else None


def check_job_ids(project: Optional[str], instance_id: Any, database_id: Any, collection: Any) -> None:
    """:func:`check_firestore_ids` (a Firestore database has no instance; without a project nothing is checked).

    Raises:
        DedupConfigError: field ``database_id`` or ``collection``.
    """
    if project is not None:
        check_firestore_ids(project, database_id, collection)


def job_environment(s: JobSettings) -> dict[str, pulumi.Input[str]]:
    """``DEDUP_DATABASE``: the handler's default store is Firestore."""
    return {"DEDUP_DATABASE": s.database_id}


def claim_own(s: JobSettings, owner: str) -> Optional[FirestoreStoreSettings]:
    """The job's own database's settings, its TTL policy claimed for ``owner``; None on a shared store.

    Raises:
        DedupConfigError: another component of this program owns the TTL policy.
    """
    if s.store is not None:
        return None
    assert isinstance(s.database_id, str)
    own = FirestoreStoreSettings(
        project=s.project, location=s.database_location, database_id=s.database_id,
        create_database=s.create_database, collections=(s.collection,),
        deletion_protection=s.deletion_protection, protect_database=s.protect_database,
    )
    claim_ttl_policy(s.project, s.database_id, s.collection, owner)
    return own


def job_children(job: pulumi.Resource, name: str, s: JobSettings, own: Optional[FirestoreStoreSettings], *,
                 member: pulumi.Input[str], enabled: Sequence[pulumi.Resource], after_apis: pulumi.ResourceOptions,
                 labels: Mapping[str, str]) -> JobStoreChildren:
    """The job's own database (``own``; the shared store's checked otherwise) and ``roles/datastore.user`` for
    ``member`` on the project, with an IAM condition naming that database (Firestore has no per-database IAM)."""
    database: Optional[gcp.firestore.Database] = None
    database_id: pulumi.Input[str]
    if own is not None:
        database = firestore_children(
            own, opts=after_apis, database_name=f"{name}-db", ttl_name=lambda _: f"{name}-ttl",
            index_name=lambda _, n: f"{name}-history-index-{n}",
        ).database
        database_id = s.database_id
    else:
        database_id = checked_database(s, lambda db: check_firestore_ids(s.project, db, s.collection))
    db_opts = pulumi.ResourceOptions(parent=job, depends_on=[*enabled, *([database] if database else [])])
    database_resource_name = pulumi.Output.concat("projects/", s.project, "/databases/", database_id)
    gcp.projects.IAMMember(
        f"{name}-runtime-datastore-user",
        gcp.projects.IAMMemberArgs(
            project=s.project, role="roles/datastore.user", member=member,
            condition=gcp.projects.IAMMemberConditionArgs(
                title=pulumi.Output.concat("only ", database_id).apply(lambda t: t[:100]),
                description="scheduler-dedup: Firestore access limited to the dedup database",
                expression=pulumi.Output.concat('resource.name == "', database_resource_name, '"'),
            ),
        ),
        opts=db_opts,
    )
    return JobStoreChildren(database, database_id,
                            database.name if database is not None else pulumi.Output.from_input(database_id))
