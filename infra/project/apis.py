"""The Google APIs the component and the store enable (``gcp.projects.Service``, ``disable_on_destroy=False``).

A module of constants (and :func:`for_store`) with no imports, so that the job
(:mod:`scheduler_dedup.infra.job.component`), the stores (:mod:`scheduler_dedup.infra.stores`) and the alerts
(:mod:`scheduler_dedup.infra.job.alerts`) read one list without importing each other.
"""

#: The API of a Firestore store.
FIRESTORE_API = "firestore.googleapis.com"
#: The API of a Spanner store.
SPANNER_API = "spanner.googleapis.com"
#: What a Memorystore store needs: Memorystore for Redis, Secret Manager (its AUTH string and server CA) and Compute
#: Engine (its authorized network, the jobs' Direct VPC egress).
MEMORYSTORE_APIS = ("redis.googleapis.com", "secretmanager.googleapis.com", "compute.googleapis.com")
#: The store's own APIs per ``DedupStore`` kind: in :data:`BASE_APIS` they take Firestore's place.
STORE_KIND_APIS = {"firestore": (FIRESTORE_API,), "memorystore": MEMORYSTORE_APIS, "spanner": (SPANNER_API,)}
#: What every job needs: Cloud Scheduler, its store (Firestore here; :func:`for_store`) and IAM (its service accounts
#: and grants).
BASE_APIS = ("cloudscheduler.googleapis.com", FIRESTORE_API, "iam.googleapis.com")
#: The platform serving the handler, per Scheduler target kind: Cloud Run (HTTP target) or App Engine.
PLATFORM_APIS = {"http": ("run.googleapis.com",), "app_engine": ("appengine.googleapis.com",)}
#: What a proxy target adds: a Cloud Build trigger target calls the Cloud Build API.
TARGET_APIS = {"cloud_build_trigger": ("cloudbuild.googleapis.com",)}
#: What a source deploy adds: Cloud Build builds the image, Artifact Registry holds it, Cloud Storage the zip.
SOURCE_DEPLOY_APIS = ("cloudbuild.googleapis.com", "artifactregistry.googleapis.com", "storage.googleapis.com")
#: What the alerts need: Cloud Logging (log-based metrics) and Cloud Monitoring (alert policies).
ALERT_APIS = ("logging.googleapis.com", "monitoring.googleapis.com")
#: What a Firestore store enables for every job that uses it, so that jobs on a store enable none themselves
#: (another kind's: ``for_store(STORE_APIS, kind)``).
STORE_APIS = (*BASE_APIS, *(api for apis in PLATFORM_APIS.values() for api in apis), *SOURCE_DEPLOY_APIS, *ALERT_APIS)


#: How long resources wait after this component enabled an API, seconds. An API enabled moments ago still answers
#: 403 "If you enabled this API recently, wait a few minutes for the action to propagate to our systems and retry"
#: (googleapis/google-cloud-rust#5444, firebase/firebase-functions#691); Google's own solutions wait 60 s after
#: enabling one (GoogleCloudPlatform/solutions-builder#127, GoogleCloudPlatform/core-solution-services#14). The enable operation
#: that ``projects.Service`` waits for does not cover this propagation.
API_PROPAGATION_SECONDS = 60


def for_store(apis: tuple[str, ...], kind: str) -> tuple[str, ...]:
    """``apis`` with Firestore's API replaced by the APIs of a store of ``kind`` (:data:`STORE_KIND_APIS`)."""
    return tuple(a for api in apis for a in (STORE_KIND_APIS[kind] if api == FIRESTORE_API else (api,)))
