"""The Google APIs the component and the store enable (``gcp.projects.Service``, ``disable_on_destroy=False``).

A module of constants with no imports, so that the job (:mod:`.component`), the store (:mod:`.store`) and the
alerts (:mod:`.alerts`) read one list without importing each other.
"""

#: What every job needs: Cloud Scheduler, Firestore and IAM (its service accounts and grants).
BASE_APIS = ("cloudscheduler.googleapis.com", "firestore.googleapis.com", "iam.googleapis.com")
#: The platform serving the handler, per Scheduler target kind: Cloud Run (HTTP target) or App Engine.
PLATFORM_APIS = {"http": ("run.googleapis.com",), "app_engine": ("appengine.googleapis.com",)}
#: What a proxy target adds: a Cloud Build trigger target calls the Cloud Build API.
TARGET_APIS = {"cloud_build_trigger": ("cloudbuild.googleapis.com",)}
#: What a source deploy adds: Cloud Build builds the image, Artifact Registry holds it, Cloud Storage the zip.
SOURCE_DEPLOY_APIS = ("cloudbuild.googleapis.com", "artifactregistry.googleapis.com", "storage.googleapis.com")
#: What the alerts need: Cloud Logging (log-based metrics) and Cloud Monitoring (alert policies).
ALERT_APIS = ("logging.googleapis.com", "monitoring.googleapis.com")
#: What a store enables for every job that uses it, so that jobs on a store enable none themselves.
STORE_APIS = (*BASE_APIS, *(api for apis in PLATFORM_APIS.values() for api in apis), *SOURCE_DEPLOY_APIS, *ALERT_APIS)
