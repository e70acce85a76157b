"""The Google APIs the component and the store enable (``gcp.projects.Service``, ``disable_on_destroy=False``).

A module of constants with no imports, so that the job (:mod:`.component`), the store (:mod:`.store`) and the
alerts (:mod:`.alerts`) read one list without importing each other.
"""

#: What every job needs: Cloud Run, Cloud Scheduler, Firestore and IAM (its service accounts and grants).
BASE_APIS = ("run.googleapis.com", "cloudscheduler.googleapis.com", "firestore.googleapis.com", "iam.googleapis.com")
#: What a source deploy adds: Cloud Build builds the image, Artifact Registry holds it, Cloud Storage the zip.
SOURCE_DEPLOY_APIS = ("cloudbuild.googleapis.com", "artifactregistry.googleapis.com", "storage.googleapis.com")
#: What the alerts need: Cloud Logging (log-based metrics) and Cloud Monitoring (alert policies).
ALERT_APIS = ("logging.googleapis.com", "monitoring.googleapis.com")
#: What a store enables for every job that uses it, so that jobs on a store enable none themselves.
STORE_APIS = (*BASE_APIS, *SOURCE_DEPLOY_APIS, *ALERT_APIS)
