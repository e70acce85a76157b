"""The Google APIs the component and the store enable (``gcp.projects.Service``, ``disable_on_destroy=False``).

A module of constants (and :func:`for_store`) with no imports, so that the job (``infra.job.component``), the
store (``infra.stores.store``) and the alerts read one list without importing each other. A store's own APIs are
its component piece's (``APIS`` of ``infra/stores/<store>.py``; ``infra.stores.store.kind_apis``).
"""

#: The API of a Firestore store, and where a list below holds its store's own APIs (:func:`for_store`).
FIRESTORE_API = "firestore.googleapis.com"
#: What every job needs: Cloud Scheduler, its store (Firestore here; :func:`for_store`) and IAM (its service accounts
#: and grants).
BASE_APIS = ("cloudscheduler.googleapis.com", FIRESTORE_API, "iam.googleapis.com")
#: The platform serving the handler, per Scheduler target kind: Cloud Run (HTTP target) or App Engine.
PLATFORM_APIS = {"http": ("run.googleapis.com",), "app_engine": ("appengine.googleapis.com",)}
#: What a proxy target adds: a Cloud Build trigger target calls the Cloud Build API.
TARGET_APIS = {"cloud_build_trigger": ("cloudbuild.googleapis.com",)}
#: What a source deploy adds: Cloud Run functions (the Cloud Functions API) has Cloud Build build the image, Artifact
#: Registry holds it, Cloud Storage the zip (https://cloud.google.com/functions/docs/reference/rest: the function is a
#: cloudfunctions.googleapis.com resource; https://cloud.google.com/run/docs/functions/overview).
SOURCE_DEPLOY_APIS = ("cloudfunctions.googleapis.com", "cloudbuild.googleapis.com", "artifactregistry.googleapis.com",
                      "storage.googleapis.com")
#: What the alerts need: Cloud Logging (log-based metrics) and Cloud Monitoring (alert policies).
ALERT_APIS = ("logging.googleapis.com", "monitoring.googleapis.com")
#: What a Firestore store enables for every job that uses it, so that jobs on a store enable none themselves
#: (another kind's: ``infra.stores.store.store_apis(kind)``).
STORE_APIS = (*BASE_APIS, *(api for apis in PLATFORM_APIS.values() for api in apis), *SOURCE_DEPLOY_APIS, *ALERT_APIS)


#: How long resources wait after this component enabled an API, seconds. An API enabled moments ago still answers
#: 403 "If you enabled this API recently, wait a few minutes for the action to propagate to our systems and retry"
#: (googleapis/google-cloud-rust#5444, firebase/firebase-functions#691); Google's own solutions wait 60 s after
#: enabling one (GoogleCloudPlatform/solutions-builder#127, GoogleCloudPlatform/core-solution-services#14). The enable operation
#: that ``projects.Service`` waits for does not cover this propagation.
API_PROPAGATION_SECONDS = 60


def for_store(apis: tuple[str, ...], store_apis: tuple[str, ...]) -> tuple[str, ...]:
    """``apis`` with Firestore's API replaced by ``store_apis``, the APIs of the store a job uses."""
    return tuple(a for api in apis for a in (store_apis if api == FIRESTORE_API else (api,)))
